//! What a table's `_delta_log/` holds, from one LIST ([`LogListing`]: commit files with their
//! modification times, checkpointed versions), and the commit times derived from it
//! ([`commit_times`]): the one notion of commit time `history` prints and time travel
//! ([`TableHandle::resolve`](super::TableHandle::resolve)) resolves by.

use super::handle::TableHandle;
use crate::error::{Error, Result};
use chrono::{DateTime, Utc};
use deltalake::logstore::LogStoreRef;
use futures::TryStreamExt;
use std::collections::BTreeMap;

/// What `_delta_log/` holds (one LIST): commit files with their modification times, and the
/// versions that have a checkpoint.
#[derive(Debug, Clone, Default)]
pub struct LogListing {
    /// Commit version -> the commit file's modification time.
    pub commits: BTreeMap<u64, DateTime<Utc>>,
    /// Versions with a checkpoint.
    pub checkpoints: Vec<u64>,
}

impl LogListing {
    /// List the table's log.
    pub async fn list(handle: &TableHandle) -> Result<Self> {
        Self::list_store(&handle.table.log_store(), handle.name()).await
    }

    /// List the log of `name` through its `log_store`.
    pub(super) async fn list_store(log_store: &LogStoreRef, name: &str) -> Result<Self> {
        let store = log_store.object_store(None);
        let prefix = log_store.log_path().clone();
        let metas: Vec<_> = store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| Error::storage(name, e))?;
        let mut out = Self::default();
        for meta in metas {
            let Some(name) = meta.location.filename() else {
                continue;
            };
            let digits = name.split('.').next().unwrap_or_default();
            if digits.len() != 20 {
                continue;
            }
            let Ok(version) = digits.parse::<u64>() else {
                continue;
            };
            if name.len() == 25 && name.ends_with(".json") {
                out.commits.insert(version, meta.last_modified);
            } else if name.contains(".checkpoint") && name.ends_with(".parquet") {
                out.checkpoints.push(version);
            }
        }
        out.checkpoints.sort_unstable();
        out.checkpoints.dedup();
        Ok(out)
    }

    /// Oldest commit file still in the log.
    pub fn oldest_commit(&self) -> Option<u64> {
        self.commits.keys().next().copied()
    }

    /// Oldest version a reader can load: version 0 while its commit file exists, else the oldest
    /// checkpoint (log cleanup keeps every commit after it).
    pub fn oldest_readable(&self) -> Option<u64> {
        if self.commits.contains_key(&0) {
            return Some(0);
        }
        self.checkpoints
            .iter()
            .copied()
            .find(|c| self.oldest_commit().is_none_or(|o| *c + 1 >= o))
    }
}

/// The time of every commit in `listing`, the one notion of commit time `history` prints and
/// `show --as-of` resolves by (Spark's and the Delta protocol's):
///
/// - the commit's `inCommitTimestamp` when the table has in-commit timestamps
///   (`delta.enableInCommitTimestamps`, from `delta.inCommitTimestampEnablementVersion` on);
/// - else the commit file's modification time as the store reports it (on S3 its Last-Modified,
///   whole seconds). Lakestream's writer (delta-rs) writes no in-commit timestamps, so for our
///   tables it is the file time. `commitInfo.timestamp` is the writer's own clock (Lambdas,
///   laptops and Spark clusters disagree) and is not used; `history --json` shows it as
///   `commit_info_timestamp`.
///
/// Times are cut to milliseconds (what is printed) and made strictly increasing the way Spark's
/// `DeltaHistoryManager` does: a commit not later than the one before it counts as 1 ms after
/// it, so commits within one S3 second get distinct times, each resolving to its own version.
pub async fn commit_times(
    handle: &TableHandle,
    listing: &LogListing,
) -> Result<BTreeMap<u64, DateTime<Utc>>> {
    let mut times = listing.commits.clone();
    if handle
        .property("delta.enableInCommitTimestamps")?
        .is_some_and(|v| v == "true")
    {
        let from: u64 = handle
            .property("delta.inCommitTimestampEnablementVersion")?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        for (v, at) in times.iter_mut().filter(|(v, _)| **v >= from) {
            if let Some(commit) = handle.commit(*v).await?
                && let Some(ict) = commit.info().in_commit_timestamp
            {
                *at = ict;
            }
        }
    }
    Ok(monotonic(times))
}

/// Cut to milliseconds and make strictly increasing in version order (see [`commit_times`]).
fn monotonic(mut times: BTreeMap<u64, DateTime<Utc>>) -> BTreeMap<u64, DateTime<Utc>> {
    let mut previous: Option<DateTime<Utc>> = None;
    for at in times.values_mut() {
        let ms = DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(*at);
        *at = match previous {
            Some(p) if ms <= p => p + chrono::Duration::milliseconds(1),
            _ => ms,
        };
        previous = Some(*at);
    }
    times
}

#[cfg(test)]
mod tests {
    use super::monotonic;
    use chrono::{DateTime, Utc};
    use std::collections::BTreeMap;

    #[test]
    fn commit_times_are_milliseconds_and_strictly_increasing() {
        let at = |ms: i64| DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default();
        let micros = DateTime::<Utc>::from_timestamp_micros(5_000_700).unwrap_or_default();
        // S3: three commits in one second, one with a clock step back, then a later one.
        let times = BTreeMap::from([
            (0, at(1_000)),
            (1, at(1_000)),
            (2, at(1_000)),
            (3, at(900)),
            (4, micros),
        ]);
        let got: Vec<i64> = monotonic(times)
            .values()
            .map(|t| t.timestamp_millis())
            .collect();
        assert_eq!(got, [1_000, 1_001, 1_002, 1_003, 5_000]);
    }
}
