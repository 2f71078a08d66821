//! Timestamp columns, decoded as text by arrow-json, converted to microseconds UTC: integers
//! are epoch milliseconds (arrow-json would read them as the column's unit, microseconds),
//! strings are ISO-8601 with or without fraction and zone, or `YYYY-MM-DD HH:MM:SS` (UTC).
//! Values outside the years 0001-9999 are rejected with the year they would be.

use crate::error::Result;
use crate::timestamp::{out_of_range, parse_timestamp_micros};
use deltalake::arrow::array::{Array, ArrayRef, StringArray, TimestampMicrosecondArray};
use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// Convert text timestamp columns to microseconds UTC. Returns the batch with `target`'s types
/// and the rows whose text could not be parsed.
pub(super) fn convert_timestamps(
    batch: RecordBatch,
    target: &Schema,
) -> Result<(RecordBatch, Vec<(usize, String)>)> {
    let mut bad: Vec<(usize, String)> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
    for (field, col) in target.fields().iter().zip(batch.columns()) {
        if !matches!(field.data_type(), DataType::Timestamp(_, _)) {
            columns.push(col.clone());
            continue;
        }
        let Some(text) = col.as_any().downcast_ref::<StringArray>() else {
            columns.push(col.clone());
            continue;
        };
        let mut out: Vec<Option<i64>> = Vec::with_capacity(text.len());
        for (row, v) in text.iter().enumerate() {
            match v.map(parse_timestamp_micros) {
                None => out.push(None),
                Some(Some(us)) => match out_of_range(us, v.unwrap_or_default()) {
                    None => out.push(Some(us)),
                    Some(why) => {
                        bad.push((row, format!("field `{}`: {why}", field.name())));
                        out.push(None);
                    }
                },
                Some(None) => {
                    bad.push((
                        row,
                        format!(
                            "field `{}`: cannot parse {:?} as a timestamp (ISO-8601 or epoch ms)",
                            field.name(),
                            v.unwrap_or_default()
                        ),
                    ));
                    out.push(None);
                }
            }
        }
        let arr = TimestampMicrosecondArray::from(out).with_timezone("UTC");
        columns.push(Arc::new(arr));
    }
    let schema = Arc::new(Schema::new(
        target
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(schema, columns)?;
    Ok((batch, bad))
}
