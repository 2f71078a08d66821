//! `DESCRIBE HISTORY` for a table: one entry per commit, newest first, read from the commit
//! files themselves (one GET each, 16 at a time), so it shows what any writer committed —
//! ours, delta-rs's, Spark's — and stops at the oldest commit the log still holds. Each
//! entry's time is the one `show --as-of` resolves by ([`super::commit_times`]).

use super::LogListing;
pub use crate::commit::entry::{HistoryEntry, parse_commit};
use crate::error::{Error, Result};
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::DeltaTableError;
use futures::TryStreamExt;

/// A table's history.
#[derive(Debug, Clone, serde::Serialize)]
pub struct History {
    /// Table name.
    pub table: String,
    /// Latest version.
    pub latest: u64,
    /// Oldest version whose commit file is still in the log (older ones were cleaned up).
    pub oldest_in_log: u64,
    /// Entries, newest first.
    pub entries: Vec<HistoryEntry>,
}

/// Commit files read at once.
const CONCURRENCY: usize = 16;

/// The newest `limit` commits of `table` (all the log holds when `None`).
pub async fn history(lake: &Lake, table: &str, limit: Option<usize>) -> Result<History> {
    let handle = TableHandle::open_existing(lake, table).await?;
    let latest = handle.version().unwrap_or(0);
    let listing = LogListing::list(&handle).await?;
    let oldest = listing.oldest_commit().unwrap_or(latest);
    let first = match limit {
        Some(n) => latest
            .saturating_sub(n.saturating_sub(1) as u64)
            .max(oldest),
        None => oldest,
    };
    let times = super::commit_times(&handle, &listing).await?;
    let mut entries: Vec<HistoryEntry> = handle
        .commits(first..=latest)
        .newest_first()
        .read_ahead(CONCURRENCY)
        .stream()
        .map_ok(|c| parse_commit(c.version(), c.bytes()))
        .map_err(|e| match e {
            Error::CommitGone { version, .. } => Error::storage(
                table,
                DeltaTableError::Generic(format!(
                    "commit {version} disappeared while reading the history (log cleanup ran); read it again"
                )),
            ),
            e => e,
        })
        .try_collect()
        .await?;
    for e in &mut entries {
        e.timestamp = times.get(&e.version).copied();
    }
    Ok(History {
        table: table.to_string(),
        latest,
        oldest_in_log: oldest,
        entries,
    })
}
