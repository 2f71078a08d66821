//! Access-log records -> Arrow, appended straight into column builders (no intermediate rows).

use super::parse::{AccessLogRecord, FIELDS};
use crate::schema::timestamp_type;
use deltalake::arrow::array::{
    ArrayRef, Int32Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;
use std::sync::Arc;

/// Column with unknown trailing fields, verbatim.
pub const EXTRA_FIELDS: &str = "extra_fields";
/// Lineage: `s3://bucket/key` of the log object.
pub const LOG_OBJECT: &str = "log_object";
/// Lineage: 1-based line number in the log object.
pub const LOG_LINE: &str = "log_line";
/// Partition column: UTC date of `time`, `YYYY-MM-DD`.
pub const DATE: &str = "date";

/// The access-log table schema: the 27 documented fields, `extra_fields`, lineage, `date`.
pub fn access_log_schema() -> SchemaRef {
    let mut fields: Vec<Field> = FIELDS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let dt = match i {
                2 => timestamp_type(),
                9 => DataType::Int32,
                11..=14 => DataType::Int64,
                _ => DataType::Utf8,
            };
            Field::new(*name, dt, i != 2)
        })
        .collect();
    fields.push(Field::new(EXTRA_FIELDS, DataType::Utf8, true));
    fields.push(Field::new(LOG_OBJECT, DataType::Utf8, false));
    fields.push(Field::new(LOG_LINE, DataType::Int64, false));
    fields.push(Field::new(DATE, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// Builds one record batch of access-log rows.
pub struct AccessLogBatchBuilder {
    text: Vec<StringBuilder>,
    time: TimestampMicrosecondBuilder,
    status: Int32Builder,
    numbers: [Int64Builder; 4],
    extra: StringBuilder,
    object: StringBuilder,
    line: Int64Builder,
    date: StringBuilder,
    rows: usize,
}

impl Default for AccessLogBatchBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl AccessLogBatchBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            text: (0..FIELDS.len()).map(|_| StringBuilder::new()).collect(),
            time: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            status: Int32Builder::new(),
            numbers: std::array::from_fn(|_| Int64Builder::new()),
            extra: StringBuilder::new(),
            object: StringBuilder::new(),
            line: Int64Builder::new(),
            date: StringBuilder::new(),
            rows: 0,
        }
    }

    /// Rows appended so far.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True when no row was appended.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Append one parsed line.
    pub fn append(&mut self, rec: &AccessLogRecord<'_>, object_uri: &str, line_no: i64) {
        for (i, b) in self.text.iter_mut().enumerate() {
            match i {
                2 | 9 | 11..=14 => {}
                _ => b.append_option(rec.text[i]),
            }
        }
        self.time.append_value(rec.time_us);
        self.status.append_option(rec.http_status);
        for (b, v) in self.numbers.iter_mut().zip(rec.numbers) {
            b.append_option(v);
        }
        self.extra.append_option(rec.extra);
        self.object.append_value(object_uri);
        self.line.append_value(line_no);
        let day = rec.time_us.div_euclid(86_400_000_000);
        let date = chrono::DateTime::from_timestamp(day * 86_400, 0)
            .map(|d| d.format("%Y-%m-%d").to_string())
            .unwrap_or_default();
        self.date.append_value(date);
        self.rows += 1;
    }

    /// Take the rows appended so far as a batch (the builder is reset).
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let mut text = self.text.iter_mut();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(FIELDS.len() + 4);
        for i in 0..FIELDS.len() {
            let b = text.next();
            let col: ArrayRef = match i {
                2 => Arc::new(self.time.finish()),
                9 => Arc::new(self.status.finish()),
                11..=14 => Arc::new(self.numbers[i - 11].finish()),
                _ => match b {
                    Some(b) => Arc::new(b.finish()),
                    None => return Err(ArrowError::ComputeError("builder state".into())),
                },
            };
            columns.push(col);
        }
        columns.push(Arc::new(self.extra.finish()));
        columns.push(Arc::new(self.object.finish()));
        columns.push(Arc::new(self.line.finish()));
        columns.push(Arc::new(self.date.finish()));
        self.rows = 0;
        RecordBatch::try_new(access_log_schema(), columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access_log::parse::parse_line;
    use deltalake::arrow::array::{Array, AsArray};
    use deltalake::arrow::datatypes::Int64Type;

    #[test]
    fn rows_and_partition_date() -> Result<(), Box<dyn std::error::Error>> {
        let line = "o bkt [31/Dec/2025:23:30:00 -0100] 1.2.3.4 r id REST.GET.OBJECT k \"GET /k HTTP/1.1\" 200 - 5 5 1 1 \"-\" \"ua\" -";
        let rec = parse_line(line).map_err(|e| e.0)?;
        let mut b = AccessLogBatchBuilder::new();
        b.append(&rec, "s3://logs/x", 7);
        b.append(&rec, "s3://logs/x", 8);
        let batch = b.finish()?;
        assert_eq!(batch.num_rows(), 2);
        let date = batch
            .column_by_name(DATE)
            .map(|c| c.as_string::<i32>().value(0).to_string());
        assert_eq!(date.as_deref(), Some("2026-01-01"), "date of the UTC time");
        let lines = batch
            .column_by_name(LOG_LINE)
            .map(|c| c.as_primitive::<Int64Type>().value(1));
        assert_eq!(lines, Some(8));
        assert_eq!(
            batch.column_by_name("referer").map(|c| c.null_count()),
            Some(2)
        );
        assert!(b.is_empty());
        Ok(())
    }
}
