//! Change data feed files: the changed rows of a commit, with their `_change_type`, written
//! under `<table>/_change_data/` and committed as `cdc` actions ([`Change::cdc_files`]) in the
//! same commit as the data they describe (see ARCHITECTURE.md "CDC lakehouse").
//!
//! The files are partitioned like the table's data (partition values in the action, not in the
//! file) and written by the same Parquet writer as data files.
//!
//! [`Change::cdc_files`]: super::Change::cdc_files

use super::batch_writer_at;
use crate::error::{Error, Result};
use crate::storage::Lake;
use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::{Add, AddCDCFile, Remove};
use deltalake::writer::DeltaWriter;
use std::sync::Arc;

/// The column holding a change row's kind.
pub const CHANGE_TYPE: &str = "_change_type";
/// The directory of change data files below a table's root.
pub const CHANGE_DATA_DIR: &str = "_change_data";

/// A change row's kind (the values of [`CHANGE_TYPE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeType {
    /// A new row.
    Insert,
    /// A row as it was before an update.
    UpdatePreimage,
    /// A row as it is after an update.
    UpdatePostimage,
    /// A removed row.
    Delete,
}

impl ChangeType {
    /// The value stored in [`CHANGE_TYPE`].
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Insert => "insert",
            ChangeType::UpdatePreimage => "update_preimage",
            ChangeType::UpdatePostimage => "update_postimage",
            ChangeType::Delete => "delete",
        }
    }
}

/// The schema of change rows of a table: its columns plus [`CHANGE_TYPE`].
pub fn change_schema(table_schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = table_schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(CHANGE_TYPE, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// Whether the change rows `rows` of a commit adding `adds` and removing `removes` are exactly
/// what a reader of the feed derives from the commit's actions alone, so the commit needs no
/// change data file (one PUT fewer). The Delta protocol: a version without `cdc` actions reads
/// as every `add` with `dataChange=true` inserted and every such `remove` deleted (Delta's own
/// writers write no change data for an append). True when the commit removes no file, every
/// change row is an `insert`, and the adds hold those rows and no other (their `numRecords`
/// add up to the rows; an add without statistics: false, the file is written).
pub fn derivable_from_actions(adds: &[Add], removes: &[Remove], rows: &RecordBatch) -> bool {
    if removes.iter().any(|r| r.data_change) || rows.num_rows() == 0 {
        return false;
    }
    let Some(types) = rows
        .column_by_name(CHANGE_TYPE)
        .and_then(|c| c.as_string_opt::<i32>())
    else {
        return false;
    };
    let insert = ChangeType::Insert.as_str();
    if types.null_count() > 0 || types.iter().any(|t| t != Some(insert)) {
        return false;
    }
    let mut added = 0i64;
    for add in adds.iter().filter(|a| a.data_change) {
        match add.get_stats() {
            Ok(Some(stats)) => added += stats.num_records,
            _ => return false,
        }
    }
    added == rows.num_rows() as i64
}

/// Write the change rows `batch` (the table's columns plus [`CHANGE_TYPE`]) of `table` as
/// change data files under `<table>/_change_data/`, partitioned by `partition_columns`, and
/// return their `cdc` actions (`dataChange: false`) for [`Change::cdc_files`]. Nothing is
/// referenced until the commit carrying them lands (an unreferenced file is an orphan vacuum
/// deletes). No rows: no files.
///
/// [`Change::cdc_files`]: super::Change::cdc_files
pub async fn write_change_data(
    lake: &Lake,
    table: &str,
    table_schema: SchemaRef,
    partition_columns: &[String],
    batch: &RecordBatch,
) -> Result<Vec<AddCDCFile>> {
    if batch.num_rows() == 0 {
        return Ok(vec![]);
    }
    let schema = change_schema(&table_schema);
    if batch.schema().index_of(CHANGE_TYPE).is_err() {
        return Err(Error::Internal(format!(
            "change rows for `{table}` have no `{CHANGE_TYPE}` column"
        )));
    }
    // The table's columns in the table's order (the caller's batch may order them otherwise).
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            batch
                .column_by_name(f.name())
                .cloned()
                .ok_or_else(|| Error::Schema {
                    table: table.to_string(),
                    reason: format!("change rows have no column `{}`", f.name()),
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = RecordBatch::try_new(schema.clone(), columns)?;
    let root = lake.table_url(table)?;
    let dir = format!("{}/{CHANGE_DATA_DIR}", root.as_str().trim_end_matches('/'));
    let mut writer = batch_writer_at(lake, table, &dir, schema, partition_columns.to_vec())?;
    crate::table::parquet_write::write_sliced(&mut writer, &rows)
        .await
        .map_err(|e| Error::data_put(table, e))?;
    let adds = writer
        .flush()
        .await
        .map_err(|e| Error::data_put(table, e))?;
    Ok(adds
        .into_iter()
        .map(|a| AddCDCFile {
            path: format!("{CHANGE_DATA_DIR}/{}", a.path),
            size: a.size,
            partition_values: a.partition_values,
            data_change: false,
            tags: None,
        })
        .collect())
}

/// A change data file with no rows, for a commit that rewrites files but changes no row's
/// values (an unchanged re-snapshot only moves `__seq`): with it, readers of the feed read this
/// commit's changes from its change files (none) instead of its adds and removes (which would
/// read as every row of the rewritten files deleted and inserted again).
pub async fn write_empty_change_data(
    store: &deltalake::logstore::ObjectStoreRef,
    table: &str,
    table_schema: &SchemaRef,
) -> Result<AddCDCFile> {
    use deltalake::logstore::object_store::{ObjectStoreExt, PutPayload, path::Path};
    let schema = change_schema(table_schema);
    let mut buf = Vec::new();
    let w = deltalake::parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None)
        .map_err(|e| Error::Internal(format!("an empty change data file: {e}")))?;
    w.close()
        .map_err(|e| Error::Internal(format!("an empty change data file: {e}")))?;
    let path = format!(
        "{CHANGE_DATA_DIR}/cdc-{}.c000.snappy.parquet",
        uuid::Uuid::new_v4()
    );
    let size = buf.len() as i64;
    store
        .put(&Path::from(path.as_str()), PutPayload::from(buf))
        .await
        .map_err(|e| Error::data_put(table, e))?;
    Ok(AddCDCFile {
        path,
        size,
        partition_values: std::collections::HashMap::new(),
        data_change: false,
        tags: None,
    })
}
