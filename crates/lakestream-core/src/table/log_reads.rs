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
//! - answers a listing of the log from what it knows ([`known`]: the last LIST plus the commits
//!   found since by a GET of the next one), so a warm table finds its new commits with GETs and
//!   never lists; [`LogReads::discover`] finds a cold load's listing from `_last_checkpoint`
//!   with a HEAD of its checkpoint and GETs of the commits after it (`probe`), or lists once
//!   when that cannot stand in for a LIST; [`LogReads::advance`] looks for new commits before a
//!   refresh;
//! - keeps `_last_checkpoint` for [`KEEP`] (a cold load reads it twice: to find where to list,
//!   then in the kernel).
//!
//! Everything else (lists of anything but the log, data files, conditional reads) goes to the
//! store.
//!
//! "Immutable" holds for one table: a table deleted and re-created at the same path has new
//! files under the same names. The cache is therefore tied to the table identity its
//! [`TableHandle`](crate::table::TableHandle) proves once per invocation, and
//! [`LogReads::clear`]ed when that proof fails.

use bytes::Bytes;
use deltalake::logstore::object_store::{
    self, GetOptions, GetRange, GetResult, GetResultPayload, ObjectMeta, ObjectStore,
    ObjectStoreExt, path::Path,
};
use known::Known;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Checkpoints up to this size are fetched whole (a 100,000-file table's is ~30 MB).
pub const MAX_WHOLE_BYTES: u64 = 16 << 20;
/// Commit files kept, in bytes (a one-file append's commit is ~1-2 KB).
pub const COMMIT_BYTES: usize = 8 << 20;
/// How long a whole checkpoint answers ranged reads.
pub const KEEP: Duration = Duration::from_secs(10);
/// How long a LIST that found no table is trusted, asking only for the first commit since
/// (and `_last_checkpoint`): an hour. A table created since has `<0>.json`, which those HEADs
/// find at once, so only a table copied in without both waits for the next LIST; a side table
/// that does not exist yet (a family table's tombstones before its first delete) costs one
/// LIST an hour per process, not six (it was 600 s).
pub const ABSENT_FOR: Duration = Duration::from_secs(3600);
/// Checkpoints held at once (a multi-part checkpoint reads its parts in turn).
const CHECKPOINTS: usize = 4;
/// Bytes of whole checkpoints held at once.
pub const HELD_BYTES: usize = 2 * MAX_WHOLE_BYTES as usize;

mod known;
mod listing;
mod probe;
mod store;
pub use known::{FRESH, RELIST_COMMITS};
pub use listing::LOOKUPS;
use listing::Log;
pub use probe::{AT_ONCE, PROBE_AGE, PROBES};

/// An object as read (`None`: it was missing).
type Held = Option<(ObjectMeta, Bytes)>;

/// A table store that reads the Delta log once (see the module docs).
pub struct LogReads {
    inner: Arc<dyn ObjectStore>,
    commits: Arc<Mutex<Commits>>,
    /// What the log holds (the last LIST and what was found since), shared with listings.
    known: Arc<Mutex<Option<Known>>>,
    /// `_last_checkpoint` as last read (`None` inside: it was missing), with when.
    hint: Mutex<Option<(Instant, Held)>>,
    /// Shared with the timers that drop each checkpoint after `keep`.
    checkpoints: Arc<Mutex<Vec<Fetched>>>,
    /// How long a whole checkpoint is held ([`KEEP`]; shorter in tests).
    keep: Duration,
    /// When a real LIST last found no table here ([`LogReads::discover`]).
    absent_since: Mutex<Option<Instant>>,
    /// How young a hinted checkpoint must be for a cold load to look instead of listing
    /// ([`PROBE_AGE`]; zero in tests that want the LIST).
    probe_age: Duration,
}

/// Commit files kept, oldest first, bounded by [`COMMIT_BYTES`].
#[derive(Default)]
struct Commits {
    files: VecDeque<(Path, ObjectMeta, Bytes)>,
    bytes: usize,
}

impl Commits {
    fn find(&self, location: &Path) -> Option<(ObjectMeta, Bytes)> {
        self.files
            .iter()
            .rev()
            .find(|(p, _, _)| p == location)
            .map(|(_, m, b)| (m.clone(), b.clone()))
    }

    fn keep(&mut self, location: &Path, meta: ObjectMeta, bytes: Bytes) {
        if bytes.len() > COMMIT_BYTES || self.files.iter().any(|(p, _, _)| p == location) {
            return;
        }
        self.bytes += bytes.len();
        self.files.push_back((location.clone(), meta, bytes));
        while self.bytes > COMMIT_BYTES {
            match self.files.pop_front() {
                Some((_, _, b)) => self.bytes -= b.len(),
                None => break,
            }
        }
    }
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
            commits: Default::default(),
            known: Default::default(),
            hint: Default::default(),
            checkpoints: Arc::new(Mutex::new(Vec::new())),
            keep: KEEP,
            absent_since: Mutex::new(None),
            probe_age: PROBE_AGE,
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
        self.log().forget();
        *self.hint.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self.absent_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
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

    /// The same store listing on a cold load unless the hinted checkpoint is younger than `age`
    /// instead of [`PROBE_AGE`] (zero: always list).
    pub fn with_probe_age(mut self, age: Duration) -> Self {
        self.probe_age = age;
        self
    }

    /// Bytes of whole checkpoints held now.
    pub fn held_checkpoint_bytes(&self) -> usize {
        let held = self.checkpoints.lock().unwrap_or_else(|p| p.into_inner());
        held.iter().map(|f| f.bytes.len()).sum()
    }

    /// The listing parts, shared with a listing's stream.
    fn log(&self) -> Log {
        Log {
            inner: self.inner.clone(),
            commits: self.commits.clone(),
            known: self.known.clone(),
            probe_age: self.probe_age,
        }
    }

    /// Look for commits after the newest this store knows of (a GET of the next commit file
    /// until one is missing) and return the newest version known; `None` when the log was
    /// never listed through this store (load the table the usual way). A refresh of a loaded
    /// table calls it first: when the newest is the loaded version nothing changed and no
    /// refresh is needed; else the refresh's listing is answered from memory.
    pub async fn advance(&self) -> object_store::Result<Option<u64>> {
        self.log().advance().await
    }

    /// Whether `dir` (a table's `_delta_log`, as this store names it) holds a table: the
    /// `_last_checkpoint` GET and the lookups a cold load makes (a HEAD of the checkpoint it
    /// names and GETs of the commits after it, or one LIST when those cannot stand in for it:
    /// `probe`), the load that follows then answered from them.
    ///
    /// A table a LIST found missing less than [`ABSENT_FOR`] ago is asked with two HEADs
    /// instead: its first commit (`<0>.json`, which a table created since has: the protocol
    /// writes it first, and log cleanup removes commits only after their retention, days) and
    /// `_last_checkpoint` (a table restored or copied in after its log was cleaned up). A side
    /// table that does not exist yet (a family table's tombstones before its first delete)
    /// costs two HEADs per run, not a `_last_checkpoint` GET and a LIST (12.5 GETs' price),
    /// asked together (one wait).
    pub async fn discover(&self, dir: &Path) -> object_store::Result<bool> {
        let absent_since = *self.absent_since.lock().unwrap_or_else(|p| p.into_inner());
        if absent_since.is_some_and(|at| at.elapsed() < ABSENT_FOR) {
            let first = dir.clone().join(format!("{:020}.json", 0).as_str());
            let hint = dir.clone().join("_last_checkpoint");
            // Both at once: against S3 one wait instead of two (the HEAD of `_last_checkpoint`
            // is spent for nothing only on the run that finds the table created).
            let (no_first, no_hint) = futures::join!(self.missing(&first), self.missing(&hint));
            // `<0>.json` found: the listing below decides, whatever the other HEAD met.
            if no_first? && no_hint? {
                return Ok(false);
            }
        }
        let found = self.discover_listing(dir).await?;
        *self.absent_since.lock().unwrap_or_else(|p| p.into_inner()) = (!found).then(Instant::now);
        Ok(found)
    }

    /// One HEAD: whether `location` is missing.
    async fn missing(&self, location: &Path) -> object_store::Result<bool> {
        match self.inner.head(location).await {
            Ok(_) => Ok(false),
            Err(object_store::Error::NotFound { .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }

    async fn discover_listing(&self, dir: &Path) -> object_store::Result<bool> {
        let hint = match self.get(&dir.clone().join("_last_checkpoint")).await {
            Ok(got) => Some(got.bytes().await?),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        self.log().discover(dir, hint.as_ref()).await
    }

    /// `_last_checkpoint`, from memory when read within [`KEEP`] (a missing one too).
    async fn last_checkpoint(&self, location: &Path) -> object_store::Result<GetResult> {
        let held = {
            let hint = self.hint.lock().unwrap_or_else(|p| p.into_inner());
            hint.as_ref()
                .filter(|(at, _)| at.elapsed() < self.keep)
                .map(|(_, h)| h.clone())
        };
        let held = match held {
            Some(held) => held,
            None => {
                let got = match self.inner.get_opts(location, GetOptions::default()).await {
                    Ok(got) => {
                        let meta = got.meta.clone();
                        let bytes = got.bytes().await?;
                        self.log().hint_read(location, &bytes);
                        Some((meta, bytes))
                    }
                    Err(object_store::Error::NotFound { .. }) => None,
                    Err(e) => return Err(e),
                };
                *self.hint.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((Instant::now(), got.clone()));
                got
            }
        };
        match held {
            Some((meta, bytes)) => slice(meta, &bytes, None),
            None => Err(not_found(location)),
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

/// The error of a missing object (answered from memory).
fn not_found(location: &Path) -> object_store::Error {
    object_store::Error::NotFound {
        path: location.to_string(),
        source: "not found (as last read)".into(),
    }
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

#[cfg(test)]
mod tests;
