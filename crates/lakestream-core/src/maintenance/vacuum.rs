//! Vacuum: delete data files that no version inside the retention window references, and
//! orphans (written but never committed, e.g. by a crashed writer) once they are older than the
//! window. Retention defaults to the table's `delta.deletedFileRetentionDuration` (168 h when
//! unset); a shorter window is refused unless forced. Time comes from the injected [`Clock`].

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::handle::TableHandle;
use crate::storage::Lake;
use deltalake::logstore::object_store::path::Path;
use deltalake::operations::vacuum::VacuumMode;
use futures::TryStreamExt;
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
        .with_dry_run(opts.dry_run)
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
    Ok(VacuumReport {
        table: table.to_string(),
        dry_run: opts.dry_run,
        files,
        bytes,
    })
}
