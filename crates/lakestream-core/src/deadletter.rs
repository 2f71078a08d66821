//! The dead-letter table: every record that cannot be ingested lands here with its raw bytes
//! (base64), where it came from and why, so nothing is ever dropped silently. Writes are
//! idempotent per record: a Kafka letter's `txn` appId is
//! `<pipeline>/<topic>/<partition>/dead-letter/<offset>` (exact, whatever else the same
//! invocation dead-letters before or after it); other sources give their own key. The table keeps
//! these keys for [`DEAD_LETTER_TXN_RETENTION`] (`delta.setTransactionRetentionDuration`).

use crate::commit::{self, CommitOutcome, CommitSettings, Planned, Planner, TableState};
use crate::error::Result;
use crate::handle::TableHandle;
use crate::record::app_id;
use crate::schema::timestamp_type;
use crate::storage::Lake;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use deltalake::arrow::array::{
    ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Transaction;
use std::collections::BTreeMap;
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

struct DeadLetterPlanner<'a> {
    pipeline: &'a str,
    letters: &'a [DeadLetter],
    now: DateTime<Utc>,
    written: Vec<bool>,
}

impl DeadLetterPlanner<'_> {
    /// The letter's idempotency key: its own, or one per Kafka record.
    fn key(&self, l: &DeadLetter) -> Option<(String, i64)> {
        if let Some(k) = &l.txn {
            return Some(k.clone());
        }
        let offset = l.offset?;
        let partition = app_id(self.pipeline, l.topic.as_deref()?, l.partition?);
        Some((format!("{partition}/dead-letter/{offset}"), offset))
    }
}

impl Planner for DeadLetterPlanner<'_> {
    fn app_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .letters
            .iter()
            .filter_map(|l| self.key(l).map(|k| k.0))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    fn wants_all_txns(&self) -> bool {
        true
    }

    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        let mut keep = Vec::new();
        let mut txns: BTreeMap<String, i64> = BTreeMap::new();
        self.written = vec![false; self.letters.len()];
        for (i, l) in self.letters.iter().enumerate() {
            if let Some((id, v)) = self.key(l) {
                if state.committed.contains_key(&id) {
                    continue;
                }
                txns.insert(id, v);
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
    };
    let commit = commit::append(lake, handle, settings, &mut planner).await?;
    let written = if commit.version.is_some() {
        planner.written
    } else {
        vec![false; letters.len()]
    };
    Ok(DeadLetterOutcome { commit, written })
}
