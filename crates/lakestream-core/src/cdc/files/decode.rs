//! One object's rows, chunk by chunk, whatever its format: the text decoder (CSV, JSON lines)
//! over the object's byte stream, and the Parquet decoder ([`super::parquet`]). A chunk holds
//! at most `chunk_rows` rows and about `chunk_bytes` raw bytes; rows at or below `skip` (the
//! rows an earlier delivery committed) are read past and not decoded again.
//!
//! DMS rules (ARCHITECTURE.md "CDC lakehouse"): CSV without a header unless `csv_header`;
//! columns named and typed by the family's declared `columns` (required without a header);
//! CDC files start each row with `Op` (`I`/`U`/`D`); full-load files (`LOAD*`) have none
//! unless `IncludeOpForFullLoad` (a header column `Op`, or one more field than declared with
//! `I`/`U`/`D` in it), and their rows are `r`, as are every plain file's.

use super::layout::{DecodedRows, Format, dms_op};
use super::parquet::ParquetDecoder;
use super::rows::{BadRow, TextChunk};
pub use super::spec::FileSpec;
use super::spec::case_twins;
use super::text::{CsvSplitter, LineSplitter, RawRecord, Splitter};
use crate::error::Result;
use crate::s3_object::ObjectVersion;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use lakestream_formats::config::{CdcSource, bronze};
use std::collections::VecDeque;
use std::sync::Arc;

/// How much one chunk (one bronze commit) holds.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLimits {
    /// Rows (good and bad).
    pub rows: usize,
    /// Raw bytes of text rows.
    pub bytes: usize,
}

/// One chunk of an object: good rows, bad rows and the data rows it covers.
#[derive(Debug)]
pub struct Chunk {
    /// Rows that land.
    pub decoded: DecodedRows,
    /// Rows dead-lettered.
    pub bad: Vec<BadRow>,
    /// The first data row of the chunk (1-based).
    pub first_row: i64,
    /// The last data row it covers (= the `txn` version after it).
    pub last_row: i64,
    /// No rows follow.
    pub eof: bool,
    /// The object stops after this chunk: the next row does not fit the declared columns of a
    /// file without a header (a column added or dropped at the source). The reason says what to
    /// change; the rows after it wait for the fixed config (the object is not finished).
    pub stop: Option<String>,
}

/// An object's decoder.
pub enum Decoder {
    /// CSV or JSON lines.
    Text(Box<TextDecoder>),
    /// Parquet.
    Parquet(Box<ParquetDecoder>),
}

impl Decoder {
    /// Open `version` for decoding after its first `skip` data rows.
    pub async fn open(
        spec: FileSpec,
        version: Arc<dyn ObjectVersion>,
        skip: i64,
        limits: ChunkLimits,
    ) -> Result<Self> {
        Ok(match spec.kind.format {
            Format::Parquet => Decoder::Parquet(Box::new(
                ParquetDecoder::open(spec, version, skip, limits).await?,
            )),
            Format::Csv | Format::JsonLines => {
                Decoder::Text(Box::new(TextDecoder::new(spec, version, skip, limits)?))
            }
        })
    }

    /// The next chunk (the last one has `eof`).
    pub async fn next_chunk(&mut self) -> Result<Chunk> {
        match self {
            Decoder::Text(t) => t.next_chunk().await,
            Decoder::Parquet(p) => p.next_chunk().await,
        }
    }
}

/// CSV / JSON lines over the byte stream.
pub struct TextDecoder {
    spec: FileSpec,
    stream: BoxStream<'static, Result<Bytes>>,
    splitter: Splitter,
    pending: VecDeque<RawRecord>,
    stream_done: bool,
    /// CSV: column names by position (declared or the header's).
    names: Option<Vec<String>>,
    header_has_op: bool,
    next_row: i64,
    skip: i64,
    limits: ChunkLimits,
    /// Why the object stopped at a row (see [`Chunk::stop`]).
    stop: Option<String>,
}

impl TextDecoder {
    fn new(
        spec: FileSpec,
        version: Arc<dyn ObjectVersion>,
        skip: i64,
        limits: ChunkLimits,
    ) -> Result<Self> {
        let csv = spec.kind.format == Format::Csv;
        let names = if !csv || spec.header {
            None
        } else if spec.declared.is_empty() {
            return Err(spec.refuse(format!(
                "a CSV file without a header row needs the table's columns: add `{}` = \
                 [\"<name> <type>\", ...] in the source table's column order (or set \
                 `csv_header = true` if the files have one)",
                spec.columns_key
            )));
        } else {
            Some(spec.declared.iter().map(|c| c.name.clone()).collect())
        };
        let splitter = if csv {
            Splitter::Csv(Box::new(CsvSplitter::new(
                spec.delimiter,
                spec.limits.max_line_bytes(),
            )))
        } else {
            Splitter::Lines(LineSplitter::new(spec.limits.max_line_bytes()))
        };
        Ok(Self {
            stream: version.stream(),
            spec,
            splitter,
            pending: VecDeque::new(),
            stream_done: false,
            names,
            header_has_op: false,
            next_row: 1,
            skip: skip.max(0),
            limits,
            stop: None,
        })
    }

    async fn next_record(&mut self) -> Result<Option<RawRecord>> {
        loop {
            if let Some(r) = self.pending.pop_front() {
                return Ok(Some(r));
            }
            if self.stream_done {
                return Ok(None);
            }
            let mut out = Vec::new();
            match self.stream.next().await {
                Some(bytes) => self.splitter.push(&bytes?, &mut out),
                None => {
                    self.splitter.push(&[], &mut out);
                    self.stream_done = true;
                }
            }
            self.pending.extend(out);
        }
    }

    /// An empty chunk with the header's columns.
    fn new_chunk(&self) -> TextChunk {
        let names = self.names.as_deref().unwrap_or(&[]);
        TextChunk::new(names, &self.spec.declared, self.spec.bronze.clone())
    }

    async fn next_chunk(&mut self) -> Result<Chunk> {
        let csv = self.spec.kind.format == Format::Csv;
        let mut chunk = self.new_chunk();
        let first_row = self.next_row.max(self.skip + 1);
        let mut eof = false;
        while chunk.len() < self.limits.rows && chunk.bytes < self.limits.bytes {
            let Some(rec) = self.next_record().await? else {
                eof = true;
                break;
            };
            if rec.overlong && csv && self.names.is_none() {
                return Err(self.spec.refuse(format!(
                    "its header row is longer than `cdc_limits.max_line_kib` ({} KiB)",
                    self.spec.limits.max_line_kib
                )));
            }
            if csv && self.names.is_none() {
                self.read_header(&rec)?;
                chunk = self.new_chunk();
                continue;
            }
            let row = self.next_row;
            self.next_row += 1;
            if row <= self.skip {
                continue;
            }
            if rec.overlong {
                let why = format!(
                    "the record is longer than `cdc_limits.max_line_kib` ({} KiB); its first {} \
                     KiB are kept here",
                    self.spec.limits.max_line_kib, self.spec.limits.max_line_kib
                );
                chunk.reject(row, rec.raw, why);
            } else if csv {
                if let Some(why) = self.csv_row(rec, row, &mut chunk) {
                    // The row is not read: the chunk (and the object's `txn`) ends before it.
                    self.next_row = row;
                    self.stop = Some(why);
                    break;
                }
            } else {
                self.json_row(rec, row, &mut chunk);
            }
        }
        let last_row = (self.next_row - 1).max(self.skip);
        let (decoded, bad) = chunk.finish(self.spec.timestamp_column.as_deref())?;
        // The chunk's columns join the table with its commit: the next chunk's width bounds
        // count them (else each chunk of one object could add another table's worth).
        let schema = decoded.columns.schema();
        let names = schema.fields().iter().map(|f| f.name().to_lowercase());
        let new: Vec<String> = names.filter(|n| !self.spec.bronze.contains(n)).collect();
        if !new.is_empty() {
            let mut bronze = (*self.spec.bronze).clone();
            bronze.extend(new);
            self.spec.bronze = Arc::new(bronze);
        }
        Ok(Chunk {
            decoded,
            bad,
            first_row,
            last_row,
            eof,
            stop: self.stop.clone(),
        })
    }

    fn read_header(&mut self, rec: &RawRecord) -> Result<()> {
        let mut names: Vec<String> = rec
            .fields
            .iter()
            .map(|f| String::from_utf8_lossy(f).trim().to_string())
            .collect();
        let dms = self.spec.source == CdcSource::Dms;
        if dms && names.first().is_some_and(|n| n == "Op") {
            names.remove(0);
            self.header_has_op = true;
        } else if self.spec.kind.cdc {
            return Err(self.spec.refuse(
                "a DMS CDC file's header must start with `Op` (DMS writes it with \
                 `AddColumnName=true`); is `csv_header` right for this family?"
                    .into(),
            ));
        }
        if let Some(why) = case_twins(names.iter().map(String::as_str)) {
            return Err(self.spec.refuse(format!("the header {why}")));
        }
        if let Some(why) = self.spec.schema_too_wide(names.iter().map(String::as_str)) {
            return Err(self
                .spec
                .refuse(format!("the header names {} columns: {why}", names.len())));
        }
        self.names = Some(names);
        Ok(())
    }

    /// Decode one CSV row into `chunk` (a bad row is a reject); `Some`: the object stops here
    /// (a file without a header whose row does not fit the declared columns: the schema changed).
    fn csv_row(&self, rec: RawRecord, row: i64, chunk: &mut TextChunk) -> Option<String> {
        let mut fields = Vec::with_capacity(rec.fields.len());
        for f in rec.fields {
            match String::from_utf8(f) {
                Ok(s) => fields.push(s),
                Err(_) => {
                    chunk.reject(row, rec.raw, "the row is not valid UTF-8".into());
                    return None;
                }
            }
        }
        let n = self.names.as_ref().map_or(0, Vec::len);
        let dms = self.spec.source == CdcSource::Dms;
        let with_op = if self.spec.kind.cdc || self.header_has_op {
            true
        } else {
            // Full load with `IncludeOpForFullLoad` and no header: one more field, an Op in it.
            dms && !self.spec.header && fields.len() == n + 1 && dms_op(&fields[0]).is_some()
        };
        let mut op = bronze::OP_SNAPSHOT;
        if with_op {
            if fields.is_empty() {
                chunk.reject(row, rec.raw, "empty row".into());
                return None;
            }
            let given = fields.remove(0);
            match dms_op(&given) {
                Some(o) if self.spec.kind.cdc => op = o,
                Some(_) => {}
                None => {
                    let why = format!(
                        "unknown Op (a text of {} characters): DMS writes I, U or D",
                        given.chars().count()
                    );
                    chunk.reject(row, rec.raw, why);
                    return None;
                }
            }
        }
        if fields.len() != n {
            let after_op = if self.spec.kind.cdc { " after Op" } else { "" };
            if !self.spec.header && fields.len() > n {
                // DMS without a header (its default) writes a column added at the source as
                // one more field: every later row is longer. Dead-lettering them would let the
                // object finish and drop its changes; it stops here instead. (A shorter row is
                // a malformed one: dead-lettered below.)
                return Some(format!(
                    "row {row} has {} field(s){after_op}, the declared columns `{}` are {n}: the \
                     source table's columns changed. Rows before it landed; fix `{}` (every \
                     column, in the source table's order) and deliver the object's notification \
                     again (on AWS: redrive the queue's dead-letter queue): it resumes at row {row}",
                    fields.len(),
                    self.spec.columns_key,
                    self.spec.columns_key
                ));
            }
            let why = format!(
                "the row has {} field(s), the table has {n} column(s){after_op}; check `{}` and \
                 the delimiter",
                fields.len(),
                self.spec.columns_key
            );
            chunk.reject(row, rec.raw, why);
            return None;
        }
        let values = fields.into_iter().map(Some).enumerate().collect();
        chunk.push(row, op, values, rec.raw);
        None
    }

    fn json_row(&self, rec: RawRecord, row: i64, chunk: &mut TextChunk) {
        let obj = match serde_json::from_slice::<serde_json::Value>(&rec.raw) {
            Ok(serde_json::Value::Object(o)) => o,
            Ok(_) => return chunk.reject(row, rec.raw, "the line is not a JSON object".into()),
            Err(e) => {
                return chunk.reject(row, rec.raw, format!("the line is not JSON: {e}"));
            }
        };
        let mut op = bronze::OP_SNAPSHOT;
        // The row is checked whole before any of its columns joins the chunk: a refused row
        // adds no column.
        if self.spec.kind.cdc {
            match obj.get("Op") {
                None => return chunk.reject(row, rec.raw, "a CDC row without `Op`".into()),
                Some(v) => match v.as_str().and_then(dms_op) {
                    Some(o) => op = o,
                    None => {
                        let why = "unknown Op: DMS writes I, U or D".into();
                        return chunk.reject(row, rec.raw, why);
                    }
                },
            }
        }
        if let Some(why) = case_twins(obj.keys().map(String::as_str)) {
            return chunk.reject(row, rec.raw, format!("the row {why}"));
        }
        let cdc = self.spec.kind.cdc;
        let columns = obj
            .keys()
            .map(String::as_str)
            .filter(|k| !(cdc && *k == "Op"));
        if let Some(why) = chunk.too_wide(columns, self.spec.limits.width()) {
            return chunk.reject(row, rec.raw, why);
        }
        let mut values = Vec::with_capacity(obj.len());
        for (k, v) in obj {
            if self.spec.kind.cdc && k == "Op" {
                continue;
            }
            let text = match v {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) => Some(s),
                other => Some(other.to_string()),
            };
            values.push((chunk.column(&k, &self.spec.declared), text));
        }
        chunk.push(row, op, values, rec.raw);
    }
}
