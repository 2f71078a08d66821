//! Parquet files, read with parquet's async reader over ranged reads of the object version
//! (footer first, then the pages of each row group as batches are asked for): never the whole
//! object in memory. Names and types come from the file; an `Op` column (DMS CDC files, and
//! full loads with `IncludeOpForFullLoad`) becomes `__op` and is not kept as a row column.
//! A file that is not Parquet is refused as a whole (one dead letter).

use super::decode::{Chunk, ChunkLimits, FileSpec};
use super::layout::{DecodedRows, dms_op};
use super::rows::BadRow;
use crate::error::{Error, Result};
use crate::s3_object::ObjectVersion;
use crate::schema::timestamp_type;
use bytes::Bytes;
use deltalake::arrow::array::{Array, AsArray, BooleanArray, TimestampMicrosecondArray};
use deltalake::arrow::compute::{cast, filter_record_batch};
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::parquet::arrow::arrow_reader::ArrowReaderOptions;
use deltalake::parquet::arrow::async_reader::{
    AsyncFileReader, ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder,
};
use deltalake::parquet::errors::ParquetError;
use deltalake::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use lakestream_formats::config::{CdcSource, bronze};
use std::ops::Range;
use std::sync::Arc;

/// An object version as parquet's [`AsyncFileReader`].
pub struct VersionReader(Arc<dyn ObjectVersion>);

impl AsyncFileReader for VersionReader {
    fn get_bytes(
        &mut self,
        range: Range<u64>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Bytes>> {
        self.0
            .read_range(range)
            .map(|r| r.map_err(|e| ParquetError::External(Box::new(e))))
            .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, deltalake::parquet::errors::Result<Arc<ParquetMetaData>>> {
        let size = self.0.size();
        async move {
            let meta = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
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
}

/// A fetch error inside parquet's error, or parquet's own: retryable only when the read was.
fn parquet_error(spec: &FileSpec, e: ParquetError) -> Error {
    if let ParquetError::External(inner) = e {
        return match inner.downcast::<Error>() {
            Ok(inner) => *inner,
            Err(other) => Error::Fetch {
                object: spec.uri.clone(),
                message: other.to_string(),
                retryable: true,
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
        let builder = ParquetRecordBatchStreamBuilder::new(VersionReader(version))
            .await
            .map_err(|e| parquet_error(&spec, e))?;
        let names = builder.schema().fields().iter().map(|f| f.name().as_str());
        if let Some(why) = super::decode::case_twins(names) {
            return Err(Error::Fetch {
                object: spec.uri.clone(),
                message: format!("the Parquet schema {why}"),
                retryable: false,
            });
        }
        let stream = builder
            .with_batch_size(limits.rows.max(1))
            .with_offset(usize::try_from(skip.max(0)).unwrap_or(usize::MAX))
            .build()
            .map_err(|e| parquet_error(&spec, e))?;
        Ok(Self {
            spec,
            stream,
            next_row: skip.max(0) + 1,
        })
    }

    /// The next batch as a chunk.
    pub async fn next_chunk(&mut self) -> Result<Chunk> {
        let first_row = self.next_row;
        let Some(batch) = self.stream.next().await else {
            return Ok(Chunk {
                decoded: DecodedRows {
                    columns: RecordBatch::new_empty(Arc::new(
                        deltalake::arrow::datatypes::Schema::empty(),
                    )),
                    ops: vec![],
                    rows: vec![],
                    source_ts: vec![],
                },
                bad: vec![],
                first_row,
                last_row: first_row - 1,
                eof: true,
                stop: None,
            });
        };
        let batch = batch.map_err(|e| parquet_error(&self.spec, e))?;
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
