//! One object version opened for streaming and ranged reads ([`ObjectVersion`]): what large
//! files (CDC deliveries) are read through instead of a whole body in memory. Every read is
//! of the version that was opened (S3: `If-Match` on its ETag), so a file overwritten while it
//! is read fails instead of mixing two contents. Here: the in-memory version (the default of
//! [`super::ObjectSource::open`]) and the local file version of [`super::LocalObjects`].

use crate::error::{Error, Result};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// What opening a notified object found.
#[derive(Clone)]
pub enum Opened {
    /// The object version to read (its key and ETag are what ingestion is keyed by).
    Version(Arc<dyn ObjectVersion>),
    /// The object does not exist (any more).
    Missing,
    /// The object exists with another ETag than the notified one (overwritten since).
    Superseded,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Opened::Version(v) => {
                write!(f, "Version({}#{}, {} bytes)", v.key(), v.etag(), v.size())
            }
            Opened::Missing => f.write_str("Missing"),
            Opened::Superseded => f.write_str("Superseded"),
        }
    }
}

/// One version of an object: its identity and two ways to read it without holding it whole.
pub trait ObjectVersion: Send + Sync {
    /// The key that was opened (the notified key or its decoded form).
    fn key(&self) -> &str;
    /// The version's ETag, without quotes.
    fn etag(&self) -> &str;
    /// Its size in bytes.
    fn size(&self) -> u64;
    /// The bytes in `range` (end exclusive) of this version.
    fn read_range(&self, range: Range<u64>) -> BoxFuture<'static, Result<Bytes>>;
    /// The whole content from the start, in chunks as they arrive.
    fn stream(&self) -> BoxStream<'static, Result<Bytes>>;
    /// When this version was written (µs since the epoch: S3 `Last-Modified`, a file's
    /// modification time), if the source knows.
    fn written_us(&self) -> Option<i64> {
        None
    }
}

/// A version held in memory (sources that can only read whole bodies).
#[derive(Debug, Clone)]
pub struct InMemoryVersion {
    /// The key read.
    pub key: String,
    /// Its ETag.
    pub etag: String,
    /// Its content.
    pub bytes: Bytes,
}

impl ObjectVersion for InMemoryVersion {
    fn key(&self) -> &str {
        &self.key
    }
    fn etag(&self) -> &str {
        &self.etag
    }
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_range(&self, range: Range<u64>) -> BoxFuture<'static, Result<Bytes>> {
        let len = self.bytes.len() as u64;
        let out = if range.start <= range.end && range.end <= len {
            Ok(self.bytes.slice(range.start as usize..range.end as usize))
        } else {
            Err(Error::Fetch {
                object: self.key.clone(),
                message: format!("range {range:?} is outside the object ({len} bytes)"),
                retryable: false,
            })
        };
        futures::future::ready(out).boxed()
    }
    fn stream(&self) -> BoxStream<'static, Result<Bytes>> {
        futures::stream::iter([Ok(self.bytes.clone())]).boxed()
    }
}

/// A file of a [`super::LocalObjects`] directory (already resolved inside it).
#[derive(Debug, Clone)]
pub(super) struct LocalVersion {
    pub(super) path: PathBuf,
    pub(super) key: String,
    pub(super) etag: String,
    pub(super) size: u64,
    pub(super) written_us: Option<i64>,
}

/// Chunk size of local streaming reads.
const LOCAL_CHUNK: usize = 256 * 1024;

fn io_error(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source: e,
    }
}

impl ObjectVersion for LocalVersion {
    fn key(&self) -> &str {
        &self.key
    }
    fn etag(&self) -> &str {
        &self.etag
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn written_us(&self) -> Option<i64> {
        self.written_us
    }
    fn read_range(&self, range: Range<u64>) -> BoxFuture<'static, Result<Bytes>> {
        let path = self.path.clone();
        async move {
            use tokio::io::{AsyncReadExt, AsyncSeekExt};
            let mut f = tokio::fs::File::open(&path)
                .await
                .map_err(|e| io_error(&path, e))?;
            f.seek(std::io::SeekFrom::Start(range.start))
                .await
                .map_err(|e| io_error(&path, e))?;
            let mut buf = vec![0u8; range.end.saturating_sub(range.start) as usize];
            f.read_exact(&mut buf)
                .await
                .map_err(|e| io_error(&path, e))?;
            Ok(Bytes::from(buf))
        }
        .boxed()
    }
    fn stream(&self) -> BoxStream<'static, Result<Bytes>> {
        let path = self.path.clone();
        futures::stream::unfold(None, move |file: Option<tokio::fs::File>| {
            let path = path.clone();
            async move {
                use tokio::io::AsyncReadExt;
                let mut f = match file {
                    Some(f) => f,
                    None => match tokio::fs::File::open(&path).await {
                        Ok(f) => f,
                        Err(e) => return Some((Err(io_error(&path, e)), None)),
                    },
                };
                let mut buf = vec![0u8; LOCAL_CHUNK];
                match f.read(&mut buf).await {
                    Ok(0) => None,
                    Ok(n) => {
                        buf.truncate(n);
                        Some((Ok(Bytes::from(buf)), Some(f)))
                    }
                    Err(e) => Some((Err(io_error(&path, e)), None)),
                }
            }
        })
        .boxed()
    }
}

/// The MD5 of a file, streamed (the ETag S3 gives a single-part upload).
pub(super) async fn file_md5(path: &std::path::Path) -> Result<(String, u64)> {
    use md5::Digest;
    use tokio::io::AsyncReadExt;
    let mut f = tokio::fs::File::open(path)
        .await
        .map_err(|e| io_error(path, e))?;
    let mut hash = md5::Md5::new();
    let mut buf = vec![0u8; LOCAL_CHUNK];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).await.map_err(|e| io_error(path, e))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hash.update(&buf[..n]);
    }
    Ok((format!("{:x}", hash.finalize()), size))
}
