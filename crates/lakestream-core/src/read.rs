//! Reading tables back (CLI `show`, tests): the live files of a snapshot, decoded with the
//! parquet crate, with partition values restored as columns. No DataFusion needed.

use crate::error::{Error, Result};
use crate::handle::TableHandle;
use crate::storage::Lake;
use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray, new_null_array};
use deltalake::arrow::compute::{cast, concat_batches};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::sync::Arc;

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
    let t = h.table();
    let snapshot = t.snapshot().map_err(|e| Error::storage(table, e))?;
    let files: Vec<_> = snapshot.log_data().iter().collect();
    Ok(Some(TableSummary {
        table: table.to_string(),
        version: t.version().unwrap_or(0),
        files: files.len(),
        rows: files.iter().filter_map(|f| f.num_records()).sum(),
        bytes: files.iter().map(|f| f.size().max(0) as u64).sum(),
        partition_columns: snapshot.metadata().partition_columns().to_vec(),
    }))
}

/// Tables directly under `prefix` (e.g. `access_logs/<bucket>`), found by listing.
pub async fn child_tables(lake: &Lake, prefix: &str) -> Result<Vec<String>> {
    let h = TableHandle::open(lake, prefix)?;
    let listing = h
        .table()
        .object_store()
        .list_with_delimiter(None)
        .await
        .map_err(|e| Error::storage(prefix, e))?;
    let mut out = Vec::new();
    for dir in listing.common_prefixes {
        let name = dir.filename().unwrap_or_default().to_string();
        if name.is_empty() || name.starts_with('_') {
            continue;
        }
        let table = format!("{}/{name}", prefix.trim_end_matches('/'));
        let mut t = TableHandle::open(lake, &table)?;
        if t.refresh().await? {
            out.push(table);
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
    let t = h.table();
    let snapshot = t.snapshot().map_err(|e| Error::storage(table, e))?;
    let store = t.object_store();
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
