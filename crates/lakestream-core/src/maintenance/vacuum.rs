//! Vacuum: delete data files that no version inside the retention window references, and
//! orphans (written but never committed, e.g. by a crashed writer) once they are older than the
//! window. Retention defaults to the table's `delta.deletedFileRetentionDuration` (168 h when
//! unset); a shorter window is refused unless forced. Time comes from the injected [`Clock`].

use crate::clock::Clock;
use crate::commit::{Change, CommitSettings, Fixed, Proposal, ReadScope, run};
use crate::error::{Error, Result};
use crate::handle::TableHandle;
use crate::storage::Lake;
use deltalake::logstore::object_store::path::Path;
use deltalake::operations::vacuum::VacuumMode;
use deltalake::protocol::DeltaOperation;
use futures::{StreamExt, TryStreamExt};
use std::collections::HashMap;
use std::sync::Arc;

/// Vacuum settings.
#[derive(Debug, Clone, Default)]
pub struct VacuumOptions {
    /// Retention window; `None` = the table's `delta.deletedFileRetentionDuration` (168 h default).
    pub retention: Option<chrono::Duration>,
    /// Allow a window shorter than the table's.
    pub force: bool,
    /// List what would be deleted, delete nothing.
    pub dry_run: bool,
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
    // One listing for sizes (the vacuum lists the table too; S3 LIST returns sizes for free).
    let store = h.table().object_store();
    let sizes: HashMap<Path, u64> = store
        .list(None)
        .map_ok(|m| (m.location, m.size))
        .try_collect()
        .await
        .map_err(|e| Error::storage(table, e))?;
    let mut builder = h
        .table()
        .clone()
        .vacuum()
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
    let mut bytes = 0;
    let mut files = Vec::new();
    for f in metrics.files_deleted {
        let rel = root_path
            .as_deref()
            .and_then(|r| f.strip_prefix(r))
            .unwrap_or(&f)
            .trim_start_matches('/')
            .to_string();
        if let Some(size) = sizes.get(&Path::from(rel.as_str())) {
            bytes += size;
            files.push(rel);
        }
    }
    if !opts.dry_run && !files.is_empty() {
        delete_logged(h, &files, bytes, opts).await?;
    }
    Ok(VacuumReport {
        table: table.to_string(),
        dry_run: opts.dry_run,
        files,
        bytes,
    })
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
        .table()
        .snapshot()
        .map_err(|e| Error::storage(&table, e))?
        .table_config()
        .deleted_file_retention_duration()
        .as_millis() as i64;
    let settings = crate::commit::CommitSettings::from(&crate::config::CommitConfig::default());
    let start = DeltaOperation::VacuumStart {
        retention_check_enabled: !opts.force,
        specified_retention_millis: opts.retention.map(|r| r.num_milliseconds()),
        default_retention_millis,
    };
    log_only(&mut h, &settings, start).await?;
    let store = h.table().object_store();
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
