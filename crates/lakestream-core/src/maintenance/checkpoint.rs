//! Checkpoints and log cleanup. A checkpoint is written on demand (or when due: the versions
//! since the last one reach `delta.checkpointInterval`); log files older than
//! `delta.logRetentionDuration` (30 days default) and older than that checkpoint are removed, so
//! time travel inside the window keeps working. Logs refine jobs still need are kept too: a
//! checkpoint at or below the version the job furthest behind consumed, and every commit after it
//! ([`readers`](super::readers)), and a keyed refine output's commits whose inline tombstones
//! are not consolidated yet ([`pending`]). Time comes from the injected [`Clock`]. Only `_delta_log/` of
//! the table is listed and cleaned, so a table stored below another's root is not touched.

use crate::clock::Clock;
use crate::error::Result;
use crate::maintenance::readers::{self, Reader};
use crate::refine::keyed::pending;
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::table::config::TablePropertiesExt;

/// What a checkpoint run did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CheckpointReport {
    /// Table.
    pub table: String,
    /// Version checkpointed, if one was written.
    pub checkpoint_version: Option<u64>,
    /// Expired log files removed.
    pub logs_removed: usize,
    /// Logs were kept for refine jobs up to this version (the one the job furthest behind
    /// consumed).
    pub kept_for_readers_from: Option<u64>,
    /// Refine jobs further behind than the log retention: their logs were not kept.
    pub readers_too_far_behind: Vec<String>,
    /// A keyed refine output: its commits from this version on hold tombstones not yet
    /// consolidated into the job's tombstone table, and were kept.
    pub kept_for_tombstones_from: Option<u64>,
}

/// Version of the last checkpoint (from `_last_checkpoint`), if any.
pub async fn last_checkpoint(h: &TableHandle) -> Result<Option<u64>> {
    h.last_checkpoint().await
}

/// Checkpoint `table` (always when `force`, else only when due) and clean expired logs, keeping
/// those `readers` (the refine jobs reading the table) still need.
pub async fn checkpoint(
    lake: &Lake,
    table: &str,
    force: bool,
    clock: &dyn Clock,
    readers: &[Reader],
) -> Result<CheckpointReport> {
    let h = TableHandle::open_existing(lake, table).await?;
    let version = h.version().unwrap_or(0);
    let snapshot = h.snapshot()?;
    let interval = snapshot.table_config().checkpoint_interval().get();
    let log_retention = snapshot.table_config().log_retention_duration();
    let last = last_checkpoint(&h).await?;
    let due = last.is_none_or(|l| version.saturating_sub(l) >= interval);
    let mut report = CheckpointReport {
        table: table.to_string(),
        ..Default::default()
    };
    if (force || due) && last != Some(version) {
        h.create_checkpoint().await?;
        report.checkpoint_version = Some(version);
    }
    let kept = readers::resolve(&h, readers, clock.now(), false).await?;
    report.readers_too_far_behind = kept.too_far_behind.clone();
    let mut keep = report.checkpoint_version.or(last);
    if let (Some(k), Some(limit)) = (keep, kept.cleanup_limit()) {
        keep = Some(k.min(limit));
        report.kept_for_readers_from = Some(limit);
    }
    // A keyed output's inline tombstones not consolidated yet are read from its commits.
    if let Some(k) = keep
        && let Some(from) = pending::pending_from(lake, &h).await?
    {
        keep = Some(k.min(from));
        report.kept_for_tombstones_from = Some(from);
    }
    if let Some(keep) = keep {
        let cutoff = clock.now().timestamp_millis() - log_retention.as_millis() as i64;
        report.logs_removed = h.cleanup_expired_logs(keep, cutoff).await?;
    }
    Ok(report)
}
