//! Reading tables back (CLI `show`, tests): the live files of a snapshot, decoded with the
//! parquet crate, with partition values restored as columns. No DataFusion needed.
//!
//! [`scan_live_files`] is the bounded reader of the dead-letter scans and the access report's
//! window: files pruned by partition values and statistics, only the asked columns fetched,
//! batches streamed to the caller.

use crate::error::{Error, Result};
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray, new_null_array};
use deltalake::arrow::compute::{cast, concat_batches};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
#[allow(deprecated)] // parquet 59 deprecates it; delta-rs 1.1 still reads with it
use deltalake::parquet::arrow::async_reader::ParquetObjectReader;
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use futures::TryStreamExt;
use std::collections::HashMap;
use std::sync::Arc;

/// A data file's partition values, as the log records them (`None`: the null partition).
pub(crate) type PartitionValues = HashMap<String, Option<String>>;

/// A data file's statistics (`minValues`, `maxValues`, `nullCount`, `numRecords`), if any.
pub(crate) type FileStats = Option<serde_json::Value>;

/// Stream `columns` (those a file has) of every live file of `handle` that `keep` does not rule
/// out by its partition values and statistics, handing each batch and its file's partition
/// values to `each`. Refuses a table with deletion vectors (its files hold deleted rows).
/// Memory is one record batch plus what the caller keeps.
pub(crate) async fn scan_live_files(
    handle: &TableHandle,
    columns: &[&str],
    keep: impl Fn(&PartitionValues, &FileStats) -> bool,
    mut each: impl FnMut(&RecordBatch, &PartitionValues) -> Result<()>,
) -> Result<()> {
    let table = handle.name();
    handle.refuse_deletion_vectors()?;
    let snapshot = handle.snapshot()?;
    let store = handle.table().object_store();
    for file in snapshot.log_data().iter() {
        let partitions = file.partition_values_map();
        let stats: FileStats = file.stats().and_then(|s| serde_json::from_str(&s).ok());
        if !keep(&partitions, &stats) {
            continue;
        }
        #[allow(deprecated)]
        let reader = ParquetObjectReader::new(store.clone(), file.object_store_path())
            .with_file_size(file.size().max(0) as u64);
        let builder = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| Error::storage(table, e))?;
        let present: Vec<&str> = columns
            .iter()
            .copied()
            .filter(|c| builder.schema().field_with_name(c).is_ok())
            .collect();
        let mask = ProjectionMask::columns(builder.parquet_schema(), present);
        let mut stream = builder
            .with_projection(mask)
            .build()
            .map_err(|e| Error::storage(table, e))?;
        while let Some(batch) = stream
            .try_next()
            .await
            .map_err(|e| Error::storage(table, e))?
        {
            each(&batch, &partitions)?;
        }
    }
    Ok(())
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
    let files: Vec<_> = h.snapshot()?.log_data().iter().collect();
    Ok(Some(TableSummary {
        table: table.to_string(),
        version: h.table().version().unwrap_or(0),
        files: files.len(),
        rows: files.iter().filter_map(|f| f.num_records()).sum(),
        bytes: files.iter().map(|f| f.size().max(0) as u64).sum(),
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
        .table()
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
        h.table_mut()
            .load_version(v)
            .await
            .map_err(|e| Error::storage(table, e))?;
    }
    h.refuse_deletion_vectors()?;
    let schema = h.arrow_schema()?;
    let snapshot = h.snapshot()?;
    let store = h.table().object_store();
    let mut batches = Vec::new();
    for file in snapshot.log_data().iter() {
        let partitions = file.partition_values_map();
        batches.extend(
            read_data_file(
                &store,
                &file.object_store_path(),
                &partitions,
                &schema,
                table,
            )
            .await?,
        );
    }
    Ok(concat_batches(&schema, &batches)?)
}

/// Read one data file in the table schema (partition values restored as columns).
pub(crate) async fn read_data_file(
    store: &deltalake::logstore::ObjectStoreRef,
    path: &deltalake::Path,
    partitions: &std::collections::HashMap<String, Option<String>>,
    schema: &SchemaRef,
    table: &str,
) -> Result<Vec<RecordBatch>> {
    let bytes = store
        .get(path)
        .await
        .map_err(|e| Error::storage(table, e))?
        .bytes()
        .await
        .map_err(|e| Error::storage(table, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| Error::storage(table, e))?;
    reader
        .map(|b| with_partitions(schema, &b?, partitions))
        .collect()
}

/// Rebuild a data file's batch in the table schema: partition values (from the path) become
/// columns again, missing columns (older files) read null.
pub(crate) fn with_partitions(
    schema: &SchemaRef,
    batch: &RecordBatch,
    partitions: &std::collections::HashMap<String, Option<String>>,
) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let col = if let Some(c) = batch.column_by_name(f.name()) {
            if c.data_type() == f.data_type() {
                c.clone()
            } else {
                cast(c, f.data_type())?
            }
        } else if let Some(v) = partitions.get(f.name()) {
            let text: ArrayRef = Arc::new(StringArray::from(vec![v.clone(); n]));
            cast(&text, f.data_type())?
        } else {
            new_null_array(f.data_type(), n)
        };
        cols.push(col);
    }
    Ok(RecordBatch::try_new(schema.clone(), cols)?)
}
