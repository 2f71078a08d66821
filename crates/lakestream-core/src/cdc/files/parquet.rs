//! Parquet files, read with parquet's async reader over ranged reads of the object version
//! (footer first, then the pages of each row group as batches are asked for): never the whole
//! object in memory. Names and types come from the file; an `Op` column (DMS CDC files, and
//! full loads with `IncludeOpForFullLoad`) becomes `__op` and is not kept as a row column.
//! A file that is not Parquet, or whose metadata is outside `[cdc_limits]`, is refused as a whole
//! before parquet-rs decodes it (one dead letter; [`super::parquet_bounds`]).

use super::decode::{Chunk, ChunkLimits, FileSpec};
use super::layout::{DecodedRows, dms_op};
use super::parquet_bounds::{
    Bounds, ChunkExtent, batch_rows, check_footer, check_live_pages, check_pages, footer_len,
};
use super::parquet_dictionary::{dictionary_schema, take_within};
use super::rows::BadRow;
use crate::error::{Error, Result};
use crate::s3_object::ObjectVersion;
use crate::schema::timestamp_type;
use bytes::Bytes;
use deltalake::arrow::array::{Array, AsArray, BooleanArray, TimestampMicrosecondArray};
use deltalake::arrow::compute::{cast, filter_record_batch};
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use deltalake::parquet::arrow::async_reader::{
    AsyncFileReader, ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder,
};
use deltalake::parquet::errors::ParquetError;
use deltalake::parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use lakestream_formats::config::{CdcLimits, CdcSource, bronze};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// An object version as parquet's [`AsyncFileReader`], with its metadata checked by
/// [`parquet_bounds`](super::parquet_bounds) before parquet-rs decodes it: the footer when
/// parquet asks for the metadata, each column chunk's page headers when it is fetched.
pub struct VersionReader {
    version: Arc<dyn ObjectVersion>,
    uri: String,
    bounds: Bounds,
    /// The footer and its framing as fetched for the check (offset, bytes): served again to
    /// parquet's metadata reader instead of a second read.
    tail: Option<(u64, Bytes)>,
    /// Column chunks by (start, length), as the footer declares them.
    chunks: HashMap<(u64, u64), ChunkExtent>,
    /// Per row group, the largest page of each column chunk fetched (by its start).
    live: HashMap<usize, HashMap<u64, u64>>,
}

impl VersionReader {
    /// A reader of `version` (`uri` for messages) within `limits`.
    pub fn new(version: Arc<dyn ObjectVersion>, uri: String, limits: &CdcLimits) -> Self {
        Self {
            version,
            uri,
            bounds: Bounds::from(limits),
            tail: None,
            chunks: HashMap::new(),
            live: HashMap::new(),
        }
    }

    /// Read the framing and the footer and check them; keep the footer for parquet.
    async fn check_footer(&mut self) -> deltalake::parquet::errors::Result<()> {
        let size = self.version.size();
        let refuse = |why: String| refused(&self.uri, why);
        if size < 12 {
            return Err(refuse(format!(
                "shorter ({size} bytes) than a Parquet file's 12 bytes of framing"
            )));
        }
        let tail = self
            .version
            .read_range(size - 8..size)
            .await
            .map_err(external)?;
        let len = footer_len(&tail, size, &self.bounds).map_err(refuse)?;
        let start = size - 8 - len;
        let footer = self
            .version
            .read_range(start..size)
            .await
            .map_err(external)?;
        let checked = check_footer(&footer[..len as usize], &self.bounds).map_err(&refuse)?;
        // Column chunks lie between the leading magic and the footer: one inside the footer
        // would be served from it unchecked.
        if let Some(c) = checked
            .chunks
            .iter()
            .find(|c| c.start < 4 || c.start.saturating_add(c.len) > start)
        {
            return Err(refuse(format!(
                "a column chunk ({} bytes at {}) lies outside the file's data",
                c.len, c.start
            )));
        }
        self.chunks = checked
            .chunks
            .iter()
            .map(|c| ((c.start, c.len), *c))
            .collect();
        self.tail = Some((start, footer));
        Ok(())
    }
}

/// A refusal of the object as parquet's error (unwrapped again by [`parquet_error`]).
fn refused(uri: &str, why: String) -> ParquetError {
    ParquetError::External(Box::new(Error::Fetch {
        object: uri.to_string(),
        message: format!("a Parquet object outside `[cdc_limits]` or malformed: {why}"),
        retryable: false,
    }))
}

fn external(e: Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for VersionReader {
    fn get_bytes(
        &mut self,
        range: Range<u64>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Bytes>> {
        if let Some((start, bytes)) = &self.tail
            && range.start >= *start
            && range.end <= start + bytes.len() as u64
        {
            let at = (range.start - start) as usize..(range.end - start) as usize;
            return futures::future::ready(Ok(bytes.slice(at))).boxed();
        }
        let chunk = self
            .chunks
            .get(&(range.start, range.end.saturating_sub(range.start)))
            .copied();
        let read = self.version.read_range(range);
        async move {
            let bytes = read.await.map_err(external)?;
            if let Some(c) = chunk {
                // Before parquet decompresses any of its pages.
                let largest = check_pages(&bytes, c.uncompressed, &self.bounds)
                    .map_err(|why| refused(&self.uri, why))?;
                let live = self.live.entry(c.row_group).or_default();
                live.insert(c.start, largest);
                check_live_pages(live.values().copied(), &self.bounds)
                    .map_err(|why| refused(&self.uri, why))?;
            }
            Ok(bytes)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, deltalake::parquet::errors::Result<Arc<ParquetMetaData>>> {
        let size = self.version.size();
        async move {
            self.check_footer().await?;
            let hint = self.tail.as_ref().map(|(_, b)| b.len());
            let meta = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .with_prefetch_hint(hint)
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(meta))
        }
        .boxed()
    }
}

/// Batches of a Parquet object.
pub struct ParquetDecoder {
    spec: FileSpec,
    stream: ParquetRecordBatchStream<VersionReader>,
    next_row: i64,
    /// Rows of the last batch not expanded yet (dictionary columns over the decoded bound).
    pending: Option<RecordBatch>,
}

/// A fetch error inside parquet's error, or parquet's own: retryable only when the read was.
fn parquet_error(spec: &FileSpec, e: ParquetError) -> Error {
    if let ParquetError::External(inner) = e {
        return match inner.downcast::<Error>() {
            Ok(inner) => *inner,
            // Not a read of ours: a decompressor or decoder refusing the content.
            Err(_) => Error::Fetch {
                object: spec.uri.clone(),
                message: "not a readable Parquet file: its content does not decode".into(),
                retryable: false,
            },
        };
    }
    Error::Fetch {
        object: spec.uri.clone(),
        message: format!("not a readable Parquet file: {e}"),
        retryable: false,
    }
}

impl ParquetDecoder {
    /// Open `version` after its first `skip` rows, batches of `limits.rows` rows.
    pub async fn open(
        spec: FileSpec,
        version: Arc<dyn ObjectVersion>,
        skip: i64,
        limits: ChunkLimits,
    ) -> Result<Self> {
        let mut reader = VersionReader::new(version, spec.uri.clone(), &spec.limits);
        // No page index: parquet then fetches whole column chunks, whose pages are checked.
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Skip);
        let mut meta = ArrowReaderMetadata::load_async(&mut reader, options.clone())
            .await
            .map_err(|e| parquet_error(&spec, e))?;
        // Text read as dictionaries, expanded within the decoded bound (`parquet_dictionary`).
        if let Some(schema) = dictionary_schema(meta.schema()) {
            meta =
                ArrowReaderMetadata::try_new(meta.metadata().clone(), options.with_schema(schema))
                    .map_err(|e| parquet_error(&spec, e))?;
        }
        let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, meta);
        let names = builder.schema().fields().iter().map(|f| f.name().as_str());
        if let Some(why) = super::spec::case_twins(names) {
            return Err(Error::Fetch {
                object: spec.uri.clone(),
                message: format!("the Parquet schema {why}"),
                retryable: false,
            });
        }
        let fields = builder.schema().fields();
        if let Some(why) = spec.schema_too_wide(fields.iter().map(|f| f.name().as_str())) {
            let width = fields.len();
            return Err(spec.refuse(format!("the Parquet schema has {width} columns: {why}")));
        }
        // Batches of about `max_decoded_mib`, from the widest row group's declared bytes per row.
        let rows = batch_rows(
            builder.metadata().row_groups().iter().map(|rg| {
                // The chunks' declared sizes, which the page check holds them to.
                let bytes = rg.columns().iter().map(|c| c.uncompressed_size()).sum();
                (bytes, rg.num_rows())
            }),
            &Bounds::from(&spec.limits),
            limits.rows,
        );
        let stream = builder
            .with_batch_size(rows)
            .with_offset(usize::try_from(skip.max(0)).unwrap_or(usize::MAX))
            .build()
            .map_err(|e| parquet_error(&spec, e))?;
        Ok(Self {
            spec,
            stream,
            next_row: skip.max(0) + 1,
            pending: None,
        })
    }

    /// The next batch as a chunk.
    pub async fn next_chunk(&mut self) -> Result<Chunk> {
        let first_row = self.next_row;
        let next = match self.pending.take() {
            Some(rest) => Some(Ok(rest)),
            None => self.stream.next().await,
        };
        let Some(batch) = next else {
            return Ok(end_chunk(first_row));
        };
        let batch = batch.map_err(|e| parquet_error(&self.spec, e))?;
        let (batch, rest) = take_within(batch, self.spec.limits.max_decoded_bytes() / 4)?;
        self.pending = rest;
        let n = batch.num_rows();
        self.next_row += n as i64;
        let rows: Vec<i64> = (0..n as i64).map(|i| first_row + i).collect();
        let mut why: Vec<Option<String>> = vec![None; n];
        let mut ops = vec![bronze::OP_SNAPSHOT; n];
        let op_index = batch.schema().index_of("Op").ok();
        let dms = self.spec.source == CdcSource::Dms;
        if self.spec.kind.cdc {
            let Some(i) = op_index else {
                return Err(Error::Fetch {
                    object: self.spec.uri.clone(),
                    message: "a DMS CDC Parquet file without an `Op` column".into(),
                    retryable: false,
                });
            };
            let text = cast(batch.column(i), &DataType::Utf8)?;
            let text = text.as_string::<i32>();
            for r in 0..n {
                match text.is_valid(r).then(|| dms_op(text.value(r))).flatten() {
                    Some(o) => ops[r] = o,
                    None => why[r] = Some("unknown Op: DMS writes I, U or D".into()),
                }
            }
        }
        let mut columns = batch.clone();
        if let Some(i) = op_index.filter(|_| dms) {
            columns.remove_column(i);
        }
        let mut source_ts = vec![None; n];
        let ts_index = self
            .spec
            .timestamp_column
            .as_ref()
            .and_then(|ts| columns.schema().index_of(ts).ok().map(|i| (ts.clone(), i)));
        if let Some((ts, i)) = ts_index {
            let col = columns.column(i);
            let times = cast(col, &timestamp_type())?;
            if let Some(times) = times.as_any().downcast_ref::<TimestampMicrosecondArray>() {
                for (r, slot) in source_ts.iter_mut().enumerate() {
                    if times.is_valid(r) {
                        *slot = Some(times.value(r));
                    } else if col.is_valid(r) && why[r].is_none() {
                        why[r] = Some(format!("timestamp column `{ts}`: not a time"));
                    }
                }
            }
        }
        let keep: BooleanArray = why.iter().map(|w| Some(w.is_none())).collect();
        let mut bad = Vec::new();
        let mut good = DecodedRows {
            columns: filter_record_batch(&columns, &keep)?,
            ops: vec![],
            rows: vec![],
            source_ts: vec![],
        };
        for (r, w) in why.into_iter().enumerate() {
            match w {
                Some(reason) => bad.push(BadRow {
                    row: rows[r],
                    raw: row_json(&batch, r),
                    reason,
                    type_change: None,
                }),
                None => {
                    good.ops.push(ops[r]);
                    good.rows.push(rows[r]);
                    good.source_ts.push(source_ts[r]);
                }
            }
        }
        Ok(Chunk {
            decoded: good,
            bad,
            first_row,
            last_row: self.next_row - 1,
            eof: false,
            stop: None,
        })
    }
}

/// No rows: the object ended before `first_row`.
fn end_chunk(first_row: i64) -> Chunk {
    Chunk {
        decoded: DecodedRows {
            columns: RecordBatch::new_empty(Arc::new(deltalake::arrow::datatypes::Schema::empty())),
            ops: vec![],
            rows: vec![],
            source_ts: vec![],
        },
        bad: vec![],
        first_row,
        last_row: first_row - 1,
        eof: true,
        stop: None,
    }
}

/// Row `r` of `batch` as a JSON line (the raw bytes of a bad Parquet row).
fn row_json(batch: &RecordBatch, r: usize) -> Vec<u8> {
    let mut w = arrow_json::LineDelimitedWriter::new(Vec::new());
    if w.write(&batch.slice(r, 1)).is_err() || w.finish().is_err() {
        return Vec::new();
    }
    let mut out = w.into_inner();
    while out.last() == Some(&b'\n') {
        out.pop();
    }
    out
}
