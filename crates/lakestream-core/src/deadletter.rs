//! The dead-letter table: every record that cannot be ingested lands here with its raw bytes
//! (base64), where it came from and why, so nothing is ever dropped silently. Writes are
//! idempotent per record, with `txn` actions that do not grow with the records:
//! - Kafka letters: one watermark per source partition, appId
//!   `<pipeline>/<topic>/<partition>/dl`, version = the highest offset dead-lettered. A letter
//!   above it is new. A letter at or below it (a redelivery, or a second dead-letter write of
//!   the same partition below the first one's highest offset: the whole batch after its bad
//!   records) is looked up in the table itself ([`kafka_letters_present`]: files pruned by
//!   statistics, three columns read), so a burst of bad records leaves one `txn` per partition,
//!   not one per record, and no offset is skipped or written twice.
//! - Other sources give their own key (one per log object, per refine source version).
//!
//! The table keeps these keys for [`DEAD_LETTER_TXN_RETENTION`]
//! (`delta.setTransactionRetentionDuration`).

use crate::commit::{self, CommitOutcome, CommitSettings, Planned, Planner, TableState};
use crate::dead_letter_scan::{KafkaLetter, kafka_letters_present};
use crate::error::{Error, Result};
use crate::record::app_id;
use crate::schema::timestamp_type;
use crate::storage::Lake;
use crate::table::TableHandle;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use deltalake::arrow::array::{
    ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Transaction;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// One record that could not be ingested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Kafka topic, when the record came from Kafka.
    pub topic: Option<String>,
    /// Kafka partition.
    pub partition: Option<i32>,
    /// Kafka offset.
    pub offset: Option<i64>,
    /// Kafka timestamp (epoch ms).
    pub kafka_timestamp_ms: Option<i64>,
    /// Source object URI, when the record came from a file (e.g. `s3://bucket/key`).
    pub object_uri: Option<String>,
    /// 1-based line number within the object.
    pub line_number: Option<i64>,
    /// Raw value, base64 (exactly the bytes received; `None` for a null value).
    pub raw_base64: Option<String>,
    /// Why it was rejected.
    pub error: String,
    /// Table it was meant for, if known.
    pub target_table: Option<String>,
    /// Idempotency key for non-Kafka sources: (`txn` appId, version). Kafka letters derive it
    /// from topic/partition/offset.
    pub txn: Option<(String, i64)>,
}

impl DeadLetter {
    /// Raw bytes to base64.
    pub fn encode_raw(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }
}

/// How long the dead-letter table keeps its idempotency keys: longer than any redelivery
/// window (Kafka retention, SQS's 14-day maximum).
pub const DEAD_LETTER_TXN_RETENTION: &str = "interval 30 days";

/// Schema of the dead-letter table (partitioned by `date`, the UTC ingestion date).
pub fn dead_letter_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("kafka_timestamp", timestamp_type(), true),
        Field::new("object_uri", DataType::Utf8, true),
        Field::new("line_number", DataType::Int64, true),
        Field::new("raw_base64", DataType::Utf8, true),
        Field::new("error", DataType::Utf8, false),
        Field::new("target_table", DataType::Utf8, true),
        Field::new("ingested_at", timestamp_type(), false),
        Field::new("date", DataType::Utf8, false),
    ]))
}

/// Result of a dead-letter write: which inputs were written, which were already there.
#[derive(Debug, Default)]
pub struct DeadLetterOutcome {
    /// The commit.
    pub commit: CommitOutcome,
    /// Per input: `true` = written now, `false` = already committed earlier (replay).
    pub written: Vec<bool>,
}

/// Distinct own keys above which a write loads every `txn` of the table in one pass instead of
/// asking per appId (access-log objects; Kafka letters have one key per partition).
const MANY_KEYS: usize = 16;

/// Times the watermarks are read and the letters below them looked up again when a concurrent
/// dead-letter write of the same partitions moved them in between.
const MAX_LOOKUPS: usize = 5;

/// How a letter is made idempotent.
enum Key {
    /// A Kafka record: its partition's watermark appId and its identity.
    Kafka(String, KafkaLetter),
    /// The source's own key (appId, version).
    Own(String, i64),
    /// None (a Kafka letter without topic, partition or offset): always written.
    None,
}

struct DeadLetterPlanner<'a> {
    pipeline: &'a str,
    letters: &'a [DeadLetter],
    now: DateTime<Utc>,
    written: Vec<bool>,
    /// Partition watermarks (appId -> highest offset) that `present` was looked up against.
    checked: HashMap<String, i64>,
    /// Kafka letters at or below their partition's watermark that are in the table.
    present: HashSet<KafkaLetter>,
    /// The watermarks moved since the lookup: look up again before planning.
    stale: bool,
}

/// The watermark appId of a Kafka partition in the dead-letter table.
pub fn watermark_app_id(pipeline: &str, topic: &str, partition: i32) -> String {
    format!("{}/dl", app_id(pipeline, topic, partition))
}

impl DeadLetterPlanner<'_> {
    fn key(&self, l: &DeadLetter) -> Key {
        if let Some((id, v)) = &l.txn {
            return Key::Own(id.clone(), *v);
        }
        match (l.topic.as_deref(), l.partition, l.offset) {
            (Some(t), Some(p), Some(o)) => {
                Key::Kafka(watermark_app_id(self.pipeline, t, p), (t.to_string(), p, o))
            }
            _ => Key::None,
        }
    }

    /// Kafka letters at or below their partition's watermark in `committed`.
    fn below(&self, committed: &HashMap<String, i64>) -> HashSet<KafkaLetter> {
        self.letters
            .iter()
            .filter_map(|l| match self.key(l) {
                Key::Kafka(id, letter) if committed.get(&id).is_some_and(|w| letter.2 <= *w) => {
                    Some(letter)
                }
                _ => None,
            })
            .collect()
    }

    fn watermark_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .letters
            .iter()
            .filter_map(|l| match self.key(l) {
                Key::Kafka(id, _) => Some(id),
                _ => None,
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

impl Planner for DeadLetterPlanner<'_> {
    fn app_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .letters
            .iter()
            .filter_map(|l| match self.key(l) {
                Key::Kafka(id, _) | Key::Own(id, _) => Some(id),
                Key::None => None,
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    fn wants_all_txns(&self) -> bool {
        let own: HashSet<&str> = self
            .letters
            .iter()
            .filter_map(|l| l.txn.as_ref().map(|t| t.0.as_str()))
            .collect();
        own.len() > MANY_KEYS
    }

    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        let mut keep = Vec::new();
        let mut txns: BTreeMap<String, i64> = BTreeMap::new();
        self.written = vec![false; self.letters.len()];
        self.stale = false;
        for (i, l) in self.letters.iter().enumerate() {
            match self.key(l) {
                Key::Own(id, v) => {
                    if state.committed.contains_key(&id) {
                        continue;
                    }
                    txns.insert(id, v);
                }
                Key::Kafka(id, letter) => {
                    let watermark = state.committed.get(&id).copied();
                    if watermark != self.checked.get(&id).copied() {
                        self.stale = true;
                        return Ok(None);
                    }
                    if watermark.is_some_and(|w| letter.2 <= w) && self.present.contains(&letter) {
                        continue;
                    }
                    let top = txns.entry(id).or_insert(watermark.unwrap_or(letter.2));
                    *top = (*top).max(letter.2);
                }
                Key::None => {}
            }
            self.written[i] = true;
            keep.push(l);
        }
        if keep.is_empty() {
            return Ok(None);
        }
        let schema = state.schema.clone().unwrap_or_else(dead_letter_schema);
        let batch = build_batch(&keep, self.now)?;
        let txns = txns
            .into_iter()
            .map(|(id, v)| Transaction::new(id, v))
            .collect();
        Ok(Some(Planned {
            batch,
            schema,
            partition_columns: vec!["date".into()],
            txns,
            commit_if_empty: false,
            table_properties: vec![(
                "delta.setTransactionRetentionDuration".into(),
                DEAD_LETTER_TXN_RETENTION.into(),
            )],
        }))
    }
}

fn build_batch(letters: &[&DeadLetter], now: DateTime<Utc>) -> Result<RecordBatch> {
    let now_us = now.timestamp_micros();
    let date = now.format("%Y-%m-%d").to_string();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter(
            letters.iter().map(|l| l.topic.as_deref()),
        )),
        Arc::new(Int32Array::from_iter(letters.iter().map(|l| l.partition))),
        Arc::new(Int64Array::from_iter(letters.iter().map(|l| l.offset))),
        Arc::new(
            TimestampMicrosecondArray::from_iter(
                letters
                    .iter()
                    .map(|l| l.kafka_timestamp_ms.and_then(|m| m.checked_mul(1000))),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from_iter(
            letters.iter().map(|l| l.object_uri.as_deref()),
        )),
        Arc::new(Int64Array::from_iter(letters.iter().map(|l| l.line_number))),
        Arc::new(StringArray::from_iter(
            letters.iter().map(|l| l.raw_base64.as_deref()),
        )),
        Arc::new(StringArray::from_iter_values(
            letters.iter().map(|l| l.error.as_str()),
        )),
        Arc::new(StringArray::from_iter(
            letters.iter().map(|l| l.target_table.as_deref()),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(letters.iter().map(|_| now_us))
                .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from_iter_values(
            letters.iter().map(|_| date.as_str()),
        )),
    ];
    Ok(RecordBatch::try_new(dead_letter_schema(), columns)?)
}

/// Append dead letters to `table`, skipping those a previous delivery already wrote.
/// Kafka letters at or below their partition's watermark are looked up in the table first (a
/// redelivery, or the whole batch dead-lettered after its bad records); when a concurrent
/// dead-letter write moves a watermark in between, the lookup is made again.
pub async fn write_dead_letters(
    lake: &Lake,
    handle: &mut TableHandle,
    pipeline: &str,
    settings: &CommitSettings,
    letters: &[DeadLetter],
    now: DateTime<Utc>,
) -> Result<DeadLetterOutcome> {
    if letters.is_empty() {
        return Ok(DeadLetterOutcome::default());
    }
    let mut planner = DeadLetterPlanner {
        pipeline,
        letters,
        now,
        written: vec![],
        checked: HashMap::new(),
        present: HashSet::new(),
        stale: false,
    };
    let ids = planner.watermark_ids();
    for _ in 0..MAX_LOOKUPS {
        let exists = handle.sync().await?;
        planner.checked = if exists {
            handle.committed(&ids).await?
        } else {
            HashMap::new()
        };
        planner.present.clear();
        if !planner.below(&planner.checked).is_empty() {
            // The files must be the ones of the version the watermarks are read at.
            handle.refresh().await?;
            planner.checked = handle.committed(&ids).await?;
            let below = planner.below(&planner.checked);
            planner.present = kafka_letters_present(handle, &below).await?;
        }
        let commit = commit::append(lake, handle, settings, &mut planner).await?;
        if planner.stale {
            continue;
        }
        let written = if commit.version.is_some() {
            planner.written
        } else {
            vec![false; letters.len()]
        };
        return Ok(DeadLetterOutcome { commit, written });
    }
    Err(Error::Contention {
        table: handle.name().to_string(),
        attempts: MAX_LOOKUPS as u32,
        last: "dead-letter watermarks kept moving under concurrent dead-letter writes of the \
               same partitions"
            .into(),
    })
}
