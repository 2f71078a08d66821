//! Where notified objects are read from: the [`ObjectSource`] trait (S3 in the function, a
//! directory locally and in tests) and what a read can find.

use super::version::{InMemoryVersion, LocalVersion, Opened, file_md5};
use crate::error::{Error, Result};
use lakestream_formats::notification::LogObject;

/// What reading a notified object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The object as read: what marks it ingested is this key and ETag, not the notification's.
    Object(ReadObject),
    /// The object does not exist (any more).
    Missing,
    /// The object exists with another ETag: it was overwritten after this notification was
    /// sent, and the overwrite's own notification will ingest the new content.
    Superseded,
    /// The object is larger than the limit it was read with (its size, from the metadata or
    /// `Content-Length`, before the body is read); nothing of it was read.
    TooLarge {
        /// The object's size in bytes.
        size: u64,
    },
}

/// One object as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadObject {
    /// Its bytes as stored (possibly gzip), at the notified ETag when one was given.
    pub bytes: Vec<u8>,
    /// The key that was read (the notified key, or its decoded form when only that exists).
    pub key: String,
    /// The ETag the read answered with, without quotes (S3: the response's `ETag`; a
    /// directory: the MD5 of the content, as S3 gives a single-part upload).
    pub etag: String,
}

/// Reads log objects.
#[allow(async_fn_in_trait)]
pub trait ObjectSource {
    /// Read `object`, conditional on its notified ETag (`If-Match`) when it has one. An object
    /// larger than `max_bytes` is [`Fetched::TooLarge`], answered before its body is read.
    async fn fetch(&self, object: &LogObject, max_bytes: u64) -> Result<Fetched>;

    /// Open `object` (conditional on its notified ETag, like [`fetch`](Self::fetch)) for
    /// streaming and ranged reads of that version, never holding it whole. The default reads
    /// the whole body through `fetch` (sources that can do no better); S3 and
    /// [`LocalObjects`] stream.
    async fn open(&self, object: &LogObject) -> Result<Opened> {
        Ok(match self.fetch(object, u64::MAX).await? {
            Fetched::Object(o) => Opened::Version(std::sync::Arc::new(InMemoryVersion {
                key: o.key,
                etag: o.etag,
                bytes: o.bytes.into(),
            })),
            Fetched::Missing | Fetched::TooLarge { .. } => Opened::Missing,
            Fetched::Superseded => Opened::Superseded,
        })
    }
}

/// A directory standing in for buckets: `<root>/<bucket>/<key>`. A file has no versions, so the
/// read is not conditional on the notified ETag; its ETag is the MD5 of its content (what S3
/// answers for a single-part upload), so the idempotency key is the same whatever ETag a
/// notification names.
/// A bucket or key that would leave the directory (absolute, `..`, `.`, a drive prefix) is
/// refused before anything is read, and so is one that resolves through a symbolic link to a
/// file outside the directory: a notification's key must not read `/etc/passwd` or the lake
/// next to the directory.
#[derive(Debug, Clone)]
pub struct LocalObjects(pub std::path::PathBuf);

/// `part` as a path below a directory: only plain names (no root, `..`, `.` or prefix).
fn below(what: &str, part: &str, object: &LogObject) -> Result<std::path::PathBuf> {
    use std::path::{Component, Path};
    let path = Path::new(part);
    let plain = !part.is_empty()
        && path.components().all(|c| matches!(c, Component::Normal(_)))
        && !part.split(['/', '\\']).any(|s| s == "." || s == "..");
    if plain {
        Ok(path.to_path_buf())
    } else {
        Err(Error::Fetch {
            object: object.uri(),
            message: format!(
                "{what} `{}` is not a plain relative path inside the objects directory \
                 (absolute, or with `..` or `.`): refused, nothing was read",
                part.escape_debug()
            ),
            retryable: false,
        })
    }
}

impl LocalObjects {
    /// The file of `object` (its key, then its alternative key) inside the directory, with the
    /// key that exists; `None` when neither does.
    async fn resolve(&self, object: &LogObject) -> Result<Option<(std::path::PathBuf, String)>> {
        let bucket = below("bucket", &object.bucket, object)?;
        let keys = std::iter::once(&object.key)
            .chain(object.alt_key.as_ref())
            .map(|k| below("key", k, object))
            .collect::<Result<Vec<_>>>()?;
        let root = tokio::fs::canonicalize(&self.0)
            .await
            .map_err(|e| Error::Io {
                path: self.0.display().to_string(),
                source: e,
            })?;
        let names = std::iter::once(&object.key).chain(object.alt_key.as_ref());
        for (key, name) in keys.into_iter().zip(names) {
            // Symlinks resolved: the file read must be inside the directory (a link
            // `raw-logs/logs -> /` must not turn `logs/etc/passwd` into `/etc/passwd`).
            let joined = root.join(&bucket).join(key);
            let path = match tokio::fs::canonicalize(&joined).await {
                Ok(p) => p,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(Error::Io {
                        path: joined.display().to_string(),
                        source: e,
                    });
                }
            };
            if !path.starts_with(&root) {
                return Err(Error::Fetch {
                    object: object.uri(),
                    message: "the key resolves, through a symbolic link, to a file outside the \
                              objects directory: refused, nothing was read"
                        .into(),
                    retryable: false,
                });
            }
            if path.is_file() {
                return Ok(Some((path, name.clone())));
            }
        }
        Ok(None)
    }
}

impl ObjectSource for LocalObjects {
    async fn fetch(&self, object: &LogObject, max_bytes: u64) -> Result<Fetched> {
        let Some((path, key)) = self.resolve(object).await? else {
            return Ok(Fetched::Missing);
        };
        match tokio::fs::metadata(&path).await {
            Ok(m) if m.len() > max_bytes => return Ok(Fetched::TooLarge { size: m.len() }),
            _ => {}
        }
        match tokio::fs::read(&path).await {
            Ok(bytes) => {
                use md5::Digest;
                let etag = format!("{:x}", md5::Md5::digest(&bytes));
                Ok(Fetched::Object(ReadObject { bytes, key, etag }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Fetched::Missing),
            Err(e) => Err(Error::Io {
                path: path.display().to_string(),
                source: e,
            }),
        }
    }

    async fn open(&self, object: &LogObject) -> Result<Opened> {
        let Some((path, key)) = self.resolve(object).await? else {
            return Ok(Opened::Missing);
        };
        let (etag, size) = file_md5(&path).await?;
        let written_us = tokio::fs::metadata(&path)
            .await
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_micros()).ok());
        Ok(Opened::Version(std::sync::Arc::new(LocalVersion {
            path,
            key,
            etag,
            size,
            written_us,
        })))
    }
}
