//! Reading a table's data files as plain Parquet (no DataFusion): the one place that opens
//! them. A [`DataFile`] (path, size, partition values: a live file's, or one a commit added or
//! removed) is read
//! - whole, with one GET, in the table schema ([`TableHandle::read_file`]);
//! - projected, only the columns asked ([`TableHandle::read_columns`]): a file of at most
//!   [`WHOLE_FILE_BYTES`] with one GET, a larger one with ranged GETs of those columns;
//! - streamed batch by batch, every column as stored ([`TableHandle::stream_file`]);
//! - or every live file the caller does not rule out by its partition values and statistics,
//!   streamed batch by batch ([`TableHandle::scan`]).
//!
//! Partition values come back as columns ([`with_partitions`]): a data file does not hold
//! them. A file that is gone (vacuumed) is a storage error that [`is_missing_file`] recognises,
//! however it was read. The callers refuse tables with deletion vectors first
//! ([`TableHandle::refuse_deletion_vectors`]); [`TableHandle::scan`] does it itself.

use super::files::{LiveFile, PartitionValues};
use super::handle::TableHandle;
use super::whole_file::{WHOLE_FILE_BYTES, WholeFile};
use crate::error::{Error, Result};
use deltalake::Path;
use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray, new_null_array};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
#[allow(deprecated)] // parquet 59 deprecates it; delta-rs 1.1 still reads with it
use deltalake::parquet::arrow::async_reader::ParquetObjectReader;
use deltalake::parquet::arrow::async_reader::{
    AsyncFileReader, ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder,
};
use deltalake::parquet::errors::ParquetError;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use std::sync::Arc;

/// A data file to read.
#[derive(Debug, Clone)]
pub struct DataFile {
    /// The object-store path, relative to the table root.
    pub path: Path,
    /// Size in bytes, when known (saves a HEAD on a projected read).
    pub size: Option<u64>,
    /// Partition values, restored as columns.
    pub partitions: PartitionValues,
}

impl DataFile {
    /// A file by its path relative to the table root, percent-decoded (as the log's paths
    /// decode), its size when known and its partition values.
    pub fn new(decoded_path: &str, size: Option<u64>, partitions: PartitionValues) -> Self {
        let path = Path::parse(decoded_path).unwrap_or_else(|_| Path::from(decoded_path));
        Self {
            path,
            size,
            partitions,
        }
    }
}

/// A storage error that says the object is not there (a vacuumed data file).
pub fn is_missing_file(e: &Error) -> bool {
    matches!(e, Error::Storage { source, .. } if matches!(
        source.as_ref(),
        deltalake::DeltaTableError::ObjectStore {
            source: deltalake::ObjectStoreError::NotFound { .. }
        }
    ))
}

/// A Parquet error as this crate's: a missing object stays recognisable ([`is_missing_file`]).
fn parquet_error(table: &str, e: ParquetError) -> Error {
    match e {
        ParquetError::External(inner) => match inner.downcast::<deltalake::ObjectStoreError>() {
            Ok(store) => Error::storage(table, *store),
            Err(other) => Error::storage(table, ParquetError::External(other)),
        },
        e => Error::storage(table, e),
    }
}

impl TableHandle {
    /// Every row of `file` (one GET of the whole object; none when the process holds it, see
    /// [`WHOLE_FILE_BYTES`]) in `schema`, the table's: partition values restored as columns,
    /// columns the file lacks null, other types cast.
    pub async fn read_file(&self, file: &DataFile, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
        if let Some(size) = file.size.filter(|s| *s <= WHOLE_FILE_BYTES) {
            let root = self.table.table_url().as_str();
            let (store, held) = (self.table.object_store(), !self.pinned);
            let mut whole = WholeFile::new(store, (root, held), file.path.clone(), size);
            let bytes = whole
                .bytes()
                .await
                .map_err(|e| parquet_error(&self.name, e))?;
            return decode(bytes, &file.partitions, schema, &self.name);
        }
        read_data_file(
            &self.table.object_store(),
            &file.path,
            &file.partitions,
            schema,
            &self.name,
        )
        .await
    }

    /// The columns of `schema` that `file` has (ranged GETs of those columns only), in
    /// `schema`: partition values restored, missing columns null, other types cast.
    pub async fn read_columns(
        &self,
        file: &DataFile,
        schema: &SchemaRef,
    ) -> Result<Vec<RecordBatch>> {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let stream = self.projected(file, &names).await?;
        let batches: Vec<RecordBatch> = stream
            .try_collect()
            .await
            .map_err(|e| parquet_error(&self.name, e))?;
        batches
            .iter()
            .map(|b| with_partitions(schema, b, &file.partitions))
            .collect()
    }

    /// Stream `columns` (those a file has, as stored: partition columns are not restored) of
    /// every live file that `keep` does not rule out (by its partition values and statistics),
    /// handing each batch and its file's partition values to `each`. Refuses a table with
    /// deletion vectors (its files hold deleted rows). Memory is one record batch plus what
    /// the caller keeps.
    pub async fn scan(
        &self,
        columns: &[&str],
        keep: impl Fn(&LiveFile) -> bool,
        mut each: impl FnMut(&RecordBatch, &PartitionValues) -> Result<()>,
    ) -> Result<()> {
        self.refuse_deletion_vectors()?;
        for file in self.live_files()? {
            if !keep(&file) {
                continue;
            }
            let data = file.data_file();
            let mut stream = self.projected(&data, columns).await?;
            while let Some(batch) = stream
                .try_next()
                .await
                .map_err(|e| parquet_error(&self.name, e))?
            {
                each(&batch, &data.partitions)?;
            }
        }
        Ok(())
    }

    /// Every column of `file` as stored (partition columns are not restored), `batch_rows`
    /// rows per batch, streamed row group by row group (ranged GETs; a file of at most
    /// [`WHOLE_FILE_BYTES`] with one GET): for rewriting a file without holding a large one
    /// whole.
    pub async fn stream_file(
        &self,
        file: &DataFile,
        batch_rows: usize,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let builder = ParquetRecordBatchStreamBuilder::new(self.object_reader(file))
            .await
            .map_err(|e| parquet_error(&self.name, e))?;
        let name = self.name.clone();
        let stream = builder
            .with_batch_size(batch_rows)
            .build()
            .map_err(|e| parquet_error(&self.name, e))?;
        Ok(stream.map_err(move |e| parquet_error(&name, e)).boxed())
    }

    /// The reader of `file`: one GET of the whole object when its size is known and at most
    /// [`WHOLE_FILE_BYTES`], else ranged GETs (its size, when known, saves finding it out).
    #[allow(deprecated)] // `ParquetObjectReader`: see the import
    fn object_reader(&self, file: &DataFile) -> Box<dyn AsyncFileReader> {
        let store = self.table.object_store();
        match file.size {
            Some(size) if size <= WHOLE_FILE_BYTES => {
                let root = self.table.table_url().as_str();
                let held = !self.pinned;
                Box::new(WholeFile::new(store, (root, held), file.path.clone(), size))
            }
            Some(size) => {
                Box::new(ParquetObjectReader::new(store, file.path.clone()).with_file_size(size))
            }
            None => Box::new(ParquetObjectReader::new(store, file.path.clone())),
        }
    }

    /// A ranged reader of the `columns` of `file` it has.
    #[allow(deprecated)] // `ParquetObjectReader`: see the import
    async fn projected(
        &self,
        file: &DataFile,
        columns: &[&str],
    ) -> Result<ParquetRecordBatchStream<Box<dyn AsyncFileReader>>> {
        let builder = ParquetRecordBatchStreamBuilder::new(self.object_reader(file))
            .await
            .map_err(|e| parquet_error(&self.name, e))?;
        let present: Vec<&str> = columns
            .iter()
            .copied()
            .filter(|c| builder.schema().field_with_name(c).is_ok())
            .collect();
        let mask = ProjectionMask::columns(builder.parquet_schema(), present);
        builder
            .with_projection(mask)
            .build()
            .map_err(|e| parquet_error(&self.name, e))
    }
}

/// Read one data file (one GET) in the table schema (partition values restored as columns).
pub(crate) async fn read_data_file(
    store: &deltalake::logstore::ObjectStoreRef,
    path: &Path,
    partitions: &PartitionValues,
    schema: &SchemaRef,
    table: &str,
) -> Result<Vec<RecordBatch>> {
    let bytes = store
        .get(path)
        .await
        .map_err(|e| Error::storage(table, e))?
        .bytes()
        .await
        .map_err(|e| Error::storage(table, e))?;
    decode(bytes, partitions, schema, table)
}

/// Decode a whole data file in the table schema (partition values restored as columns).
fn decode(
    bytes: bytes::Bytes,
    partitions: &PartitionValues,
    schema: &SchemaRef,
    table: &str,
) -> Result<Vec<RecordBatch>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| Error::storage(table, e))?;
    reader
        .map(|b| with_partitions(schema, &b?, partitions))
        .collect()
}

/// Rebuild a data file's batch in the table schema: partition values (from the path) become
/// columns again, missing columns (older files) read null.
pub fn with_partitions(
    schema: &SchemaRef,
    batch: &RecordBatch,
    partitions: &PartitionValues,
) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let col = if let Some(c) = batch.column_by_name(f.name()) {
            if c.data_type() == f.data_type() {
                c.clone()
            } else {
                cast(c, f.data_type())?
            }
        } else if let Some(v) = partitions.get(f.name()) {
            let text: ArrayRef = Arc::new(StringArray::from(vec![v.clone(); n]));
            cast(&text, f.data_type())?
        } else {
            new_null_array(f.data_type(), n)
        };
        cols.push(col);
    }
    Ok(RecordBatch::try_new(schema.clone(), cols)?)
}
