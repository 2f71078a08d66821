//! The target side of the upsert (copy-on-write, no DataFusion): which live files can hold an
//! incoming key (partition values and min/max statistics of the first key column), the key and
//! ordering columns of those files only (a projected read), and the rewrite of the files that
//! lose rows, streamed row group by row group (memory: about one row group plus the new file's
//! compressed bytes).

use crate::error::{Error, Result};
use crate::handle::TableHandle;
use crate::read::with_partitions;
use crate::storage::Lake;
use deltalake::Path;
use deltalake::arrow::array::{BooleanArray, RecordBatch};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use deltalake::kernel::{Add, Remove};
use deltalake::logstore::ObjectStoreRef;
use deltalake::parquet::arrow::ProjectionMask;
#[allow(deprecated)] // see `reader`
use deltalake::parquet::arrow::async_reader::ParquetObjectReader;
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use deltalake::writer::DeltaWriter;
use futures::TryStreamExt;
use std::collections::HashMap;
use std::sync::Arc;

/// A live file of the target.
#[derive(Debug, Clone)]
pub struct TargetFile {
    path: Path,
    partitions: HashMap<String, Option<String>>,
    /// `min`/`max` statistics of the first key column.
    key_range: Option<(serde_json::Value, serde_json::Value)>,
    /// The remove action that retires this file.
    pub remove: Remove,
}

/// Live files of the target at the handle's version.
pub fn live_files(handle: &TableHandle, first_key: &str) -> Result<Vec<TargetFile>> {
    let snapshot = handle
        .table()
        .snapshot()
        .map_err(|e| Error::storage(handle.name(), e))?;
    Ok(snapshot
        .log_data()
        .iter()
        .map(|f| {
            let stats: Option<serde_json::Value> =
                f.stats().and_then(|s| serde_json::from_str(&s).ok());
            let stat = |kind: &str| stats.as_ref()?.get(kind)?.get(first_key).cloned();
            let key_range = stat("minValues").zip(stat("maxValues"));
            TargetFile {
                path: f.object_store_path(),
                partitions: f.partition_values_map(),
                key_range,
                remove: f.remove_action(true),
            }
        })
        .collect())
}

/// One incoming value of the first key column, comparable with JSON statistics.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
pub enum KeyValue {
    /// Numbers (statistics of integer and float columns).
    Number(f64),
    /// Text (statistics of string columns; also compared with partition values).
    Text(String),
}

impl KeyValue {
    fn of(v: &serde_json::Value) -> Option<Self> {
        match v {
            serde_json::Value::Number(n) => n.as_f64().map(KeyValue::Number),
            serde_json::Value::String(s) => Some(KeyValue::Text(s.clone())),
            _ => None,
        }
    }
}

/// The files that can hold one of `keys` (values of the first key column, as text and as
/// JSON), pruned by its partition value or its min/max statistics.
pub fn candidates<'a>(
    files: &'a [TargetFile],
    first_key: &str,
    keys_text: &std::collections::HashSet<String>,
    keys_json: &[serde_json::Value],
) -> Vec<&'a TargetFile> {
    let mut sorted: Vec<KeyValue> = keys_json.iter().filter_map(KeyValue::of).collect();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    files
        .iter()
        .filter(|f| {
            if let Some(Some(v)) = f.partitions.get(first_key) {
                return keys_text.contains(v);
            }
            let Some((lo, hi)) = &f.key_range else {
                return true;
            };
            let (Some(lo), Some(hi)) = (KeyValue::of(lo), KeyValue::of(hi)) else {
                return true;
            };
            // Long strings may be truncated in statistics: only trust short maxima.
            let hi_trusted = !matches!(&hi, KeyValue::Text(s) if s.chars().count() >= 32);
            let start = sorted.partition_point(|k| k < &lo);
            sorted.get(start).is_some_and(|k| !hi_trusted || k <= &hi)
        })
        .collect()
}

/// parquet 59 deprecates `ParquetObjectReader` in favour of hand-written `AsyncFileReader`s;
/// delta-rs 1.1 still reads with it, and it is exactly the ranged-GET reader needed here.
#[allow(deprecated)]
fn reader(store: &ObjectStoreRef, f: &TargetFile) -> ParquetObjectReader {
    ParquetObjectReader::new(store.clone(), f.path.clone())
}

/// The `columns` of one file (partition values restored), in `schema`'s types.
pub async fn read_columns(
    store: &ObjectStoreRef,
    f: &TargetFile,
    schema: &SchemaRef,
    columns: &[String],
    table: &str,
) -> Result<RecordBatch> {
    let projected: SchemaRef = Arc::new(Schema::new(
        columns
            .iter()
            .filter_map(|c| schema.field_with_name(c).ok().cloned())
            .collect::<Vec<_>>(),
    ));
    let builder = ParquetRecordBatchStreamBuilder::new(reader(store, f))
        .await
        .map_err(|e| Error::storage(table, e))?;
    let in_file: Vec<&str> = columns
        .iter()
        .map(String::as_str)
        .filter(|c| builder.schema().field_with_name(c).is_ok())
        .collect();
    let mask = ProjectionMask::columns(builder.parquet_schema(), in_file);
    let batches: Vec<RecordBatch> = builder
        .with_projection(mask)
        .build()
        .map_err(|e| Error::storage(table, e))?
        .try_collect()
        .await
        .map_err(|e| Error::storage(table, e))?;
    let batches: Vec<RecordBatch> = batches
        .iter()
        .map(|b| with_partitions(&projected, b, &f.partitions))
        .collect::<Result<_>>()?;
    Ok(deltalake::arrow::compute::concat_batches(
        &projected, &batches,
    )?)
}

/// Every row of one file in `schema` (for tie-breaks; rare).
pub async fn read_all(
    store: &ObjectStoreRef,
    f: &TargetFile,
    schema: &SchemaRef,
    table: &str,
) -> Result<RecordBatch> {
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    read_columns(store, f, schema, &names, table).await
}

/// Rewrite `f` without the rows whose index (in file order) is in `drop`, streaming row group
/// by row group into one new file (`dataChange=true`). `None` when no row survives.
#[allow(clippy::too_many_arguments)]
pub async fn rewrite_without(
    lake: &Lake,
    table: &str,
    store: &ObjectStoreRef,
    f: &TargetFile,
    schema: &SchemaRef,
    partition_columns: &[String],
    drop: &std::collections::HashSet<usize>,
) -> Result<Vec<Add>> {
    let mut stream = ParquetRecordBatchStreamBuilder::new(reader(store, f))
        .await
        .map_err(|e| Error::storage(table, e))?
        .build()
        .map_err(|e| Error::storage(table, e))?;
    let mut writer =
        crate::commit::batch_writer(lake, table, schema.clone(), partition_columns.to_vec())?;
    let mut offset = 0usize;
    let mut kept = 0usize;
    while let Some(batch) = stream
        .try_next()
        .await
        .map_err(|e| Error::storage(table, e))?
    {
        let n = batch.num_rows();
        let keep = BooleanArray::from(
            (0..n)
                .map(|i| !drop.contains(&(offset + i)))
                .collect::<Vec<_>>(),
        );
        offset += n;
        let batch = with_partitions(schema, &filter_record_batch(&batch, &keep)?, &f.partitions)?;
        if batch.num_rows() > 0 {
            kept += batch.num_rows();
            writer
                .write(batch)
                .await
                .map_err(|e| Error::storage(table, e))?;
        }
    }
    if kept == 0 {
        return Ok(vec![]);
    }
    writer.flush().await.map_err(|e| Error::storage(table, e))
}
