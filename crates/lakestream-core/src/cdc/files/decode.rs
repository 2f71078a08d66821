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

use super::layout::{DecodedRows, FileKind, Format, dms_op};
use super::parquet::ParquetDecoder;
use super::rows::{BadRow, TextChunk};
use super::text::{CsvSplitter, LineSplitter, RawRecord, Splitter};
use crate::error::{Error, Result};
use crate::s3_object::ObjectVersion;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use lakestream_formats::config::{CdcColumn, CdcFamily, CdcSource, FamilyTable, bronze};
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
}

/// What decoding one object needs from its family.
pub struct FileSpec {
    /// The file's kind.
    pub kind: FileKind,
    /// The family's source.
    pub source: CdcSource,
    /// Declared columns of the table (may be empty).
    pub declared: Vec<CdcColumn>,
    /// First line is a header.
    pub header: bool,
    /// CSV delimiter.
    pub delimiter: u8,
    /// The commit-time column.
    pub timestamp_column: Option<String>,
    /// `s3://bucket/key`, for messages.
    pub uri: String,
    /// The config key naming the table's declared columns, for messages.
    pub columns_key: String,
}

impl FileSpec {
    /// The spec of `t`'s file `kind` in `family`.
    pub fn of(family: &CdcFamily, t: &FamilyTable, kind: FileKind, uri: String) -> Result<Self> {
        Ok(Self {
            kind,
            source: family.source.kind(),
            declared: family.declared_columns(t)?,
            header: family.has_csv_header(),
            delimiter: family.csv_delimiter(),
            timestamp_column: family.timestamp_column().map(str::to_string),
            uri,
            columns_key: format!("cdc.{}.columns.\"{}\"", family.family, t.qualified()),
        })
    }

    fn refuse(&self, message: String) -> Error {
        Error::Fetch {
            object: self.uri.clone(),
            message,
            retryable: false,
        }
    }
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
            Splitter::Csv(Box::new(CsvSplitter::new(spec.delimiter)))
        } else {
            Splitter::Lines(LineSplitter::default())
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

    async fn next_chunk(&mut self) -> Result<Chunk> {
        let csv = self.spec.kind.format == Format::Csv;
        let mut chunk = TextChunk::new(self.names.as_deref().unwrap_or(&[]), &self.spec.declared);
        let first_row = self.next_row.max(self.skip + 1);
        let mut eof = false;
        while chunk.len() < self.limits.rows && chunk.bytes < self.limits.bytes {
            let Some(rec) = self.next_record().await? else {
                eof = true;
                break;
            };
            if csv && self.names.is_none() {
                self.read_header(&rec)?;
                chunk = TextChunk::new(self.names.as_deref().unwrap_or(&[]), &self.spec.declared);
                continue;
            }
            let row = self.next_row;
            self.next_row += 1;
            if row <= self.skip {
                continue;
            }
            if csv {
                self.csv_row(rec, row, &mut chunk);
            } else {
                self.json_row(rec, row, &mut chunk);
            }
        }
        let last_row = (self.next_row - 1).max(self.skip);
        let (decoded, bad) = chunk.finish(self.spec.timestamp_column.as_deref())?;
        Ok(Chunk {
            decoded,
            bad,
            first_row,
            last_row,
            eof,
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
        self.names = Some(names);
        Ok(())
    }

    fn csv_row(&self, rec: RawRecord, row: i64, chunk: &mut TextChunk) {
        let mut fields = Vec::with_capacity(rec.fields.len());
        for f in rec.fields {
            match String::from_utf8(f) {
                Ok(s) => fields.push(s),
                Err(_) => return chunk.reject(row, rec.raw, "the row is not valid UTF-8".into()),
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
                return chunk.reject(row, rec.raw, "empty row".into());
            }
            let given = fields.remove(0);
            match dms_op(&given) {
                Some(o) if self.spec.kind.cdc => op = o,
                Some(_) => {}
                None => {
                    return chunk.reject(
                        row,
                        rec.raw,
                        format!(
                            "unknown Op `{}`: DMS writes I, U or D",
                            given.chars().take(8).collect::<String>().escape_debug()
                        ),
                    );
                }
            }
        }
        if fields.len() != n {
            let why = format!(
                "the row has {} field(s), the table has {n} column(s){}; check `{}` and the \
                 delimiter",
                fields.len(),
                if self.spec.kind.cdc { " after Op" } else { "" },
                self.spec.columns_key
            );
            return chunk.reject(row, rec.raw, why);
        }
        let values = fields.into_iter().map(Some).enumerate().collect();
        chunk.push(row, op, values, rec.raw);
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
        if self.spec.kind.cdc && !obj.contains_key("Op") {
            return chunk.reject(row, rec.raw, "a CDC row without `Op`".into());
        }
        let mut values = Vec::with_capacity(obj.len());
        for (k, v) in obj {
            if self.spec.kind.cdc && k == "Op" {
                match v.as_str().and_then(dms_op) {
                    Some(o) => op = o,
                    None => {
                        return chunk.reject(
                            row,
                            rec.raw,
                            "unknown Op: DMS writes I, U or D".into(),
                        );
                    }
                }
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
