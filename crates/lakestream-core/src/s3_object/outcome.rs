//! What one ingest call of notified objects (access logs, CDC files) did, per object and in total:
//! the answer the function turns into "acknowledge" or "retry" per queue message.

use lakestream_formats::notification::LogObject;
use std::collections::BTreeMap;

/// What happened to one object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ObjectOutcome {
    /// Rows committed now (plus lines dead-lettered).
    Committed {
        /// Rows written.
        rows: usize,
        /// Lines dead-lettered.
        dead_lettered: usize,
    },
    /// An earlier delivery already committed it.
    AlreadyCommitted,
    /// The object no longer exists; recorded in dead letters.
    Missing,
    /// The object was overwritten after this notification (its ETag no longer matches);
    /// recorded in dead letters, acknowledged: the overwrite's own notification ingests it.
    Superseded,
    /// Not read or not written, for good: its bucket is not a configured source or it lies
    /// inside the lake (never read), the source refused the key, or a limit of
    /// `[access_logs]` refused it as a whole (too large, inflates too far, too many malformed
    /// lines); recorded in dead letters with the reason, acknowledged.
    Refused {
        /// Why, and what to do.
        reason: String,
    },
    /// Could not be processed now; retry later (the message must not be acknowledged).
    Failed {
        /// Why.
        reason: String,
    },
}

/// Result of one ingest call.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ObjectIngestReport {
    /// Outcome per object, in input order.
    pub objects: Vec<(String, ObjectOutcome)>,
    /// Lines parsed into rows (committed now).
    pub rows_written: usize,
    /// Dead letters: bad lines and rows, and objects refused whole.
    pub lines_dead_lettered: usize,
    /// Commits per table: table -> version.
    pub versions: BTreeMap<String, u64>,
    /// Bytes read from objects.
    pub bytes_read: usize,
}

impl ObjectIngestReport {
    /// True when `object` must be retried.
    pub fn failed(&self, object: &LogObject) -> bool {
        let uri = object.uri();
        self.objects
            .iter()
            .any(|(u, o)| *u == uri && matches!(o, ObjectOutcome::Failed { .. }))
    }
}
