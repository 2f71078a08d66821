//! How Lakestream writes data files: delta-rs's writer with row groups bounded by bytes
//! ([`ROW_GROUP_BYTES`]) and large batches written in slices so that bound applies
//! ([`write_sliced`]). Used by every writer of data files: ingest commits, refine runs (the
//! upsert and CDC apply, SCD2, aggregates), change data files, compaction and the table
//! layer's file writer.

use deltalake::DeltaTableError;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Add;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};

/// Row groups of new data files end at this estimated encoded size (Parquet's default is a
/// million rows, whatever their width: a 1.5 M-row run wrote one 158 MB row group). A rewrite
/// decodes one row group at a time, so this bounds what it holds per file read.
pub(crate) const ROW_GROUP_BYTES: usize = 16 << 20;

/// Rows per write into a writer: Parquet's row group limit by bytes splits a batch only once
/// rows are buffered, so a large batch is written in slices (zero-copy).
const WRITE_SLICE_ROWS: usize = 8192;

/// The writer properties of every data file Lakestream writes: delta-rs's (Snappy) with row
/// groups bounded by [`ROW_GROUP_BYTES`].
pub(crate) fn writer_properties() -> deltalake::parquet::file::properties::WriterProperties {
    deltalake::parquet::file::properties::WriterProperties::builder()
        .set_compression(deltalake::parquet::basic::Compression::SNAPPY)
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .build()
}

/// Write `batch` through `writer` in slices of [`WRITE_SLICE_ROWS`].
pub(crate) async fn write_sliced(
    writer: &mut RecordBatchWriter,
    batch: &RecordBatch,
) -> std::result::Result<(), DeltaTableError> {
    write_sliced_flushing(writer, batch, usize::MAX)
        .await
        .map(|_| ())
}

/// [`write_sliced`], flushing the writer's files each time its buffer reaches `flush_bytes`
/// (a refine run's files end near it); returns the files flushed, the caller flushes the rest.
pub(crate) async fn write_sliced_flushing(
    writer: &mut RecordBatchWriter,
    batch: &RecordBatch,
    flush_bytes: usize,
) -> std::result::Result<Vec<Add>, DeltaTableError> {
    let mut adds = Vec::new();
    let mut at = 0;
    while at < batch.num_rows() {
        let n = WRITE_SLICE_ROWS.min(batch.num_rows() - at);
        writer.write(batch.slice(at, n)).await?;
        at += n;
        if writer.buffer_len() >= flush_bytes {
            adds.extend(writer.flush().await?);
        }
    }
    Ok(adds)
}
