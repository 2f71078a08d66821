//! A small data file read with one GET. The Parquet reader asks for a file's footer, then its
//! metadata, then each column chunk (or each row group's coalesced ranges): on a micro-batch
//! table's KB-sized files that was 3-9 ranged GETs per file read. A file whose size (from the
//! log) is at most [`WHOLE_FILE_BYTES`] is fetched whole on the first ask and every range
//! answered from those bytes; larger files keep ranged reads (memory stays bounded).
//!
//! Data files are written once under unique names (`part-…-<uuid>…`), so the bytes of one are
//! the same for every reader: the process keeps the files it fetched whole, up to
//! [`HELD_BYTES`] in total (oldest dropped first), and a file read again — a keyed run reads
//! an output file it rewrites more than once, a side table's files every run — costs no GET.
//! A file vacuumed since is still answered from memory: its content, as a reader of that
//! version would have seen it.

use bytes::Bytes;
use deltalake::Path;
use deltalake::logstore::ObjectStoreRef;
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::parquet::arrow::arrow_reader::ArrowReaderOptions;
use deltalake::parquet::arrow::async_reader::AsyncFileReader;
use deltalake::parquet::errors::{ParquetError, Result};
use deltalake::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// Files up to this size (as the log records it) are read with one GET.
pub const WHOLE_FILE_BYTES: u64 = 8 << 20;

/// Bytes of whole data files the process keeps.
pub const HELD_BYTES: usize = 64 << 20;

/// Whole data files held, by table root and path, oldest first.
static HELD: Mutex<Held> = Mutex::new(Held {
    files: VecDeque::new(),
    bytes: 0,
});

struct Held {
    files: VecDeque<(String, Bytes)>,
    bytes: usize,
}

fn held() -> std::sync::MutexGuard<'static, Held> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

impl Held {
    fn find(&self, key: &str) -> Option<Bytes> {
        self.files
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, b)| b.clone())
    }

    fn keep(&mut self, key: String, bytes: Bytes) {
        if self.files.iter().any(|(k, _)| *k == key) {
            return;
        }
        self.bytes += bytes.len();
        self.files.push_back((key, bytes));
        while self.bytes > HELD_BYTES {
            match self.files.pop_front() {
                Some((_, b)) => self.bytes -= b.len(),
                None => break,
            }
        }
    }
}

/// A data file fetched whole on first use.
pub(super) struct WholeFile {
    store: ObjectStoreRef,
    /// The table's root (URL) and the file's path: the file's name in [`HELD`]; `None`: not
    /// answered from or kept in it (a time-travelled handle's file may be vacuumed).
    key: Option<String>,
    path: Path,
    /// The size the log records.
    size: u64,
    bytes: Option<Bytes>,
}

impl WholeFile {
    /// The file at `path` (relative to the table root `root`) of `size` bytes (nothing is
    /// read yet); `held`: answered from and kept in the process's held files.
    pub(super) fn new(
        store: ObjectStoreRef,
        (root, held): (&str, bool),
        path: Path,
        size: u64,
    ) -> Self {
        Self {
            store,
            key: held.then(|| format!("{root}|{path}")),
            path,
            size,
            bytes: None,
        }
    }

    /// The file's bytes: held, or one GET (then held).
    pub(super) async fn bytes(&mut self) -> Result<Bytes> {
        if let Some(b) = &self.bytes {
            return Ok(b.clone());
        }
        let hit = self.key.as_deref().and_then(|k| held().find(k));
        if let Some(b) = hit.filter(|b| b.len() as u64 == self.size) {
            self.bytes = Some(b.clone());
            return Ok(b);
        }
        let external = |e| ParquetError::External(Box::new(e));
        let got = self.store.get(&self.path).await.map_err(external)?;
        // The log's size bounds what is held: a larger object is a table that lies.
        if got.meta.size != self.size {
            return Err(ParquetError::General(format!(
                "data file {} is {} bytes, the log records {}: the table is damaged (run \
                 `lakestream inspect` on it)",
                self.path, got.meta.size, self.size
            )));
        }
        let bytes = got.bytes().await.map_err(external)?;
        if let Some(key) = &self.key {
            held().keep(key.clone(), bytes.clone());
        }
        self.bytes = Some(bytes.clone());
        Ok(bytes)
    }
}

impl AsyncFileReader for WholeFile {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move {
            let bytes = self.bytes().await?;
            let len = bytes.len() as u64;
            if range.start > range.end || range.end > len {
                return Err(ParquetError::EOF(format!(
                    "range {range:?} past the end of {} ({len} bytes)",
                    self.path
                )));
            }
            Ok(bytes.slice(range.start as usize..range.end as usize))
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        async move {
            let bytes = self.bytes().await?;
            ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .parse_and_finish(&bytes)
                .map(Arc::new)
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::memory::InMemory;

    #[tokio::test]
    async fn a_file_is_fetched_once_and_checked_against_the_log() -> anyhow::Result<()> {
        let mem = Arc::new(InMemory::new());
        let calls = Arc::new(Mutex::new(0usize));
        let c = calls.clone();
        let wrap = crate::intercept::observe_calls(Arc::new(move |op, _| {
            if op == "get" {
                *c.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            }
        }));
        let store: ObjectStoreRef = wrap(mem.clone());
        let path = Path::from("t/part-00000-whole-file-test.parquet");
        let body: Vec<u8> = (0..100u8).collect();
        mem.put(&path, body.clone().into()).await?;
        let root = "memory:///whole-file-test";
        let mut first = WholeFile::new(store.clone(), (root, true), path.clone(), 100);
        assert_eq!(&first.get_bytes(10..20).await?[..], &body[10..20]);
        assert_eq!(&first.get_bytes(90..100).await?[..], &body[90..100]);
        assert!(first.get_bytes(90..101).await.is_err(), "past the end");
        // Another reader of the same file (a later run): held, no GET.
        let mut again = WholeFile::new(store.clone(), (root, true), path.clone(), 100);
        assert_eq!(&again.get_bytes(0..5).await?[..], &body[0..5]);
        assert_eq!(*calls.lock().unwrap_or_else(|p| p.into_inner()), 1);
        // The log says another size: refused.
        let other = Path::from("t/part-00001-whole-file-test.parquet");
        mem.put(&other, body.clone().into()).await?;
        let mut lying = WholeFile::new(store.clone(), (root, true), other, 99);
        let err = lying.get_bytes(0..5).await.err().map(|e| e.to_string());
        assert!(
            err.is_some_and(|e| e.contains("the log records 99")),
            "refused"
        );
        Ok(())
    }
}
