//! Looking into the lake: a table's history, reading it as of an older version or time, and
//! the rows commits inserted or deleted, the Athena DDL, and how far behind each job is.
//! Everything here reads; nothing commits.

pub mod changes;
pub mod ddl;
pub mod history;
pub mod lag;
pub mod time_travel;

pub use changes::{Changes, changes};
pub use ddl::{DdlForm, ddl};
pub use history::{History, HistoryEntry, history};
pub use lag::{Lag, lag};
pub use time_travel::{AsOf, read_as_of, resolve_version};

use crate::error::{Error, Result};
use crate::handle::TableHandle;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::collections::BTreeMap;

/// What `_delta_log/` holds (one LIST): commit files with their modification times, and the
/// versions that have a checkpoint.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogListing {
    /// Commit version -> the commit file's modification time.
    pub commits: BTreeMap<u64, DateTime<Utc>>,
    /// Versions with a checkpoint.
    pub checkpoints: Vec<u64>,
}

impl LogListing {
    /// List the table's log.
    pub async fn list(handle: &TableHandle) -> Result<Self> {
        let log_store = handle.table().log_store();
        let store = log_store.object_store(None);
        let prefix = log_store.log_path().clone();
        let metas: Vec<_> = store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| Error::storage(handle.name(), e))?;
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
