//! The commits of a table, decoded: the one reader of commit files outside the commit engine.
//!
//! [`TableHandle::commit`] reads one commit file (`None` when it is not there: not written yet,
//! or removed by log cleanup); [`TableHandle::commits`] reads a range of versions as a stream of
//! [`Commit`]s, in version order (or newest first), one at a time or a few ahead. In a range, a
//! commit file that is gone is the one typed error [`Error::CommitGone`], naming the oldest
//! commit the log still holds (found with one LIST, only then): every reader maps it the same
//! way, into what its operator can do (read from there, skip ahead, rebuild).
//!
//! A [`Commit`] keeps the file's bytes and decodes on demand: its actions
//! ([`Commit::actions`], delta-rs's decoding, strict), its `txn`s and its commit info
//! ([`Commit::info`], lenient: lines that are not JSON objects are skipped).

use super::handle::TableHandle;
use super::log_listing::LogListing;
use crate::error::{Error, Result};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use deltalake::kernel::Action;
use deltalake::logstore::LogStoreRef;
use futures::StreamExt;
use futures::stream::BoxStream;
use std::ops::RangeInclusive;

/// One commit file of a table, read.
#[derive(Debug, Clone)]
pub struct Commit {
    table: String,
    version: u64,
    bytes: Bytes,
}

/// What a commit's `commitInfo` says about when and how it was made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitInfo {
    /// `commitInfo.timestamp`: the writer's clock when it committed.
    pub timestamp: Option<DateTime<Utc>>,
    /// `commitInfo.inCommitTimestamp`, when the writer recorded one.
    pub in_commit_timestamp: Option<DateTime<Utc>>,
    /// `commitInfo.operation` (e.g. `WRITE`, `OPTIMIZE`).
    pub operation: Option<String>,
}

impl CommitInfo {
    /// When the writer says it committed: `inCommitTimestamp`, else `commitInfo.timestamp`.
    pub fn written_at(&self) -> Option<DateTime<Utc>> {
        self.in_commit_timestamp.or(self.timestamp)
    }

    /// Read from the object of a `commitInfo` action (the one place its fields are decoded).
    pub fn from_action(info: &serde_json::Map<String, serde_json::Value>) -> Self {
        use serde_json::Value;
        let ms = |key: &str| {
            info.get(key)
                .and_then(Value::as_i64)
                .and_then(DateTime::from_timestamp_millis)
        };
        CommitInfo {
            in_commit_timestamp: ms("inCommitTimestamp"),
            timestamp: ms("timestamp"),
            operation: info
                .get("operation")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

impl Commit {
    /// A commit of `table` at `version` from its file's bytes.
    pub fn new(table: &str, version: u64, bytes: Bytes) -> Self {
        Self {
            table: table.to_string(),
            version,
            bytes,
        }
    }

    /// The version.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The commit file as written (newline-delimited JSON actions).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The commit file's bytes, owned.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The commit's actions, decoded by delta-rs; a line that is not a valid action is an
    /// [`Error::Storage`] naming the version and line.
    pub fn actions(&self) -> Result<Vec<Action>> {
        deltalake::logstore::get_actions(self.version, &self.bytes)
            .map_err(|e| Error::storage(&self.table, e))
    }

    /// `(appId, version)` of every `txn` action (lines that are not valid `txn`s are skipped).
    pub fn txns(&self) -> Vec<(String, i64)> {
        super::txns::txns_in_commit(&self.bytes)
    }

    /// The commit info (the last `commitInfo` line wins; none: all `None`).
    pub fn info(&self) -> CommitInfo {
        commit_info(&self.bytes)
    }

    /// When the writer says it committed ([`CommitInfo::written_at`]).
    pub fn written_at(&self) -> Option<DateTime<Utc>> {
        self.info().written_at()
    }

    /// An application field of the commit's `commitInfo` (e.g. a keyed run's inline
    /// tombstones); `None` when the commit has no `commitInfo` or not this field.
    pub fn info_field(&self, key: &str) -> Option<serde_json::Value> {
        info_object(&self.bytes).and_then(|mut info| info.remove(key))
    }
}

/// The `commitInfo` of one commit file's bytes (see [`Commit::info`]).
pub fn commit_info(bytes: &[u8]) -> CommitInfo {
    info_object(bytes)
        .map(|info| CommitInfo::from_action(&info))
        .unwrap_or_default()
}

/// The object of the last `commitInfo` action of a commit file's bytes (lines that are not
/// JSON objects skipped).
fn info_object(bytes: &[u8]) -> Option<serde_json::Map<String, serde_json::Value>> {
    use serde_json::Value;
    let mut out = None;
    for line in bytes.split(|b| *b == b'\n') {
        if !line.windows(12).any(|w| w == b"\"commitInfo\"") {
            continue;
        }
        let Ok(Value::Object(mut action)) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if let Some(Value::Object(info)) = action.remove("commitInfo") {
            out = Some(info);
        }
    }
    out
}

/// One commit file of `name` through `log_store`; `None` when it is not there.
pub(super) async fn read_commit(
    log_store: &LogStoreRef,
    name: &str,
    version: u64,
) -> Result<Option<Bytes>> {
    log_store
        .read_commit_entry(version)
        .await
        .map_err(|e| Error::storage(name, e))
}

/// The commit of `version`, or [`Error::CommitGone`] with the oldest commit still listed.
async fn read_or_gone(log_store: LogStoreRef, name: String, version: u64) -> Result<Commit> {
    match read_commit(&log_store, &name, version).await? {
        Some(bytes) => Ok(Commit::new(&name, version, bytes)),
        None => {
            let oldest = LogListing::list_store(&log_store, &name)
                .await?
                .oldest_commit();
            Err(Error::CommitGone {
                table: name,
                version,
                oldest,
            })
        }
    }
}

/// A range of a table's commits to read ([`TableHandle::commits`]): oldest first, one at a
/// time, unless told otherwise.
#[derive(Debug, Clone)]
pub struct CommitRange {
    log_store: LogStoreRef,
    name: String,
    range: RangeInclusive<u64>,
    newest_first: bool,
    ahead: usize,
}

impl CommitRange {
    /// Read the newest version first.
    pub fn newest_first(mut self) -> Self {
        self.newest_first = true;
        self
    }

    /// Read up to `n` commit files at once (still yielded in order; at least 1). A reader that
    /// may stop early keeps 1, so no file past where it stops is fetched.
    pub fn read_ahead(mut self, n: usize) -> Self {
        self.ahead = n.max(1);
        self
    }

    /// The commits, in order; a missing commit file is [`Error::CommitGone`] (the stream may
    /// go on after it: callers stop at the first error).
    pub fn stream(self) -> BoxStream<'static, Result<Commit>> {
        let versions: Box<dyn Iterator<Item = u64> + Send> = if self.newest_first {
            Box::new(self.range.rev())
        } else {
            Box::new(self.range)
        };
        let (log_store, name) = (self.log_store, self.name);
        futures::stream::iter(versions)
            .map(move |v| read_or_gone(log_store.clone(), name.clone(), v))
            .buffered(self.ahead)
            .boxed()
    }
}

impl TableHandle {
    /// The commit of `version`; `None` when its file is not there (not committed yet, or
    /// removed by log cleanup). Storage errors are retryable.
    pub async fn commit(&self, version: u64) -> Result<Option<Commit>> {
        let log_store = self.table.log_store();
        Ok(read_commit(&log_store, &self.name, version)
            .await?
            .map(|b| Commit::new(&self.name, version, b)))
    }

    /// The commits of `range` (see [`CommitRange`]); a version whose file is gone is
    /// [`Error::CommitGone`].
    pub fn commits(&self, range: RangeInclusive<u64>) -> CommitRange {
        CommitRange {
            log_store: self.table.log_store(),
            name: self.name.clone(),
            range,
            newest_first: false,
            ahead: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_info_reads_the_writer_and_in_commit_times() {
        let bytes = br#"{"commitInfo":{"timestamp":5,"inCommitTimestamp":9,"operation":"WRITE"}}
{"txn":{"appId":"p/orders/0","version":41}}
not json
"#;
        let c = Commit::new("raw/order", 3, Bytes::from_static(bytes));
        let info = c.info();
        assert_eq!(info.timestamp.map(|t| t.timestamp_millis()), Some(5));
        assert_eq!(c.written_at().map(|t| t.timestamp_millis()), Some(9));
        assert_eq!(info.operation.as_deref(), Some("WRITE"));
        assert_eq!(c.txns(), [("p/orders/0".to_string(), 41)]);
        assert!(c.actions().is_err(), "delta-rs decoding is strict");
        let none = Commit::new("raw/order", 4, Bytes::from_static(b"{\"add\":{}}"));
        assert_eq!(none.info(), CommitInfo::default());
        assert_eq!(none.written_at(), None);
    }
}
