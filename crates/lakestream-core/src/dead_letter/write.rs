//! Writing letters to the dead-letter table, idempotent per record with `txn` actions that do
//! not grow with the records:
//! - Kafka letters: one watermark per source partition, appId
//!   `<pipeline>/<topic>/<partition>/dl`, version = the highest offset dead-lettered. A letter
//!   above it is new. A letter at or below it (a redelivery, or a second dead-letter write of
//!   the same partition below the first one's highest offset: the whole batch after its bad
//!   records) is looked up in the table itself ([`kafka_letters_present`]: files pruned by
//!   statistics, three columns read), so a burst of bad records leaves one `txn` per partition,
//!   not one per record, and no offset is skipped or written twice.
//! - Other origins carry their own key ([`DeadLetter::own_key`]: one per log object and kind,
//!   per unusable input, per refine source version).
//!
//! The table keeps these keys for [`DEAD_LETTER_TXN_RETENTION`]
//! (`delta.setTransactionRetentionDuration`).

use super::letter::{DeadLetter, Origin};
use super::scan::{KafkaLetter, kafka_letters_present};
use super::table::{DATE_COLUMN, DEAD_LETTER_TXN_RETENTION, dead_letter_schema, letters_batch};
use crate::commit::{self, CommitOutcome, CommitSettings, Planned, Planner, TableState};
use crate::error::{Error, Result};
use crate::storage::Lake;
use crate::table::TableHandle;
use chrono::{DateTime, Utc};
use deltalake::kernel::Transaction;
use lakestream_formats::record::app_id;
use std::collections::{BTreeMap, HashMap, HashSet};

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
    /// The origin's own key (appId, version).
    Own(String, i64),
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
        match &l.origin {
            Origin::Kafka {
                topic,
                partition,
                offset,
                ..
            } => Key::Kafka(
                watermark_app_id(self.pipeline, topic, *partition),
                (topic.clone(), *partition, *offset),
            ),
            Origin::Object { app_id, .. } | Origin::Input { app_id, .. } => {
                Key::Own(app_id.clone(), 1)
            }
            // A source version is far below i64::MAX; saturate rather than wrap if ever not.
            Origin::DeltaRow {
                app_id, version, ..
            } => Key::Own(app_id.clone(), i64::try_from(*version).unwrap_or(i64::MAX)),
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
            .map(|l| match self.key(l) {
                Key::Kafka(id, _) | Key::Own(id, _) => id,
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    fn wants_all_txns(&self) -> bool {
        let own: HashSet<String> = self
            .letters
            .iter()
            .filter_map(|l| match self.key(l) {
                Key::Own(id, _) => Some(id),
                Key::Kafka(..) => None,
            })
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
            }
            self.written[i] = true;
            keep.push(l);
        }
        if keep.is_empty() {
            return Ok(None);
        }
        let schema = state.schema.clone().unwrap_or_else(dead_letter_schema);
        let batch = letters_batch(&keep, self.now)?;
        let txns = txns
            .into_iter()
            .map(|(id, v)| Transaction::new(id, v))
            .collect();
        Ok(Some(Planned {
            batch,
            schema,
            partition_columns: vec![DATE_COLUMN.into()],
            txns,
            commit_if_empty: false,
            set_properties: vec![],
            table_properties: vec![(
                "delta.setTransactionRetentionDuration".into(),
                DEAD_LETTER_TXN_RETENTION.into(),
            )],
        }))
    }
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
