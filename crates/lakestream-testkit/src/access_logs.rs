//! Access-log objects for the access-log ingestor without S3: a temp dir laid out as
//! `<bucket>/<key>` read through the core's `LocalObjects`, and the notifications naming them.

use crate::Result;
use lakestream_core::access_log::LocalObjects;
use lakestream_formats::notification::LogObject;
use std::path::Path;

/// The configured raw-logs bucket of the example config.
pub const LOG_BUCKET: &str = "raw-logs";

/// One well-formed access-log line for the bucket `datalake-prod` (one row of
/// `access_logs/datalake-prod`).
pub const LOG_LINE: &str = "owner datalake-prod [29/Nov/2026:10:00:00 +0000] 1.2.3.4 req ID REST.GET.OBJECT k \"GET /k HTTP/1.1\" 200 - 1 1 1 1 \"-\" \"ua\" -\n";

/// The plain fixture log (`tests/fixtures/access-logs`), lines of `datalake-prod`.
pub const FIXTURE_LOG: &[u8] =
    include_bytes!("../../../tests/fixtures/access-logs/2026-11-29-08-00-00-A1B2C3D4E5F6.log");

/// A temp dir of log objects, removed on drop.
pub struct LocalLogs {
    dir: tempfile::TempDir,
}

impl LocalLogs {
    /// An empty set of objects.
    pub fn new() -> Result<Self> {
        Ok(Self {
            dir: tempfile::tempdir()?,
        })
    }

    /// Write `body` as `key` of the raw-logs bucket; the notification naming it (no ETag).
    pub fn put(&self, key: &str, body: impl AsRef<[u8]>) -> Result<LogObject> {
        let path = self.dir.path().join(LOG_BUCKET).join(key);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, body)?;
        Ok(log_object(key, None))
    }

    /// The directory holding the buckets.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The objects as the ingestor's source.
    pub fn source(&self) -> LocalObjects {
        LocalObjects(self.dir.path().to_path_buf())
    }
}

/// A notification of `key` in the raw-logs bucket, with `etag` if given.
pub fn log_object(key: &str, etag: Option<&str>) -> LogObject {
    LogObject {
        bucket: LOG_BUCKET.into(),
        key: key.into(),
        alt_key: None,
        etag: etag.map(str::to_string),
        event_time: None,
    }
}
