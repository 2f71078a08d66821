//! The dead-letter table's layout on disk: its schema, its `txn` retention and the rows a set of
//! letters becomes. Athena, `lakestream redrive` and the refine jobs read these columns by name,
//! so they change only with a migration: the Rust side ([`DeadLetter`]) may be reshaped, the
//! columns may not.

use super::letter::DeadLetter;
use crate::error::Result;
use crate::schema::timestamp_type;
use chrono::{DateTime, Utc};
use deltalake::arrow::array::{
    ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// How long the dead-letter table keeps its idempotency keys: longer than any redelivery
/// window (Kafka retention, SQS's 14-day maximum).
pub const DEAD_LETTER_TXN_RETENTION: &str = "interval 30 days";

/// The partition column of the dead-letter table (the UTC ingestion date, `YYYY-MM-DD`).
pub const DATE_COLUMN: &str = "date";

/// Schema of the dead-letter table (partitioned by `date`, the UTC ingestion date).
pub fn dead_letter_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("kafka_timestamp", timestamp_type(), true),
        Field::new("object_uri", DataType::Utf8, true),
        Field::new("line_number", DataType::Int64, true),
        Field::new("raw_base64", DataType::Utf8, true),
        Field::new("error", DataType::Utf8, false),
        Field::new("target_table", DataType::Utf8, true),
        Field::new("ingested_at", timestamp_type(), false),
        Field::new(DATE_COLUMN, DataType::Utf8, false),
    ]))
}

/// The rows of `letters`, ingested at `now`, in [`dead_letter_schema`].
pub(super) fn letters_batch(letters: &[&DeadLetter], now: DateTime<Utc>) -> Result<RecordBatch> {
    let now_us = now.timestamp_micros();
    let date = now.format("%Y-%m-%d").to_string();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter(letters.iter().map(|l| l.topic()))),
        Arc::new(Int32Array::from_iter(letters.iter().map(|l| l.partition()))),
        Arc::new(Int64Array::from_iter(letters.iter().map(|l| l.offset()))),
        Arc::new(
            TimestampMicrosecondArray::from_iter(
                letters
                    .iter()
                    .map(|l| l.kafka_timestamp_ms().and_then(|m| m.checked_mul(1000))),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from_iter(
            letters.iter().map(|l| l.object_uri()),
        )),
        Arc::new(Int64Array::from_iter(
            letters.iter().map(|l| l.line_number()),
        )),
        Arc::new(StringArray::from_iter(
            letters.iter().map(|l| l.raw_base64.as_deref()),
        )),
        Arc::new(StringArray::from_iter_values(
            letters.iter().map(|l| l.reason.as_str()),
        )),
        Arc::new(StringArray::from_iter(
            letters.iter().map(|l| l.target_table.as_deref()),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(letters.iter().map(|_| now_us))
                .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from_iter_values(
            letters.iter().map(|_| date.as_str()),
        )),
    ];
    Ok(RecordBatch::try_new(dead_letter_schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lakestream_formats::record::SourceRecord;

    /// The columns Athena, redrive and refine read by name: any change here is a migration.
    #[test]
    fn the_table_schema_is_the_one_readers_expect() {
        let got: Vec<(String, String, bool)> = dead_letter_schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().to_string(), f.is_nullable()))
            .collect();
        let ts = timestamp_type().to_string();
        let want = [
            ("topic", "Utf8", true),
            ("partition", "Int32", true),
            ("offset", "Int64", true),
            ("kafka_timestamp", ts.as_str(), true),
            ("object_uri", "Utf8", true),
            ("line_number", "Int64", true),
            ("raw_base64", "Utf8", true),
            ("error", "Utf8", false),
            ("target_table", "Utf8", true),
            ("ingested_at", ts.as_str(), false),
            ("date", "Utf8", false),
        ];
        let want: Vec<(String, String, bool)> = want
            .iter()
            .map(|(n, t, null)| (n.to_string(), t.to_string(), *null))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_kafka_letter_and_an_object_line_fill_their_columns() -> Result<()> {
        let k = DeadLetter::kafka(&SourceRecord::new("t", 1, 5, 2, b"{}"), None, "e".into());
        let o = DeadLetter::object_line("s3://b/k".into(), 4, b"x", "id".into(), "f".into());
        let now = DateTime::from_timestamp(86_400, 0).unwrap_or_default();
        let b = letters_batch(&[&k, &o], now)?;
        assert_eq!(b.num_rows(), 2);
        let null_counts: Vec<usize> = b.columns().iter().map(|c| c.null_count()).collect();
        // topic..offset, timestamp: Kafka only; object_uri, line_number: object only; both raw.
        assert_eq!(null_counts, [1, 1, 1, 1, 1, 1, 0, 0, 2, 0, 0]);
        Ok(())
    }
}
