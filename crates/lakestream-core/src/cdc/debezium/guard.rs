//! What one record may not change about its table (issue 38: ordering values and keys come from
//! the record, so they are checked before it lands): the table's keys and the kind of position
//! its changes are ordered by are fixed when its bronze table is created (its properties, else
//! the first record of the batch), and a source time may not be far in the future.

use super::BronzeTarget;
use super::envelope::Change;
use chrono::{DateTime, Utc};
use lakestream_formats::config::bronze;

/// How far after its ingestion a change's source time may be (7 days, in µs).
const MAX_SOURCE_SKEW_US: i64 = 7 * 24 * 3600 * 1_000_000;

/// The table's fixed identity, learnt from its properties or its first record.
pub(super) struct TableGuard {
    /// Key field names, sorted; `None` when declared in the config (not compared) or unknown.
    keys: Option<Vec<String>>,
    /// Whether the family declares the keys.
    declared: bool,
    /// The kind of position (`lsn`, `file`, ...).
    pub(super) positions: Option<String>,
    /// The latest source time accepted (µs).
    latest_source_us: i64,
}

impl TableGuard {
    /// The guard of `target`'s table, whose properties name `(keys, positions)` (`None` for a
    /// new table), for records ingested at `ingested_at`.
    pub(super) fn new(
        target: &BronzeTarget,
        (keys, positions): (Option<&[String]>, Option<&str>),
        ingested_at: DateTime<Utc>,
    ) -> Self {
        let declared = target.declared_keys.is_some();
        Self {
            keys: keys.filter(|k| !k.is_empty() && !declared).map(sorted),
            declared,
            positions: positions.filter(|k| !k.is_empty()).map(str::to_string),
            latest_source_us: ingested_at.timestamp_micros() + MAX_SOURCE_SKEW_US,
        }
    }

    /// Why `change` may not land (a dead letter), or `None`.
    pub(super) fn refuse(&self, change: &Change) -> Option<String> {
        if !self.declared && !change.key_fields.is_empty() {
            let fields = sorted(&change.key_fields);
            if let Some(keys) = self.keys.as_ref().filter(|k| **k != fields) {
                return Some(format!(
                    "the record key names [{}], the table's keys are [{}] (fixed when its bronze \
                     table was created); declare the keys in `cdc.<family>.keys` if the source \
                     table has none, or rebuild the table if its primary key changed (README \
                     \"CDC over a table's life\")",
                    fields.join(", "),
                    keys.join(", ")
                ));
            }
        }
        // One topic, one kind of position: `__seq`s of two kinds do not compare. Snapshot rows
        // are exempt (an incremental snapshot's rows may carry no position of the stream's kind).
        if let Some(k) = self.positions.as_ref().filter(|k| {
            !change.position_kind.is_empty()
                && change.op != bronze::OP_SNAPSHOT
                && **k != change.position_kind
        }) {
            return Some(format!(
                "the change is ordered by source.{}, the table's changes by source.{k}: they \
                 cannot be compared (is another connector writing to this topic?)",
                change.position_kind
            ));
        }
        // A commit time from the future is data, not a clock: it would rank and date versions
        // (and prove a position restart) for good. A week of skew is tolerated.
        if change
            .source_ts
            .is_some_and(|ts| ts > self.latest_source_us)
        {
            return Some(
                "source.ts_ms is more than 7 days after the time it was ingested; check the \
                 source database's clock"
                    .into(),
            );
        }
        None
    }

    /// `change` lands: it fixes the keys and the kind of position when they were not known
    /// (a new table's first change; a snapshot row fixes no position kind).
    pub(super) fn accept(&mut self, change: &Change) {
        if !self.declared && !change.key_fields.is_empty() && self.keys.is_none() {
            self.keys = Some(sorted(&change.key_fields));
        }
        if !change.position_kind.is_empty()
            && change.op != bronze::OP_SNAPSHOT
            && self.positions.is_none()
        {
            self.positions = Some(change.position_kind.to_string());
        }
    }
}

/// Key field names, sorted (a key's identity, whatever order its schema lists them in).
fn sorted(keys: &[String]) -> Vec<String> {
    let mut k = keys.to_vec();
    k.sort();
    k
}
