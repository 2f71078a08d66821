//! Back-fill (`lakestream load TABLE FILE...`): a file of historical rows (Parquet, CSV with a
//! header, or newline-delimited JSON) appended to a table through the one commit path, exactly
//! once per file: the commit carries a `txn` named after the file's SHA-256, so loading the same
//! bytes again (a retry, a re-run, a copy under another name) writes nothing.
//!
//! Columns are matched by name (case-insensitively, as Delta does) and cast to the table's
//! types; a file column the table lacks, a value that does not cast, or a missing value of a
//! non-nullable column refuses the whole file. Columns a topic's table generates are filled as
//! its ingestion would: the processing-time partitions from the load's clock, `kafka_partition`
//! -1 (no Kafka partition), `kafka_offset` the row's index in the file, `kafka_topic`
//! `lakestream-load`; other missing columns are null.

use crate::commit::{self, CommitSettings, Planned, Planner, TableState};
use crate::error::{Error, Result};
use crate::schema::{ColumnSource, TableLayout};
use crate::storage::Lake;
use crate::table::TableHandle;
use chrono::{DateTime, Datelike, Timelike, Utc};
use deltalake::arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, new_null_array,
};
use deltalake::arrow::compute::{cast_with_options, concat_batches};
use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use deltalake::kernel::Transaction;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use lakestream_formats::config::{KafkaMetadataColumn, PipelineConfig};
use sha2::Digest;
use std::sync::Arc;

/// A file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Apache Parquet.
    Parquet,
    /// CSV with a header row.
    Csv,
    /// Newline-delimited JSON objects.
    Json,
}

impl FileFormat {
    /// The format a file name's extension says (`.parquet`, `.csv`, `.json` / `.jsonl` /
    /// `.ndjson`).
    pub fn of(name: &str) -> Option<Self> {
        let lower = name.to_ascii_lowercase();
        let ext = lower.rsplit('.').next()?;
        match ext {
            "parquet" | "pq" => Some(Self::Parquet),
            "csv" => Some(Self::Csv),
            "json" | "jsonl" | "ndjson" => Some(Self::Json),
            _ => None,
        }
    }
}

/// A file to load: its name (for messages and the report), bytes and format.
#[derive(Debug, Clone)]
pub struct LoadFile {
    /// The name, e.g. its path.
    pub name: String,
    /// Its bytes.
    pub bytes: bytes::Bytes,
    /// Its format.
    pub format: FileFormat,
}

/// What loading one file did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    /// The file.
    pub file: String,
    /// The table.
    pub table: String,
    /// Rows the file holds.
    pub rows: usize,
    /// The version that appended them (`None`: nothing committed now).
    pub version: Option<u64>,
    /// The file's bytes were loaded before (its `txn` is in the table): nothing was written.
    pub already_loaded: bool,
    /// The `txn` appId naming the file.
    pub app_id: String,
}

/// The `txn` appId of a file's bytes in `pipeline`.
pub fn load_app_id(pipeline: &str, bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{pipeline}/load/sha256:{hex}")
}

/// Append the rows of `file` to `table`, exactly once per content; `now` is the processing
/// time of generated partition columns.
pub async fn load_file(
    lake: &Lake,
    config: &PipelineConfig,
    settings: &CommitSettings,
    now: DateTime<Utc>,
    table: &str,
    file: &LoadFile,
) -> Result<LoadReport> {
    let (name, bytes) = (file.name.as_str(), &file.bytes);
    let refuse = |reason: String| Error::Load {
        file: name.to_string(),
        reason,
    };
    let mut handle = TableHandle::open(lake, table)?;
    let exists = handle.refresh().await?;
    let layout = config
        .topics
        .iter()
        .find(|t| t.table == table)
        .map(TableLayout::for_topic);
    if table == config.dead_letter_table {
        return Err(refuse(format!(
            "`{table}` is the dead-letter table; load appends to source tables"
        )));
    }
    if exists {
        if let Some(job) = handle.property(crate::refine::context::JOB_PROPERTY)? {
            return Err(refuse(format!(
                "`{table}` is the output of refine job `{job}` (one row per key or group: an \
                 append would break it); load into the job's source instead"
            )));
        }
        if let Some(r) = handle.property("delta.setTransactionRetentionDuration")? {
            return Err(refuse(format!(
                "`{table}` expires its `txn`s ({r}), so a load could not stay exactly once"
            )));
        }
    }
    let (schema, partition_columns) = match (exists, &layout) {
        (true, _) => (handle.arrow_schema()?, handle.partition_columns()?),
        (false, Some(l)) => (l.config_schema.clone(), l.partition_columns.clone()),
        (false, None) => {
            return Err(refuse(format!(
                "table `{table}` does not exist and is no topic's table; load appends to an \
                 existing table or a configured topic's table"
            )));
        }
    };
    let rows_in = decode(bytes, file.format, &schema).map_err(refuse)?;
    let rows = rows_in.num_rows();
    let batch =
        assemble(&rows_in, &schema, &partition_columns, layout.as_ref(), now).map_err(refuse)?;
    let app_id = load_app_id(&config.pipeline, bytes);
    let mut planner = LoadPlanner {
        app_id: app_id.clone(),
        batch,
        schema,
        partition_columns,
        already: false,
    };
    let outcome = commit::append(lake, &mut handle, settings, &mut planner).await?;
    Ok(LoadReport {
        file: name.to_string(),
        table: table.to_string(),
        rows,
        version: outcome.version,
        already_loaded: planner.already,
        app_id,
    })
}

struct LoadPlanner {
    app_id: String,
    batch: RecordBatch,
    schema: SchemaRef,
    partition_columns: Vec<String>,
    already: bool,
}

impl Planner for LoadPlanner {
    fn app_ids(&self) -> Vec<String> {
        vec![self.app_id.clone()]
    }

    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        self.already = state.committed.contains_key(&self.app_id);
        if self.already {
            return Ok(None);
        }
        let schema = state.schema.clone().unwrap_or_else(|| self.schema.clone());
        let batch = crate::read::with_partitions(&schema, &self.batch, &Default::default())?;
        Ok(Some(Planned {
            batch,
            schema,
            partition_columns: self.partition_columns.clone(),
            txns: vec![Transaction::new(self.app_id.clone(), 0)],
            set_properties: vec![],
            table_properties: vec![],
            commit_if_empty: false,
        }))
    }
}

/// The table's field named `name` (case-insensitively).
fn field_of<'a>(schema: &'a Schema, name: &str) -> Option<&'a Field> {
    schema
        .fields()
        .iter()
        .find(|f| f.name().eq_ignore_ascii_case(name))
        .map(|f| f.as_ref())
}

/// The file's rows as a batch of its own columns.
fn decode(
    bytes: &bytes::Bytes,
    format: FileFormat,
    table: &Schema,
) -> std::result::Result<RecordBatch, String> {
    let batches: Vec<RecordBatch> = match format {
        FileFormat::Parquet => ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .and_then(|b| b.build())
            .map_err(|e| format!("not a Parquet file ({e})"))?
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| format!("bad Parquet data ({e})"))?,
        FileFormat::Csv => {
            // A UTF-8 byte-order mark is not part of the first column's name.
            let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
            if body.iter().all(u8::is_ascii_whitespace) {
                return Ok(RecordBatch::new_empty(Arc::new(Schema::empty())));
            }
            let format = arrow_csv::reader::Format::default().with_header(true);
            let (header, _) = format
                .infer_schema(std::io::Cursor::new(body), Some(0))
                .map_err(|e| format!("bad CSV header ({e})"))?;
            let mut fields = Vec::new();
            for h in header.fields() {
                let f = field_of(table, h.name()).ok_or_else(|| unknown(h.name(), table))?;
                fields.push(Field::new(h.name(), f.data_type().clone(), true));
            }
            arrow_csv::ReaderBuilder::new(Arc::new(Schema::new(fields)))
                .with_header(true)
                .build(std::io::Cursor::new(body.to_vec()))
                .map_err(|e| format!("bad CSV ({e})"))?
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| format!("bad CSV ({e})"))?
        }
        FileFormat::Json => {
            // The ingest decoder: the same rules as a Kafka value (numbers in a timestamp
            // column are epoch milliseconds; names as the table spells them).
            let fields: Vec<Field> = table
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect();
            let lines: Vec<(usize, &[u8])> = bytes
                .split(|b| *b == b'\n')
                .enumerate()
                .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
                .collect();
            let values: Vec<Option<&[u8]>> = lines.iter().map(|(_, l)| Some(*l)).collect();
            let decoded = crate::kafka::decode::decode_values(
                &values,
                &Arc::new(Schema::new(fields)),
                lakestream_formats::config::SchemaMode::Enforce,
            )
            .map_err(|e| e.to_string())?;
            if let Some((i, why)) = decoded.rejects.first() {
                return Err(format!(
                    "line {}: {why} ({} bad line(s) in all)",
                    lines[*i].0 + 1,
                    decoded.rejects.len()
                ));
            }
            if decoded.unknown_fields_ignored > 0 {
                return Err(format!(
                    "{} field(s) name no column of the table (JSON names must be spelled as the \
                     table's columns)",
                    decoded.unknown_fields_ignored
                ));
            }
            vec![decoded.batch]
        }
    };
    let Some(first) = batches.first() else {
        return Ok(RecordBatch::new_empty(Arc::new(Schema::empty())));
    };
    concat_batches(&first.schema(), &batches).map_err(|e| e.to_string())
}

fn unknown(name: &str, table: &Schema) -> String {
    let names: Vec<&str> = table.fields().iter().map(|f| f.name().as_str()).collect();
    format!(
        "the file has a column `{name}` the table lacks (columns: {}); add it to the table \
         first (e.g. to the topic's columns) or drop it from the file",
        names.join(", ")
    )
}

/// The file's rows in the table's schema, generated columns filled.
fn assemble(
    file: &RecordBatch,
    schema: &SchemaRef,
    partition_columns: &[String],
    layout: Option<&TableLayout>,
    now: DateTime<Utc>,
) -> std::result::Result<RecordBatch, String> {
    let n = file.num_rows();
    let file_schema = file.schema();
    for (i, f) in file_schema.fields().iter().enumerate() {
        if field_of(schema, f.name()).is_none() {
            return Err(unknown(f.name(), schema));
        }
        if let Some(other) = file_schema.fields()[..i]
            .iter()
            .find(|o| o.name().eq_ignore_ascii_case(f.name()))
        {
            return Err(format!(
                "the file has columns `{}` and `{}`: one table column (names are case-insensitive)",
                other.name(),
                f.name()
            ));
        }
    }
    let strict = deltalake::arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let parts = [
        format!("{:02}", now.year().rem_euclid(100)),
        format!("{:02}", now.month()),
        format!("{:02}", now.day()),
        format!("{:02}", now.hour()),
    ];
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let given = file_schema
            .fields()
            .iter()
            .position(|g| g.name().eq_ignore_ascii_case(f.name()))
            .map(|i| file.column(i))
            .filter(|c| c.null_count() < c.len() || n == 0);
        let source = layout.map_or(ColumnSource::Value, |l| l.source_of(f.name()));
        let col: ArrayRef = match (given, source) {
            (Some(c), _) => cast_with_options(c, f.data_type(), &strict).map_err(|e| {
                format!(
                    "column `{}` does not cast from {} to the table's {} ({e})",
                    f.name(),
                    c.data_type(),
                    f.data_type()
                )
            })?,
            (None, ColumnSource::ProcessingTime(k)) => Arc::new(StringArray::from_iter_values(
                std::iter::repeat_n(parts[k].as_str(), n),
            )),
            (None, ColumnSource::Kafka(KafkaMetadataColumn::Partition)) => {
                Arc::new(Int32Array::from_iter_values(std::iter::repeat_n(-1, n)))
            }
            (None, ColumnSource::Kafka(KafkaMetadataColumn::Offset)) => {
                Arc::new(Int64Array::from_iter_values(0..n as i64))
            }
            (None, ColumnSource::Kafka(KafkaMetadataColumn::Topic)) => Arc::new(
                StringArray::from_iter_values(std::iter::repeat_n("lakestream-load", n)),
            ),
            (None, ColumnSource::Value) if partition_columns.contains(f.name()) && n > 0 => {
                return Err(format!(
                    "the file has no values for partition column `{}` (its rows would land in \
                     the null partition)",
                    f.name()
                ));
            }
            (None, _) => new_null_array(f.data_type(), n),
        };
        if let Some(why) = out_of_years(&col) {
            return Err(format!("column `{}`: {why}", f.name()));
        }
        if !f.is_nullable() && col.null_count() > 0 {
            return Err(format!(
                "column `{}` is required (not nullable) and {} row(s) of the file have no value",
                f.name(),
                col.null_count()
            ));
        }
        cols.push(col);
    }
    RecordBatch::try_new(schema.clone(), cols).map_err(|e| e.to_string())
}

/// A timestamp or date outside the years 0001-9999 (what Delta readers accept), as ingest
/// refuses it.
fn out_of_years(col: &ArrayRef) -> Option<String> {
    use deltalake::arrow::array::AsArray;
    use deltalake::arrow::datatypes::{DataType, Date32Type, TimeUnit, TimestampMicrosecondType};
    let micros: Vec<i64> = match col.data_type() {
        DataType::Timestamp(TimeUnit::Microsecond, _) => col
            .as_primitive::<TimestampMicrosecondType>()
            .iter()
            .flatten()
            .collect(),
        DataType::Date32 => col
            .as_primitive::<Date32Type>()
            .iter()
            .flatten()
            .map(|d| i64::from(d).saturating_mul(86_400_000_000))
            .collect(),
        _ => return None,
    };
    micros
        .into_iter()
        .find_map(|us| crate::timestamp::out_of_range(us, &us.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_the_extension() {
        assert_eq!(FileFormat::of("a/b.PARQUET"), Some(FileFormat::Parquet));
        assert_eq!(FileFormat::of("x.csv"), Some(FileFormat::Csv));
        assert_eq!(FileFormat::of("x.jsonl"), Some(FileFormat::Json));
        assert_eq!(FileFormat::of("x.txt"), None);
    }

    #[test]
    fn one_content_one_app_id() {
        assert_eq!(load_app_id("p", b"a"), load_app_id("p", b"a"));
        assert_ne!(load_app_id("p", b"a"), load_app_id("p", b"b"));
        assert!(load_app_id("p", b"a").starts_with("p/load/sha256:"));
    }
}
