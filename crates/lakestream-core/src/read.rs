//! Reading tables back (CLI `show`, tests): the live files of a snapshot, decoded with the
//! parquet crate, with partition values restored as columns. No DataFusion needed.
//!
//! [`scan_live_files`] is the bounded reader of the dead-letter scans and the access report's
//! window: files pruned by partition values and statistics, only the asked columns fetched,
//! batches streamed to the caller.

use crate::error::{Error, Result};
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::compute::concat_batches;

// The one Parquet reader of data files lives in the table layer; its pieces keep their names here.
pub(crate) use crate::table::PartitionValues;
pub(crate) use crate::table::parquet_read::with_partitions;

/// A data file's statistics (`minValues`, `maxValues`, `nullCount`, `numRecords`), if any.
pub(crate) type FileStats = Option<serde_json::Value>;

/// Stream `columns` (those a file has) of every live file of `handle` that `keep` does not rule
/// out by its partition values and statistics, handing each batch and its file's partition
/// values to `each` ([`TableHandle::scan`]). Refuses a table with deletion vectors (its files
/// hold deleted rows). Memory is one record batch plus what the caller keeps.
pub(crate) async fn scan_live_files(
    handle: &TableHandle,
    columns: &[&str],
    keep: impl Fn(&PartitionValues, &FileStats) -> bool,
    each: impl FnMut(&RecordBatch, &PartitionValues) -> Result<()>,
) -> Result<()> {
    handle
        .scan(columns, |f| keep(&f.partition_values(), &f.stats()), each)
        .await
}

/// A summary of a table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableSummary {
    /// Table name.
    pub table: String,
    /// Current version.
    pub version: u64,
    /// Live data files.
    pub files: usize,
    /// Rows (from file statistics).
    pub rows: usize,
    /// Bytes of live data files.
    pub bytes: u64,
    /// Partition columns.
    pub partition_columns: Vec<String>,
}

/// Summarize `table`; `None` if it does not exist.
pub async fn summarize(lake: &Lake, table: &str) -> Result<Option<TableSummary>> {
    let mut h = TableHandle::open(lake, table)?;
    if !h.refresh().await? {
        return Ok(None);
    }
    let files = h.live_files()?;
    Ok(Some(TableSummary {
        table: table.to_string(),
        version: h.version().unwrap_or(0),
        files: files.len(),
        rows: files.iter().filter_map(|f| f.num_records()).sum(),
        bytes: files.iter().map(|f| f.size()).sum(),
        partition_columns: h.partition_columns()?,
    }))
}

/// Tables directly under `prefix` (e.g. `access_logs/<bucket>`), found by listing; folders
/// that cannot be tables are skipped (see [`list_child_tables`]).
pub async fn child_tables(lake: &Lake, prefix: &str) -> Result<Vec<String>> {
    Ok(list_child_tables(lake, prefix).await?.tables)
}

/// A folder under a table prefix that was not listed as a table, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkippedFolder {
    /// The folder, relative to the lake root (escaped: it came from a listing).
    pub name: String,
    /// Why it is not a table (the lake's table-path refusal).
    pub reason: String,
}

/// What [`list_child_tables`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildTables {
    /// The tables, in listing order.
    pub tables: Vec<String>,
    /// Folders whose name the lake refuses as a table path (`a+b`, left by another engine or
    /// written before names were checked): never opened, never maintained.
    pub skipped: Vec<SkippedFolder>,
}

/// Tables directly under `prefix`, found by listing (one LIST plus one log probe per folder).
/// A folder whose name the lake refuses as a table path ([`Lake::table_url`]) is skipped with a
/// warning and returned in [`ChildTables::skipped`], so one bad folder does not stop the
/// listing; `_`-leading folders are not tables and are ignored silently.
pub async fn list_child_tables(lake: &Lake, prefix: &str) -> Result<ChildTables> {
    let h = TableHandle::open(lake, prefix)?;
    let listing = h
        .object_store()
        .list_with_delimiter(None)
        .await
        .map_err(|e| Error::storage(prefix, e))?;
    let mut out = ChildTables::default();
    for dir in listing.common_prefixes {
        let name = dir.filename().unwrap_or_default().to_string();
        if name.is_empty() || name.starts_with('_') {
            continue;
        }
        let table = format!("{}/{name}", prefix.trim_end_matches('/'));
        let mut t = match TableHandle::open(lake, &table) {
            Ok(t) => t,
            Err(Error::TablePath { table, reason }) => {
                tracing::warn!(folder = %table, reason = %reason, "folder skipped: its name cannot be a table; rename or delete it");
                out.skipped.push(SkippedFolder {
                    name: table,
                    reason: format!("not a valid table path: {reason}"),
                });
                continue;
            }
            Err(e) => return Err(e),
        };
        if t.refresh().await? {
            out.tables.push(table);
        }
    }
    Ok(out)
}

/// All rows of `table` at its latest version (or `version`), in the table schema.
pub async fn read_table(lake: &Lake, table: &str, version: Option<u64>) -> Result<RecordBatch> {
    let mut h = TableHandle::open_existing(lake, table).await?;
    if let Some(v) = version {
        h.at_version(v).await?;
    }
    read_all(&h).await
}

/// All rows of the loaded `table` at its version, in the table schema.
pub async fn read_all(h: &TableHandle) -> Result<RecordBatch> {
    h.refuse_deletion_vectors()?;
    let schema = h.arrow_schema()?;
    let mut batches = Vec::new();
    for file in h.live_files()? {
        batches.extend(h.read_file(&file.data_file(), &schema).await?);
    }
    Ok(concat_batches(&schema, &batches)?)
}
