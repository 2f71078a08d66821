//! What refine jobs still need from the tables they read. A job records the last version of each
//! source it consumed as a `txn` in its output (`<pipeline>/<job>/<table>`); until it reads on
//! it needs the files live at that version (its join state) and every file a later version
//! added, and the log to load that version and read the later ones. Maintenance keeps them:
//! vacuum deletes no file removed after the oldest consumed version, and log cleanup keeps a
//! checkpoint at or below it and every commit after it.
//!
//! **How far behind a job may fall**: as long as the first version it has not read was committed
//! less than the source's `delta.logRetentionDuration` ago (30 days by default). A job further
//! behind is not waited for (its unread files go at the next vacuum, its commits at the next log
//! cleanup) and fails with what to do when it runs (`lakestream refine JOB --skip-to`, then
//! rebuild the output). `lakestream lag` shows, per job, when that limit is reached.
//!
//! A job that has consumed nothing yet (its output does not exist) reads from version 0: it is
//! kept for like a job that lags from there, within the same limit (a new job on a table whose
//! first commit is older than the log retention, or already cleaned up, is not waited for and is
//! told to skip ahead). A CDC family's apply job exists as soon as its bronze table does, so a
//! bronze compacted and vacuumed before the first apply keeps what the apply has to read.
//!
//! The library takes the readers as values ([`Reader`]); callers read them once per run with
//! [`refine_readers`] (the maintenance function, the CLI's maintenance commands).

use crate::error::{Error, Result};
use crate::refine::source_app_id;
use crate::storage::Lake;
use crate::table::{Commit, TableHandle};
use chrono::{DateTime, Utc};
use deltalake::kernel::Action;
use deltalake::table::config::TablePropertiesExt;
use futures::{StreamExt, TryStreamExt};
use lakestream_formats::config::PipelineConfig;
use std::collections::{BTreeMap, HashSet};

/// Commit files read at once while collecting what later versions removed.
const READ_CONCURRENCY: usize = 16;

/// A refine job reading a table, and the last version of it the job consumed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Reader {
    /// The refine job.
    pub job: String,
    /// Last version consumed (`None`: nothing yet; the job will read from version 0 and is
    /// kept for from there).
    pub consumed: Option<u64>,
}

/// Readers per source table.
pub type Readers = BTreeMap<String, Vec<Reader>>;

/// The refine readers of every table a job of `config` (or a CDC family's apply job) reads, from each output's `txn`s (an
/// output not written yet: the job consumed nothing).
pub async fn refine_readers(lake: &Lake, config: &PipelineConfig) -> Result<Readers> {
    let mut out = Readers::new();
    // Configured jobs and every `[[cdc]]` family table's apply job (found by listing).
    for job in &crate::refine::cdc::family::all_jobs(lake, config).await? {
        let mut output = TableHandle::open(lake, &job.output)?;
        let exists = output.refresh().await?;
        for source in job.sources() {
            let consumed = consumed_version(&mut output, exists, config, &job.job, source).await?;
            out.entry(source.to_string()).or_default().push(Reader {
                job: job.job.clone(),
                consumed,
            });
        }
    }
    Ok(out)
}

/// The source version refine job `job` last consumed from `source`, from the `txn` in its
/// `output` table (`exists`: the output has been created; `None`: nothing consumed yet).
pub async fn consumed_version(
    output: &mut TableHandle,
    exists: bool,
    config: &PipelineConfig,
    job: &str,
    source: &str,
) -> Result<Option<u64>> {
    if !exists {
        return Ok(None);
    }
    let app = source_app_id(&config.pipeline, job, source);
    Ok(output
        .committed(std::slice::from_ref(&app))
        .await?
        .get(&app)
        .and_then(|v| u64::try_from(*v).ok()))
}

/// The first version a reader has not read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unread {
    /// The version.
    pub version: u64,
    /// Its commit time (`None`: not recorded, or the commit file is gone).
    pub committed_at: Option<DateTime<Utc>>,
    /// Its commit file is gone (log cleanup): the job cannot read on.
    pub gone: bool,
}

/// The first version after `consumed` in `h`'s table (loaded), `None` when the reader is caught
/// up (or consumed more than the table holds: a re-created table, refused by the job itself).
pub async fn first_unread(h: &TableHandle, consumed: Option<u64>) -> Result<Option<Unread>> {
    let latest = h.version().unwrap_or(0);
    let version = consumed.map_or(0, |c| c + 1);
    if version > latest {
        return Ok(None);
    }
    let commit = h.commit(version).await?;
    Ok(Some(Unread {
        version,
        committed_at: commit.as_ref().and_then(|c| c.written_at()),
        gone: commit.is_none(),
    }))
}

/// How far behind a reader of `h`'s table may fall: its `delta.logRetentionDuration`.
pub fn max_lag(h: &TableHandle) -> Result<chrono::Duration> {
    let retention = h.snapshot()?.table_config().log_retention_duration();
    Ok(chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX))
}

/// What maintenance of one table keeps for its readers.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Kept {
    /// The first version not read by the reader furthest behind among those kept for: its
    /// checkpoint and every commit from it stay, and every file removed from it on.
    pub from_version: Option<u64>,
    /// The jobs kept for.
    pub jobs: Vec<String>,
    /// Jobs further behind than the table's log retention (or whose next commit is already
    /// gone): not kept for; they fail with what to do when they run.
    pub too_far_behind: Vec<String>,
    /// Paths (relative to the table root, percent-decoded) that versions from `from_version`
    /// removed: vacuum keeps them.
    #[serde(skip)]
    pub removed: HashSet<String>,
}

impl Kept {
    /// Is `path` (relative to the table root) removed by a version a reader still has to read?
    pub fn needs(&self, path: &str) -> bool {
        self.removed.contains(&decoded(path))
    }

    /// The version log cleanup may clean up to (it keeps a checkpoint at or below it and every
    /// commit after that checkpoint): the consumed version of the reader furthest behind.
    pub fn cleanup_limit(&self) -> Option<u64> {
        self.from_version.map(|v| v.saturating_sub(1))
    }
}

/// A path as delta-rs compares it, percent-decoded (the log stores paths encoded).
pub(crate) fn decoded(path: &str) -> String {
    crate::partition_path::decode(path.trim_start_matches('/'))
}

/// What `readers` of `h`'s table (loaded) still need as of `now`; with `files`, also the paths
/// removed from the oldest unread version on (read from the commits; vacuum needs them, log
/// cleanup does not).
pub async fn resolve(
    h: &TableHandle,
    readers: &[Reader],
    now: DateTime<Utc>,
    files: bool,
) -> Result<Kept> {
    let mut kept = Kept::default();
    if readers.is_empty() {
        return Ok(kept);
    }
    let limit = max_lag(h)?;
    for r in readers {
        // A job that has consumed nothing yet reads from version 0 (`first_unread`): kept for
        // from there, unless that is past the limit (a new job on an old table is told to skip
        // ahead).
        let Some(unread) = first_unread(h, r.consumed).await? else {
            continue;
        };
        let behind_since = unread.committed_at.unwrap_or(now);
        if unread.gone || now - behind_since > limit {
            tracing::warn!(
                table = %h.name(), job = %r.job, first_unread = unread.version,
                "refine job further behind than the table's log retention: not kept for"
            );
            kept.too_far_behind.push(format!(
                "{} (first unread version {}{})",
                r.job,
                unread.version,
                if unread.gone {
                    ", its commit is gone".to_string()
                } else {
                    format!(", committed {behind_since}")
                }
            ));
            continue;
        }
        kept.jobs.push(r.job.clone());
        kept.from_version = Some(
            kept.from_version
                .map_or(unread.version, |v| v.min(unread.version)),
        );
    }
    if let (true, Some(from)) = (files, kept.from_version) {
        kept.removed = removed_from(h, from).await?;
    }
    Ok(kept)
}

/// Paths removed by versions `from..` (up to the newest commit there is, even one newer than
/// the handle: vacuum plans from its own snapshot).
async fn removed_from(h: &TableHandle, from: u64) -> Result<HashSet<String>> {
    let table = h.name();
    let latest = h.version().unwrap_or(0);
    let mut removed = HashSet::new();
    let mut next = from;
    loop {
        let batch: Vec<u64> = (next..next + READ_CONCURRENCY as u64).collect();
        let commits: Vec<(u64, Option<Commit>)> = futures::stream::iter(batch)
            .map(|v| async move { h.commit(v).await.map(|c| (v, c)) })
            .buffered(READ_CONCURRENCY)
            .try_collect()
            .await?;
        for (v, commit) in commits {
            let Some(commit) = commit else {
                if v <= latest {
                    return Err(Error::VersionUnavailable {
                        table: table.to_string(),
                        reason: format!(
                            "commit {v} is gone while refine jobs still need the versions from \
                             {from}: nothing was deleted; run again (log cleanup keeps them)"
                        ),
                    });
                }
                return Ok(removed);
            };
            for a in commit.actions()? {
                match a {
                    Action::Remove(r) => {
                        removed.insert(decoded(&r.path));
                    }
                    // An aggregate reads the change files of the versions it has not read.
                    Action::Cdc(c) => {
                        removed.insert(decoded(&c.path));
                    }
                    _ => {}
                }
            }
        }
        next += READ_CONCURRENCY as u64;
    }
}
