//! Where log objects are read from: the [`ObjectSource`] trait (S3 in the function, a
//! directory locally and in tests) and what a read can find.

use super::ingest::LogObject;
use crate::error::{Error, Result};

/// What reading a notified object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The object's bytes as stored (possibly gzip), at the notified ETag when one was given.
    Object(Vec<u8>),
    /// The object does not exist (any more).
    Missing,
    /// The object exists with another ETag: it was overwritten after this notification was
    /// sent, and the overwrite's own notification will ingest the new content.
    Superseded,
}

/// Reads log objects.
#[allow(async_fn_in_trait)]
pub trait ObjectSource {
    /// Read `object`, conditional on its notified ETag (`If-Match`) when it has one.
    async fn fetch(&self, object: &LogObject) -> Result<Fetched>;
}

/// A directory standing in for buckets: `<root>/<bucket>/<key>` (no ETags: every read matches).
#[derive(Debug, Clone)]
pub struct LocalObjects(pub std::path::PathBuf);

impl ObjectSource for LocalObjects {
    async fn fetch(&self, object: &LogObject) -> Result<Fetched> {
        for key in std::iter::once(&object.key).chain(object.alt_key.as_ref()) {
            let path = self.0.join(&object.bucket).join(key);
            match tokio::fs::read(&path).await {
                Ok(b) => return Ok(Fetched::Object(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(Error::Io {
                        path: path.display().to_string(),
                        source: e,
                    });
                }
            }
        }
        Ok(Fetched::Missing)
    }
}
