//! Access-log records -> Arrow, appended straight into column builders (no intermediate rows).

use crate::schema::timestamp_type;
use deltalake::arrow::array::{
    ArrayRef, Int32Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;
use lakestream_formats::access_log::{AccessLogRecord, FIELDS};
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
    /// The last day seen (days since the epoch) and its `YYYY-MM-DD`: logs come in time order.
    last_day: Option<(i64, String)>,
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
            last_day: None,
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
        let date = match &self.last_day {
            Some((d, text)) if *d == day => text,
            _ => {
                let text = chrono::DateTime::from_timestamp(day * 86_400, 0)
                    .map(|d| d.format("%Y-%m-%d").to_string())
                    .unwrap_or_default();
                &self.last_day.insert((day, text)).1
            }
        };
        self.date.append_value(date);
        self.rows += 1;
    }

    /// Take the rows appended so far as a batch (the builder is reset, its buffers sized like
    /// this batch's: arrow's `finish` hands its buffers over and the next batch would regrow
    /// every one of the 27 columns from empty).
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let rows = self.rows;
        let sized = |b: &StringBuilder| StringBuilder::with_capacity(rows, b.values_slice().len());
        let text_next: Vec<StringBuilder> = self.text.iter().map(sized).collect();
        let (extra_next, object_next, date_next) =
            (sized(&self.extra), sized(&self.object), sized(&self.date));
        let batch = self.finish_columns();
        self.text = text_next;
        self.extra = extra_next;
        self.object = object_next;
        self.date = date_next;
        self.time = TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC");
        self.status = Int32Builder::with_capacity(rows);
        self.numbers = std::array::from_fn(|_| Int64Builder::with_capacity(rows));
        self.line = Int64Builder::with_capacity(rows);
        batch
    }

    fn finish_columns(&mut self) -> Result<RecordBatch, ArrowError> {
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
    use deltalake::arrow::array::{Array, AsArray};
    use deltalake::arrow::datatypes::Int64Type;
    use lakestream_formats::access_log::parse_line;

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

    const AWS_EXAMPLE: &str = "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be amzn-s3-demo-bucket1 [06/Feb/2019:00:00:38 +0000] 192.0.2.3 79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be 3E57427F3EXAMPLE REST.GET.VERSIONING - \"GET /amzn-s3-demo-bucket1?versioning HTTP/1.1\" 200 - 113 - 7 - \"-\" \"S3Console/0.4\" - s9lzHYrFp76ZVxRcpX9+5cjAnEH2ROuNkd2BHfIa6UkFVdtjf5mKR3/eTPFvsiP/XV/VLi31234= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader amzn-s3-demo-bucket1.s3.us-west-1.amazonaws.com TLSV1.2 arn:aws:s3:us-west-1:123456789012:accesspoint/example-AP Yes us-east-1";

    /// Property: no input makes the parser (or the Arrow builder) panic. Random mutations of
    /// real lines plus random strings over the characters that matter to the grammar.
    #[test]
    fn random_and_mutated_lines_never_panic() {
        let seeds = [
            AWS_EXAMPLE.to_string(),
            crate::access_log::generate::generate_lines(
                9,
                20,
                &["b"],
                chrono::DateTime::from_timestamp(0, 0).unwrap_or_default(),
            ),
        ];
        let alphabet: Vec<char> = " \"[]-+:/0123456789abcXYZ\r\té€\u{1F600}".chars().collect();
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let mut builder = crate::access_log::AccessLogBatchBuilder::new();
        let mut parsed = 0;
        for _ in 0..30_000 {
            let base: Vec<char> = seeds[rng.usize(0..seeds.len())]
                .lines()
                .nth(rng.usize(0..3))
                .unwrap_or(AWS_EXAMPLE)
                .chars()
                .collect();
            let mut chars = base;
            for _ in 0..rng.usize(1..6) {
                match rng.u8(0..5) {
                    0 if !chars.is_empty() => {
                        let at = rng.usize(0..chars.len());
                        let len = rng.usize(0..(chars.len() - at).min(40) + 1);
                        chars.drain(at..at + len);
                    }
                    1 => {
                        let at = rng.usize(0..=chars.len());
                        chars.insert(at, alphabet[rng.usize(0..alphabet.len())]);
                    }
                    2 if !chars.is_empty() => {
                        let at = rng.usize(0..chars.len());
                        chars[at] = alphabet[rng.usize(0..alphabet.len())];
                    }
                    3 => chars.truncate(rng.usize(0..=chars.len())),
                    _ => {
                        chars = (0..rng.usize(0..300))
                            .map(|_| alphabet[rng.usize(0..alphabet.len())])
                            .collect();
                    }
                }
            }
            let line: String = chars.into_iter().collect();
            if let Ok(rec) = parse_line(&line) {
                builder.append(&rec, "s3://x/y", 1);
                parsed += 1;
            }
        }
        assert!(builder.finish().is_ok_and(|b| b.num_rows() == parsed));
        assert!(
            parsed > 100,
            "mutations should leave some lines valid: {parsed}"
        );
    }
}
