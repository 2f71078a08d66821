//! What a delivered file is (format, full load or CDC, its `__seq` phase), the ordering rule's
//! `__seq` text, and the bronze rows: the metadata columns of ARCHITECTURE.md "Bronze" before
//! the row's own columns, and a batch aligned to the table's (merged) schema.

use crate::error::{Error, Result};
use crate::schema::timestamp_type;
use deltalake::arrow::array::{
    Array, ArrayRef, Int64Array, StringArray, TimestampMicrosecondArray, new_null_array,
};
use deltalake::arrow::compute::{CastOptions, cast_with_options};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use lakestream_formats::config::{CdcSource, bronze};
use std::sync::Arc;

/// The file formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// CSV (DMS default; plain files).
    Csv,
    /// JSON lines (`.json`, `.jsonl`, `.ndjson`): one object per line.
    JsonLines,
    /// Parquet (DMS `DataFormat=parquet`; plain files).
    Parquet,
}

/// What one delivered file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKind {
    /// Its format, from the name's extension.
    pub format: Format,
    /// A DMS CDC file (rows carry an `Op`); else a full-load (`LOAD*`) or plain file, every
    /// row `__op = r`.
    pub cdc: bool,
}

impl FileKind {
    /// The kind of `key` in a family of `source`; `None` when the extension is not one read.
    pub fn of(source: CdcSource, key: &str) -> Option<Self> {
        let name = key.rsplit('/').next().unwrap_or(key);
        let lower = name.to_ascii_lowercase();
        let format = if lower.ends_with(".csv") {
            Format::Csv
        } else if lower.ends_with(".parquet") {
            Format::Parquet
        } else if [".json", ".jsonl", ".ndjson"]
            .iter()
            .any(|e| lower.ends_with(e))
        {
            Format::JsonLines
        } else {
            return None;
        };
        let cdc = source == CdcSource::Dms && !name.starts_with("LOAD");
        Some(Self { format, cdc })
    }

    /// The `__seq` phase: `1` for DMS CDC files, `0` for full loads and plain files.
    pub fn phase(&self) -> u8 {
        u8::from(self.cdc)
    }

    /// How the rows of an object of this kind are ordered in a family of `source`, the object
    /// written at `written_us` (if known), ingested at `ingested_us`.
    pub fn order(
        &self,
        source: CdcSource,
        written_us: Option<i64>,
        ingested_us: i64,
    ) -> ObjectOrder {
        match source {
            CdcSource::Dms => ObjectOrder::Dms {
                written_us: written_us.unwrap_or(ingested_us),
                phase: self.phase(),
            },
            // Debezium families have no files; ordered as plain files were one ever read.
            CdcSource::Files | CdcSource::Debezium => ObjectOrder::Files { written_us },
        }
    }
}

/// `__seq` of a plain file's row: `0|<time µs, 20 digits>|<object key>|<row, 12 digits>`, the
/// time being the row's timestamp column, else the object's (a time before 1970 or unknown is
/// zeros).
pub fn seq(phase: u8, time_us: Option<i64>, key: &str, row: i64) -> String {
    format!(
        "{phase}|{:020}|{key}|{:012}",
        time_us.unwrap_or(0).max(0),
        row.max(0)
    )
}

/// `__seq` of a DMS file's row: `2|<object written, µs, 20 digits>|<phase>|<object key>|<row,
/// 12 digits>`. DMS writes a table's files in commit order (the full load, then the changes
/// cached during it, then the changes as they come; a reload writes the full load again), so
/// the time the object was written orders them, whatever the rows' own commit times say (the
/// cached changes are older than the load's transfer time; a reload's rows are newer than every
/// change before it). Of objects written in the same instant a CDC file (phase 1) follows a
/// full-load file, then the key (CDC files are named by time). The leading `2` ranks every
/// such `__seq` after the `0|`/`1|` ones of earlier versions, which ordered by row time.
pub fn dms_seq(object_us: i64, phase: u8, key: &str, row: i64) -> String {
    format!(
        "2|{:020}|{phase}|{key}|{:012}",
        object_us.max(0),
        row.max(0)
    )
}

/// How the rows of one object are ordered (`__seq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectOrder {
    /// A DMS file: by when the object was written ([`dms_seq`]).
    Dms {
        /// When the object was written (µs): S3 `Last-Modified`, a file's modification time,
        /// else the notification's time, else the ingestion time.
        written_us: i64,
        /// `1` for a CDC file, `0` for a full load.
        phase: u8,
    },
    /// A plain file: by the row's timestamp column, else when the object was written ([`seq`]).
    Files {
        /// When the object was written (µs), if known.
        written_us: Option<i64>,
    },
}

/// `__op` of a DMS `Op` value (`I`, `U`, `D`); `None` for anything else.
pub fn dms_op(op: &str) -> Option<&'static str> {
    match op.trim() {
        "I" => Some(bronze::OP_INSERT),
        "U" => Some(bronze::OP_UPDATE),
        "D" => Some(bronze::OP_DELETE),
        _ => None,
    }
}

/// The bronze metadata fields, in table order.
pub fn metadata_fields() -> Vec<Field> {
    use deltalake::arrow::datatypes::DataType as T;
    vec![
        Field::new(bronze::OP, T::Utf8, false),
        Field::new(bronze::SEQ, T::Utf8, false),
        Field::new(bronze::SOURCE_TS, timestamp_type(), true),
        Field::new(bronze::KEY, T::Utf8, true),
        Field::new(bronze::TOPIC, T::Utf8, true),
        Field::new(bronze::PARTITION, T::Int32, true),
        Field::new(bronze::OFFSET, T::Int64, true),
        Field::new(bronze::OBJECT, T::Utf8, true),
        Field::new(bronze::ETAG, T::Utf8, true),
        Field::new(bronze::ROW, T::Int64, true),
        Field::new(bronze::INGESTED_AT, timestamp_type(), false),
    ]
}

/// The good rows of one chunk, decoded: the row columns and, per row, its `__op`, 1-based
/// row number and commit time (µs, from the timestamp column).
#[derive(Debug, Clone)]
pub struct DecodedRows {
    /// The row's own columns.
    pub columns: RecordBatch,
    /// `__op` per row.
    pub ops: Vec<&'static str>,
    /// 1-based data row per row.
    pub rows: Vec<i64>,
    /// The timestamp column's value per row (µs), if the family names one.
    pub source_ts: Vec<Option<i64>>,
}

/// Lineage and ordering shared by every row of one object.
#[derive(Debug, Clone)]
pub struct ObjectContext {
    /// `bucket/key`.
    pub object: String,
    /// The key (in `__seq`).
    pub key: String,
    /// The ETag read.
    pub etag: String,
    /// How its rows are ordered (`__seq`).
    pub order: ObjectOrder,
    /// `__ingested_at` (µs).
    pub ingested_at_us: i64,
}

/// Bronze rows: metadata columns, then the row's columns. A row column named like a
/// metadata column is refused ([`Error::Schema`]): rename it in the source.
pub fn bronze_batch(table: &str, d: &DecodedRows, ctx: &ObjectContext) -> Result<RecordBatch> {
    let n = d.rows.len();
    let meta = metadata_fields();
    for f in d.columns.schema().fields() {
        if meta.iter().any(|m| m.name().eq_ignore_ascii_case(f.name())) {
            return Err(Error::Schema {
                table: table.to_string(),
                reason: format!(
                    "the file has a column `{}`, a bronze metadata column name: rename it in \
                     the source",
                    f.name()
                ),
            });
        }
    }
    let seqs: StringArray = (0..n)
        .map(|i| {
            Some(match ctx.order {
                ObjectOrder::Dms { written_us, phase } => {
                    dms_seq(written_us, phase, &ctx.key, d.rows[i])
                }
                ObjectOrder::Files { written_us } => {
                    seq(0, d.source_ts[i].or(written_us), &ctx.key, d.rows[i])
                }
            })
        })
        .collect();
    let tz = Some(Arc::<str>::from("UTC"));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(d.ops.clone())),
        Arc::new(seqs),
        Arc::new(
            TimestampMicrosecondArray::from(d.source_ts.clone()).with_timezone_opt(tz.clone()),
        ),
        new_null_array(&DataType::Utf8, n),
        new_null_array(&DataType::Utf8, n),
        new_null_array(&DataType::Int32, n),
        new_null_array(&DataType::Int64, n),
        Arc::new(StringArray::from(vec![ctx.object.as_str(); n])),
        Arc::new(StringArray::from(vec![ctx.etag.as_str(); n])),
        Arc::new(Int64Array::from(d.rows.clone())),
        Arc::new(
            TimestampMicrosecondArray::from(vec![ctx.ingested_at_us; n]).with_timezone_opt(tz),
        ),
    ];
    let mut fields = meta;
    let mut arrays = cols;
    for (f, c) in d.columns.schema().fields().iter().zip(d.columns.columns()) {
        fields.push(f.as_ref().clone().with_nullable(true));
        arrays.push(c.clone());
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// The table's schema after writing `batch` (merge mode): the table's columns, then the
/// batch's new ones (nullable). `None`: the table does not exist yet.
pub fn merged_schema(existing: Option<&SchemaRef>, batch: &Schema) -> SchemaRef {
    let Some(existing) = existing else {
        return Arc::new(batch.clone());
    };
    let mut fields: Vec<Field> = existing
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for f in batch.fields() {
        if !fields
            .iter()
            .any(|e| e.name().eq_ignore_ascii_case(f.name()))
        {
            fields.push(f.as_ref().clone().with_nullable(true));
        }
    }
    Arc::new(Schema::new(fields))
}

/// `batch` in `schema`'s columns: missing ones null, others cast to the table's type. A
/// value the table's type cannot hold is [`Error::Schema`] (the column was declared with
/// another type than the table has).
pub fn align(table: &str, batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let opts = CastOptions {
        safe: false,
        ..Default::default()
    };
    let mut cols = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let found = batch
            .schema()
            .fields()
            .iter()
            .position(|b| b.name().eq_ignore_ascii_case(f.name()));
        let col = match found {
            None => new_null_array(f.data_type(), n),
            Some(i) => {
                let c = batch.column(i);
                if c.data_type() == f.data_type() {
                    c.clone()
                } else {
                    // Arrow's error quotes the value that did not convert: not passed on.
                    cast_with_options(c, f.data_type(), &opts).map_err(|_| Error::Schema {
                        table: table.to_string(),
                        reason: format!(
                            "column `{}` is {} in the table but {} in this file, and a value does \
                             not convert; declare it with the table's type in the family's \
                             `columns`",
                            f.name(),
                            f.data_type(),
                            c.data_type()
                        ),
                    })?
                }
            }
        };
        if !f.is_nullable() && col.null_count() > 0 {
            return Err(Error::Schema {
                table: table.to_string(),
                reason: format!("column `{}` is NOT NULL in the table", f.name()),
            });
        }
        cols.push(col);
    }
    Ok(RecordBatch::try_new(schema.clone(), cols)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_seq() {
        let k = FileKind::of(CdcSource::Dms, "dms/dbo/items/LOAD00000001.csv");
        assert_eq!(
            k,
            Some(FileKind {
                format: Format::Csv,
                cdc: false
            })
        );
        let c = FileKind::of(CdcSource::Dms, "dms/dbo/items/20261129-113401000.parquet");
        assert_eq!(c.map(|k| (k.format, k.phase())), Some((Format::Parquet, 1)));
        let f = FileKind::of(CdcSource::Files, "in/a/b/x.jsonl");
        assert_eq!(
            f.map(|k| (k.format, k.phase())),
            Some((Format::JsonLines, 0))
        );
        assert_eq!(FileKind::of(CdcSource::Dms, "dms/a/b/x.txt"), None);
        assert_eq!(
            seq(1, Some(1_795_000_000_000_000), "p/a/b/f.csv", 7),
            "1|00001795000000000000|p/a/b/f.csv|000000000007"
        );
        assert_eq!(
            seq(0, None, "k", 1),
            "0|00000000000000000000|k|000000000001"
        );
        assert!(seq(0, Some(5), "k", 2) < seq(1, Some(1), "k", 1));
    }

    /// A DMS reload (the full load written again) ranks after every change before it, and the
    /// changes cached during a load after the load; old `0|`/`1|` values rank first.
    #[test]
    fn dms_seq_orders_by_when_the_object_was_written() {
        let load = dms_seq(1_000, 0, "d/t/LOAD00000001.csv", 3);
        let cdc = dms_seq(2_000, 1, "d/t/20261129-113401000.csv", 1);
        let reload = dms_seq(3_000, 0, "d/t/LOAD00000001.csv", 3);
        assert!(load < cdc && cdc < reload, "{load} {cdc} {reload}");
        assert_ne!(load, reload, "two contents of one key never share a __seq");
        // Written in the same instant: the CDC file after the full load.
        assert!(dms_seq(5, 0, "d/t/LOAD2.csv", 9) < dms_seq(5, 1, "d/t/2026.csv", 1));
        assert!(seq(1, Some(i64::MAX), "z", 999) < dms_seq(0, 0, "a", 1));
        assert_eq!(
            dms_seq(1_795_000_000_000_000, 1, "p/f.csv", 7),
            "2|00001795000000000000|1|p/f.csv|000000000007"
        );
    }
}
