//! Vacuum: delete data files that no version inside the retention window references, and
//! orphans (written but never committed, e.g. by a crashed writer) once they are older than the
//! window. Retention defaults to the table's `delta.deletedFileRetentionDuration` (168 h when
//! unset); a shorter window is refused unless forced. Time comes from the injected [`Clock`].
//!
//! What it never deletes, whatever the window or `force`:
//! - **another table below the root**: delta-rs lists every object under the table's root and
//!   deletes what the table's log does not reference, including a nested table's `_delta_log`
//!   and data (`raw` next to `raw/order`); a table with another `_delta_log` below its root is
//!   refused ([`Error::NestedTable`]), nothing deleted;
//! - **a young untracked file**: one no log entry references (not live, not a tombstone) and
//!   younger than [`UNTRACKED_FLOOR`] (1 h) may be a writer's staged file about to be
//!   committed; removed (tracked) files follow the forced window;
//! - **what refine jobs still need**: files removed by versions a job reading the table has not
//!   read yet ([`readers`](super::readers)), while it is within the table's log retention.
//!
//! Change data files (`_change_data/`, a table with the change data feed) are never live: a
//! committed one is treated like a removed file (kept within the window, deleted after; never
//! held back as a young untracked file), an uncommitted one like any untracked file.

use crate::clock::Clock;
use crate::commit::{Change, CommitSettings, Fixed, Proposal, ReadScope, run};
use crate::error::{Error, Result};
use crate::maintenance::readers::{self, Kept, Reader, decoded};
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::logstore::object_store::path::Path;
use deltalake::operations::vacuum::VacuumMode;
use deltalake::protocol::DeltaOperation;
use futures::{StreamExt, TryStreamExt};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// Untracked files (referenced by no log entry) younger than this are never deleted, even with
/// `force` and a 0 h window: a writer may have staged them and not committed yet. Longer than
/// any writer's invocation (Lambda stops at 15 minutes).
pub const UNTRACKED_FLOOR: chrono::Duration = chrono::Duration::hours(1);

/// Vacuum settings.
#[derive(Debug, Clone, Default)]
pub struct VacuumOptions {
    /// Retention window; `None` = the table's `delta.deletedFileRetentionDuration` (168 h default).
    pub retention: Option<chrono::Duration>,
    /// Allow a window shorter than the table's.
    pub force: bool,
    /// List what would be deleted, delete nothing.
    pub dry_run: bool,
    /// The refine jobs reading this table and the versions they consumed
    /// ([`refine_readers`](super::readers::refine_readers)): files they still need are kept.
    pub readers: Vec<Reader>,
}

/// What a vacuum did (or would do).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VacuumReport {
    /// Table.
    pub table: String,
    /// Dry run?
    pub dry_run: bool,
    /// Files deleted (or to delete).
    pub files: Vec<String>,
    /// Bytes of those files.
    pub bytes: u64,
    /// Untracked files kept because they are younger than [`UNTRACKED_FLOOR`].
    pub kept_untracked: usize,
    /// Removed files kept because a refine job has not read the versions around them yet.
    pub kept_for_readers: usize,
    /// What was kept for refine jobs, and the jobs too far behind to be kept for.
    pub readers: Kept,
}

struct ClockAdapter(Arc<dyn Clock>);

impl std::fmt::Debug for ClockAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClockAdapter")
    }
}

impl deltalake::operations::vacuum::Clock for ClockAdapter {
    fn current_timestamp_millis(&self) -> i64 {
        self.0.now().timestamp_millis()
    }
}

/// Vacuum `table` (full mode: unreferenced files and orphans past the retention window).
pub async fn vacuum(
    lake: &Lake,
    table: &str,
    opts: &VacuumOptions,
    clock: Arc<dyn Clock>,
) -> Result<VacuumReport> {
    let h = TableHandle::open_existing(lake, table).await?;
    let now = clock.now();
    // One listing for sizes and ages (the vacuum lists the table too; S3 LIST returns them for
    // free), and to find other tables below the root before anything is planned.
    let store = h.object_store();
    let listed: HashMap<Path, (u64, chrono::DateTime<chrono::Utc>)> = store
        .list(None)
        .map_ok(|m| (m.location, (m.size, m.last_modified)))
        .try_collect()
        .await
        .map_err(|e| Error::storage(table, e))?;
    let nested = nested_tables(table, listed.keys());
    if !nested.is_empty() {
        return Err(Error::NestedTable {
            table: table.to_string(),
            nested,
        });
    }
    let kept = readers::resolve(&h, &opts.readers, now, true).await?;
    let tombstones = h.tombstones().await?;
    let mut builder = h
        .vacuum_plan()
        .with_mode(VacuumMode::Full)
        // delta-rs only plans (lists what to delete): its own VACUUM START/END commits would
        // bypass the one commit loop, so they are written by us below.
        .with_dry_run(true)
        .with_enforce_retention_duration(!opts.force)
        .with_clock(Arc::new(ClockAdapter(clock)));
    if let Some(r) = opts.retention {
        builder = builder.with_retention_period(r);
    }
    let (_, metrics) = builder.await.map_err(|e| match e {
        deltalake::DeltaTableError::GenericError { source } => Error::Config(format!(
            "vacuum of `{table}` refused: {source}. Pass force to use a shorter window"
        )),
        other => Error::storage(table, other),
    })?;
    // delta-rs reports local files by absolute path and re-reports tombstones whose files are
    // already gone: keep what existed at listing time, relative to the table root.
    let root = lake.table_url(table)?;
    let root_path = root
        .to_file_path()
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    let mut report = VacuumReport {
        table: table.to_string(),
        dry_run: opts.dry_run,
        ..Default::default()
    };
    let candidates: Vec<String> = metrics
        .files_deleted
        .iter()
        .map(|f| {
            root_path
                .as_deref()
                .and_then(|r| f.strip_prefix(r))
                .unwrap_or(f)
                .trim_start_matches('/')
                .to_string()
        })
        .collect();
    let committed_cdc = committed_change_files(&h, &listed, &candidates, now).await?;
    for rel in candidates {
        let Some((size, modified)) = listed.get(&Path::from(rel.as_str())) else {
            continue;
        };
        if kept.needs(&rel) {
            report.kept_for_readers += 1;
            continue;
        }
        let tracked = tombstones.contains(&decoded(&rel)) || committed_cdc.contains(&rel);
        if !tracked && now - *modified < UNTRACKED_FLOOR {
            report.kept_untracked += 1;
            continue;
        }
        report.bytes += size;
        report.files.push(rel);
    }
    report.readers = kept;
    let (files, bytes) = (&report.files, report.bytes);
    if !opts.dry_run && !files.is_empty() {
        delete_logged(h, files, bytes, opts).await?;
    }
    Ok(report)
}

/// Other Delta tables below `table`'s root: every listed path with a `_delta_log` segment
/// below the first, as a table name (`raw` + `order/_delta_log/0.json` -> `raw/order`).
fn nested_tables<'a>(table: &str, listed: impl Iterator<Item = &'a Path>) -> Vec<String> {
    let mut nested = BTreeSet::new();
    for p in listed {
        let parts: Vec<&str> = p.as_ref().split('/').collect();
        if let Some(i) = parts.iter().skip(1).position(|s| *s == "_delta_log") {
            nested.insert(format!(
                "{}/{}",
                table.trim_end_matches('/'),
                parts[..=i].join("/")
            ));
        }
    }
    nested.into_iter().collect()
}

/// The young change data files among `candidates` (younger than [`UNTRACKED_FLOOR`], so they
/// would be held back as untracked) that a commit references, as listed (relative) paths. A
/// change file is written before the commit naming it, so only the commit files written since
/// the oldest of them (less a margin for clock skew) are read.
async fn committed_change_files(
    h: &TableHandle,
    listed: &HashMap<Path, (u64, chrono::DateTime<chrono::Utc>)>,
    candidates: &[String],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<HashSet<String>> {
    let prefix = format!("{}/", crate::commit::change_data::CHANGE_DATA_DIR);
    let young = candidates
        .iter()
        .filter(|c| c.starts_with(&prefix))
        .filter_map(|c| listed.get(&Path::from(c.as_str())))
        .map(|(_, modified)| *modified)
        .filter(|m| now - *m < UNTRACKED_FLOOR)
        .min();
    let Some(oldest) = young else {
        return Ok(HashSet::new());
    };
    let since = oldest - chrono::Duration::minutes(15);
    let versions: Vec<u64> = listed
        .iter()
        .filter(|(_, (_, modified))| *modified >= since)
        .filter_map(|(p, _)| {
            p.as_ref()
                .strip_prefix("_delta_log/")?
                .strip_suffix(".json")?
                .parse()
                .ok()
        })
        .collect();
    let mut out = HashSet::new();
    for v in versions {
        let Some(commit) = h.commit(v).await? else {
            continue;
        };
        for a in commit.actions()? {
            if let deltalake::kernel::Action::Cdc(c) = a {
                // Listed paths are as stored: the decoded path re-encoded per segment.
                out.insert(Path::from(c.path.as_str()).to_string());
            }
        }
    }
    Ok(out)
}

/// Delete `files` between a `VACUUM START` and a `VACUUM END` commit (as Spark and delta-rs
/// log a vacuum), both on the one commit loop.
async fn delete_logged(
    mut h: TableHandle,
    files: &[String],
    bytes: u64,
    opts: &VacuumOptions,
) -> Result<()> {
    use deltalake::table::config::TablePropertiesExt;
    let table = h.name().to_string();
    let default_retention_millis = h
        .snapshot()?
        .table_config()
        .deleted_file_retention_duration()
        .as_millis() as i64;
    let settings =
        crate::commit::CommitSettings::from(&lakestream_formats::config::CommitConfig::default());
    let start = DeltaOperation::VacuumStart {
        retention_check_enabled: !opts.force,
        specified_retention_millis: opts.retention.map(|r| r.num_milliseconds()),
        default_retention_millis,
    };
    log_only(&mut h, &settings, start).await?;
    let store = h.object_store();
    let paths: Vec<_> = files.iter().map(|f| Ok(Path::from(f.as_str()))).collect();
    let locations = futures::stream::iter(paths).boxed();
    let deleted: Vec<Path> = store
        .delete_stream(locations)
        .map(|r| match r {
            Err(deltalake::logstore::object_store::Error::NotFound { path, .. }) => {
                Ok(Path::from(path))
            }
            other => other,
        })
        .try_collect()
        .await
        .map_err(|e| Error::storage(&table, e))?;
    tracing::info!(table = %table, files = deleted.len(), bytes, "vacuumed");
    log_only(
        &mut h,
        &settings,
        DeltaOperation::VacuumEnd {
            status: "COMPLETED".into(),
        },
    )
    .await?;
    Ok(())
}

/// A commit with no action but its `commitInfo` (the vacuum's log entries).
async fn log_only(
    h: &mut TableHandle,
    settings: &CommitSettings,
    op: DeltaOperation,
) -> Result<()> {
    let schema = h.arrow_schema()?;
    let mut change = Change::append(h.version(), op, vec![], vec![]);
    change.scope = ReadScope::Files;
    let mut planner = Fixed(Some(Proposal {
        change,
        schema,
        create: None,
    }));
    run(h, settings, &mut planner).await?;
    Ok(())
}
