//! Reading a batch back as plain Rust values, for assertions on what a table holds (not only
//! how many rows it has).

use crate::{Error, Result};
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int32Type, Int64Type};
use lakestream_core::IngestReport;

/// Sorted `(kafka_partition, kafka_offset)` pairs of a table with Kafka metadata columns.
pub fn offsets(batch: &RecordBatch) -> Result<Vec<(i32, i64)>> {
    let p = column(batch, "kafka_partition")?;
    let p = cast(p, &DataType::Int32)?;
    let p = p.as_primitive::<Int32Type>();
    let o = column(batch, "kafka_offset")?;
    let o = cast(o, &DataType::Int64)?;
    let o = o.as_primitive::<Int64Type>();
    let mut v: Vec<(i32, i64)> = (0..batch.num_rows())
        .map(|i| (p.value(i), o.value(i)))
        .collect();
    v.sort();
    Ok(v)
}

/// Column `name` as text, row by row (`None` for null), whatever its type.
pub fn strings(batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    let c = cast(column(batch, name)?, &DataType::Utf8)?;
    let s = c.as_string::<i32>();
    Ok((0..s.len())
        .map(|i| s.is_valid(i).then(|| s.value(i).to_string()))
        .collect())
}

/// Column `name` as 64-bit integers, row by row (`None` for null), from any integer type.
pub fn int64s(batch: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let c = cast(column(batch, name)?, &DataType::Int64)?;
    Ok(c.as_primitive::<Int64Type>().iter().collect())
}

/// Every row as a JSON line, sorted: a whole table compared in one assertion.
pub fn rows_json(batch: &RecordBatch) -> Result<Vec<String>> {
    let mut buf = Vec::new();
    let mut w = arrow_json::LineDelimitedWriter::new(&mut buf);
    w.write(batch)?;
    w.finish()?;
    let mut rows: Vec<String> = String::from_utf8_lossy(&buf)
        .lines()
        .map(String::from)
        .collect();
    rows.sort();
    Ok(rows)
}

/// The accounting invariant every ingestion keeps, against the test's own count: the `sent`
/// records (counted from the input the test built, not taken from the report) are each
/// written, dead-lettered, skipped as a duplicate or skipped as a tombstone, and the report
/// received exactly them.
///
/// # Panics
/// When the report breaks it.
pub fn assert_accounted(sent: usize, r: &IngestReport) {
    assert_eq!(
        sent,
        r.written + r.dead_lettered + r.duplicates + r.tombstones_skipped,
        "records sent = written + dead-lettered + duplicates + tombstones: {r:?}"
    );
    assert_eq!(sent, r.received, "records sent = records received: {r:?}");
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a dyn Array> {
    batch
        .column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| Error::NoColumn(name.into()))
}
