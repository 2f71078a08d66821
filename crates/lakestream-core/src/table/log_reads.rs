//! The Delta log read once per process: commit files kept, checkpoints read with one GET.
//!
//! delta-rs's kernel replays the log in two passes (protocol and metadata, then actions), so a
//! reload GETs every commit file since the last checkpoint twice, and `create_checkpoint`
//! replays them again: 37 requests for a checkpoint commit, though the process wrote or read
//! each of those files moments before. And it reads a `*.checkpoint.parquet` with one ranged GET
//! per footer and column chunk: 19 requests for a small table's checkpoint, every cold start.
//!
//! [`LogReads`] sits in front of a table's store and
//! - keeps commit files (`_delta_log/<20 digits>.json`, immutable once written: the protocol
//!   writes them with put-if-absent) that it wrote or read, up to [`COMMIT_BYTES`] in total,
//!   oldest dropped first, and answers plain GETs of them from memory;
//! - answers the first ranged read of a checkpoint with a GET of the whole object when it is at
//!   most [`MAX_WHOLE_BYTES`], and following ranges from those bytes for [`KEEP`] (one table
//!   load: a checkpoint may be rewritten at the same version, so it is not kept longer), at most
//!   [`HELD_BYTES`] at once; a timer drops each after [`KEEP`] even if the store is not used
//!   again.
//!
//! Everything else (`_last_checkpoint`, lists, data files, conditional reads) goes to the store.
//!
//! "Immutable" holds for one table: a table deleted and re-created at the same path has new
//! files under the same names. The cache is therefore tied to the table identity its
//! [`TableHandle`](crate::table::TableHandle) proves once per invocation, and
//! [`LogReads::clear`]ed when that proof fails.

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::logstore::object_store::{
    self, GetOptions, GetRange, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    path::Path,
};
use futures::stream::BoxStream;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Checkpoints up to this size are fetched whole (a 100,000-file table's is ~30 MB).
pub const MAX_WHOLE_BYTES: u64 = 16 << 20;
/// Commit files kept, in bytes (a one-file append's commit is ~1-2 KB).
pub const COMMIT_BYTES: usize = 8 << 20;
/// How long a whole checkpoint answers ranged reads.
pub const KEEP: Duration = Duration::from_secs(10);
/// Checkpoints held at once (a multi-part checkpoint reads its parts in turn).
const CHECKPOINTS: usize = 4;
/// Bytes of whole checkpoints held at once.
pub const HELD_BYTES: usize = 2 * MAX_WHOLE_BYTES as usize;

/// A table store that reads the Delta log once (see the module docs).
pub struct LogReads {
    inner: Arc<dyn ObjectStore>,
    commits: Mutex<Commits>,
    /// Shared with the timers that drop each checkpoint after `keep`.
    checkpoints: Arc<Mutex<Vec<Fetched>>>,
    /// How long a whole checkpoint is held ([`KEEP`]; shorter in tests).
    keep: Duration,
}

#[derive(Default)]
struct Commits {
    files: VecDeque<(Path, ObjectMeta, Bytes)>,
    bytes: usize,
}

struct Fetched {
    location: Path,
    meta: ObjectMeta,
    bytes: Bytes,
    at: Instant,
}

impl LogReads {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            commits: Mutex::new(Commits::default()),
            checkpoints: Arc::new(Mutex::new(Vec::new())),
            keep: KEEP,
        }
    }

    /// What a held commit file looked like when it was written or read (its ETag and size),
    /// found by its file name (`<20 digits>.json`: one table per store).
    pub fn commit_meta(&self, file_name: &str) -> Option<ObjectMeta> {
        let commits = self.commits.lock().unwrap_or_else(|p| p.into_inner());
        commits
            .files
            .iter()
            .rev()
            .find(|(p, _, _)| p.filename() == Some(file_name))
            .map(|(_, m, _)| m.clone())
    }

    /// Forget every held file: the table behind the store was deleted or re-created, so files
    /// of the same name are not the same files any more (the cache is only valid for one table
    /// identity; the handle that proves identity calls this when the proof fails).
    pub fn clear(&self) {
        *self.commits.lock().unwrap_or_else(|p| p.into_inner()) = Commits::default();
        self.checkpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The same store holding whole checkpoints for `keep` instead of [`KEEP`].
    pub fn with_keep(mut self, keep: Duration) -> Self {
        self.keep = keep;
        self
    }

    /// Bytes of whole checkpoints held now.
    pub fn held_checkpoint_bytes(&self) -> usize {
        let held = self.checkpoints.lock().unwrap_or_else(|p| p.into_inner());
        held.iter().map(|f| f.bytes.len()).sum()
    }

    fn commit(&self, location: &Path) -> Option<(ObjectMeta, Bytes)> {
        let commits = self.commits.lock().unwrap_or_else(|p| p.into_inner());
        commits
            .files
            .iter()
            .rev()
            .find(|(p, _, _)| p == location)
            .map(|(_, m, b)| (m.clone(), b.clone()))
    }

    fn keep_commit(&self, location: &Path, meta: ObjectMeta, bytes: Bytes) {
        if bytes.len() > COMMIT_BYTES {
            return;
        }
        let mut c = self.commits.lock().unwrap_or_else(|p| p.into_inner());
        if c.files.iter().any(|(p, _, _)| p == location) {
            return;
        }
        c.bytes += bytes.len();
        c.files.push_back((location.clone(), meta, bytes));
        while c.bytes > COMMIT_BYTES {
            match c.files.pop_front() {
                Some((_, _, b)) => c.bytes -= b.len(),
                None => break,
            }
        }
    }

    fn checkpoint(&self, location: &Path) -> Option<(ObjectMeta, Bytes)> {
        let mut held = self.checkpoints.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|f| f.at.elapsed() < self.keep);
        held.iter()
            .find(|f| &f.location == location)
            .map(|f| (f.meta.clone(), f.bytes.clone()))
    }

    /// Hold a whole checkpoint for `keep`: the oldest go first beyond [`CHECKPOINTS`] or
    /// [`HELD_BYTES`], and a timer drops it after `keep` even if the store is never used again
    /// (a warm process's handle on a table it no longer touches would hold it for good).
    fn keep_checkpoint(&self, location: &Path, meta: ObjectMeta, bytes: Bytes) {
        let keep = self.keep;
        {
            let mut held = self.checkpoints.lock().unwrap_or_else(|p| p.into_inner());
            held.retain(|f| &f.location != location && f.at.elapsed() < keep);
            held.push(Fetched {
                location: location.clone(),
                meta,
                bytes,
                at: Instant::now(),
            });
            let total = |h: &Vec<Fetched>| h.iter().map(|f| f.bytes.len()).sum::<usize>();
            while held.len() > 1 && (held.len() > CHECKPOINTS || total(&held) > HELD_BYTES) {
                held.remove(0);
            }
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let held = Arc::downgrade(&self.checkpoints);
            runtime.spawn(async move {
                tokio::time::sleep(keep).await;
                if let Some(held) = held.upgrade() {
                    let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
                    held.retain(|f| f.at.elapsed() < keep);
                }
            });
        }
    }

    /// A whole checkpoint, from memory or one GET; `None` when it is too large to hold.
    async fn whole_checkpoint(
        &self,
        location: &Path,
    ) -> object_store::Result<Option<(ObjectMeta, Bytes)>> {
        if let Some(hit) = self.checkpoint(location) {
            return Ok(Some(hit));
        }
        let result = self.inner.get_opts(location, GetOptions::default()).await?;
        if result.meta.size > MAX_WHOLE_BYTES {
            return Ok(None); // dropping the body closes that response
        }
        let meta = result.meta.clone();
        let bytes = result.bytes().await?;
        self.keep_checkpoint(location, meta.clone(), bytes.clone());
        Ok(Some((meta, bytes)))
    }
}

/// `_delta_log/<20 digits>.json`: a commit file, immutable once written.
fn is_commit_file(location: &Path) -> bool {
    let path = location.as_ref();
    let Some((dir, name)) = path.rsplit_once('/') else {
        return false;
    };
    let Some(digits) = name.strip_suffix(".json") else {
        return false;
    };
    dir.ends_with("_delta_log") && digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A GET without conditions (a range is allowed).
fn is_plain(options: &GetOptions) -> bool {
    !options.head
        && options.if_match.is_none()
        && options.if_none_match.is_none()
        && options.if_modified_since.is_none()
        && options.if_unmodified_since.is_none()
        && options.version.is_none()
}

/// A plain ranged read of a checkpoint file: answered from the whole object.
fn is_checkpoint_range(location: &Path, options: &GetOptions) -> bool {
    let path = location.as_ref();
    options.range.is_some()
        && is_plain(options)
        && path.contains("_delta_log/")
        && path.contains(".checkpoint")
        && path.ends_with(".parquet")
}

/// `range` (all when `None`) of `bytes` as a [`GetResult`], with an error for a bad range.
fn slice(
    meta: ObjectMeta,
    bytes: &Bytes,
    range: Option<&GetRange>,
) -> object_store::Result<GetResult> {
    let r = match range {
        None => 0..meta.size,
        Some(range) => range
            .as_range(meta.size)
            .map_err(|e| object_store::Error::Generic {
                store: "LogReads",
                source: Box::new(e),
            })?,
    };
    let part = bytes.slice(r.start as usize..r.end as usize);
    Ok(GetResult {
        payload: GetResultPayload::Stream(Box::pin(futures::stream::once(async { Ok(part) }))),
        meta,
        range: r,
        attributes: Default::default(),
    })
}

impl std::fmt::Debug for LogReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogReads({})", self.inner)
    }
}

impl std::fmt::Display for LogReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogReads({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for LogReads {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let keep = (matches!(opts.mode, PutMode::Create) && is_commit_file(location))
            .then(|| payload.clone());
        let result = self.inner.put_opts(location, payload, opts).await?;
        if let Some(payload) = keep {
            let bytes = match payload.as_ref() {
                [one] => one.clone(),
                parts => Bytes::from(parts.concat()),
            };
            let meta = ObjectMeta {
                location: location.clone(),
                last_modified: chrono::Utc::now(),
                size: bytes.len() as u64,
                e_tag: result.e_tag.clone(),
                version: result.version.clone(),
            };
            self.keep_commit(location, meta, bytes);
        }
        Ok(result)
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if is_checkpoint_range(location, &options)
            && let Some(range) = &options.range
            && let Some((meta, bytes)) = self.whole_checkpoint(location).await?
        {
            return slice(meta, &bytes, Some(range));
        }
        if !(is_plain(&options) && is_commit_file(location)) {
            return self.inner.get_opts(location, options).await;
        }
        let (meta, bytes) = match self.commit(location) {
            Some(hit) => hit,
            None => {
                let whole = self.inner.get_opts(location, GetOptions::default()).await?;
                let meta = whole.meta.clone();
                let bytes = whole.bytes().await?;
                self.keep_commit(location, meta.clone(), bytes.clone());
                (meta, bytes)
            }
        };
        slice(meta, &bytes, options.range.as_ref())
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests;
