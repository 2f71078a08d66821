//! What an invocation did, per record and in total. Every record ends in exactly one
//! [`RecordOutcome`] other than `Pending`; one left pending is a bug and fails the invocation.

use crate::commit::CommitOutcome;

/// Where one record of the batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOutcome {
    /// Not settled yet (only during an invocation).
    Pending,
    /// Appended to its table by this invocation.
    Written,
    /// In the dead-letter table (written now, or found there from an earlier delivery).
    DeadLettered,
    /// An earlier delivery already committed it (its partition's `txn` covers its offset).
    AlreadyCommitted,
    /// The same (topic, partition, offset) appeared earlier in this batch.
    RepeatedInBatch,
    /// A tombstone (null value) of a CDC topic: it carries no change (Debezium sends one after
    /// each delete for log compaction), so it is skipped, never dead-lettered.
    Tombstone,
}

/// Per-table result of an invocation.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TableReport {
    /// Table name.
    pub table: String,
    /// Records routed to this table.
    pub received: usize,
    /// Rows appended.
    pub written: usize,
    /// Records sent to the dead-letter table.
    pub dead_lettered: usize,
    /// Records skipped because an earlier delivery already committed them.
    pub duplicates: usize,
    /// Unknown top-level fields ignored.
    pub unknown_fields_ignored: u64,
    /// Columns added by schema evolution.
    pub columns_added: Vec<String>,
    /// Committed version, if anything was written.
    pub version: Option<u64>,
    /// Data files added.
    pub files: usize,
    /// Bytes of data files added.
    pub bytes: u64,
    /// Commit attempts.
    pub attempts: u32,
    /// Conflicts with other writers.
    pub conflicts: u32,
    /// The table refused the write for good; its records were dead-lettered with this reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

impl TableReport {
    pub(crate) fn record_commit(&mut self, outcome: &CommitOutcome) {
        if outcome.version.is_some() {
            self.version = outcome.version;
            self.files += outcome.files;
            self.bytes += outcome.bytes;
        }
        self.attempts += outcome.attempts;
        self.conflicts += outcome.conflicts;
    }
}

/// Result of one invocation. Invariant, checked from the per-record outcomes:
/// `received == written + dead_lettered + duplicates_already_committed +
/// duplicates_repeated_in_batch + tombstones_skipped`, with `duplicates` the sum of the two
/// duplicate counts.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct IngestReport {
    /// Records in the input.
    pub received: usize,
    /// Rows appended to data tables.
    pub written: usize,
    /// Records in the dead-letter table.
    pub dead_lettered: usize,
    /// Records skipped as duplicates, for either reason below.
    pub duplicates: usize,
    /// Skipped: an earlier delivery committed them (replays, redeliveries).
    pub duplicates_already_committed: usize,
    /// Skipped: the same (topic, partition, offset) earlier in the same batch.
    pub duplicates_repeated_in_batch: usize,
    /// CDC tombstones (null values) skipped: they carry no change.
    pub tombstones_skipped: usize,
    /// Value bytes received.
    pub bytes_received: usize,
    /// Largest (now - Kafka timestamp) over the records, ms.
    pub max_lag_ms: Option<i64>,
    /// One entry per data table touched.
    pub tables: Vec<TableReport>,
    /// Dead-letter commit version, if any.
    pub dead_letter_version: Option<u64>,
}

impl IngestReport {
    /// Total conflicts across tables.
    pub fn conflicts(&self) -> u32 {
        self.tables.iter().map(|t| t.conflicts).sum()
    }

    /// Fill the totals from the final per-record outcomes.
    pub(crate) fn count(&mut self, outcomes: &[RecordOutcome]) {
        for s in outcomes {
            match s {
                RecordOutcome::Written => self.written += 1,
                RecordOutcome::DeadLettered => self.dead_lettered += 1,
                RecordOutcome::AlreadyCommitted => self.duplicates_already_committed += 1,
                RecordOutcome::RepeatedInBatch => self.duplicates_repeated_in_batch += 1,
                RecordOutcome::Tombstone => self.tombstones_skipped += 1,
                RecordOutcome::Pending => {}
            }
        }
        self.duplicates = self.duplicates_already_committed + self.duplicates_repeated_in_batch;
    }
}
