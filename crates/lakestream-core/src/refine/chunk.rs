//! The one chunk reader of refine's sources: the commits a table gained after the version a
//! job consumed, cut into a bounded chunk of whole versions, through the table layer's
//! [`commits`](TableHandle::commits). Each kind of reading keeps its own interpretation of a
//! commit's actions and its own words for what the operator can do ([`Interpret`]): the
//! append-only source ([`next_chunk`](super::source::next_chunk)) reads new files, the
//! aggregate's changes (`aggregate::changes`) signed files.
//!
//! Shared here: the deletion-vector refusal of the snapshot, a table re-created behind the job
//! (its latest version below the consumed one), the limits (at least one version; then whole
//! versions until the files or bytes reach a limit; commits are read one at a time so nothing
//! past the cut is fetched) and a commit that is gone ([`Error::CommitGone`], mapped by the
//! kind).

use crate::error::{Error, Result};
use crate::table::{Commit, TableHandle};
use futures::StreamExt;
use lakestream_formats::refine::RefineJob;

/// Bounds of one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLimits {
    /// New data files per chunk (whole versions; at least one version).
    pub max_files: usize,
    /// New data bytes per chunk (whole versions; at least one version).
    pub max_bytes: u64,
}

/// A chunk's rows in memory (Arrow) may take this many times [`ChunkLimits::max_bytes`]
/// (numerator / denominator): text compresses ~1.4x (random) to 2x or more (real words, enums,
/// dictionary-encoded columns), and a run's memory follows the decoded rows, not the Parquet.
const DECODED_PER_CHUNK_BYTE: (u64, u64) = (3, 2);

impl ChunkLimits {
    /// The limits `job` configures (`max_files_per_run`, `max_mib_per_run`).
    pub fn of(job: &RefineJob) -> Self {
        Self {
            max_files: job.max_files_per_run,
            max_bytes: job.max_mib_per_run << 20,
        }
    }

    /// The most bytes a chunk's rows may take once read (Arrow), 1.5 times
    /// [`max_bytes`](Self::max_bytes): the version whose rows reach it ends the chunk (at
    /// least one version), so data that compresses well is cut by what it takes in memory,
    /// which sizes the function (crates/refine `memory.rs`, measured on text that compresses
    /// ~1.4x).
    pub fn max_decoded_bytes(&self) -> u64 {
        let (num, den) = DECODED_PER_CHUNK_BYTE;
        self.max_bytes.saturating_mul(num) / den
    }
}

/// How one kind of reader reads a commit, and what it tells the operator.
pub(crate) trait Interpret {
    /// What a commit yields (a file to read).
    type Item;

    /// The files of `commit` this kind reads (empty: the version adds nothing to read), or the
    /// error that stops the job at it.
    fn items(&mut self, commit: &Commit) -> Result<Vec<Self::Item>>;

    /// The size of an item in bytes (counted against [`ChunkLimits::max_bytes`]).
    fn size(item: &Self::Item) -> u64;

    /// The error for a source whose latest version is below the consumed one (`after`).
    fn recreated(&self, after: u64, latest: u64) -> Error;

    /// The error for the commit of `version`, gone from the log (log retention).
    fn gone(&self, version: u64, latest: u64) -> Error;
}

/// What a table gained in `(after, end]`, interpreted.
#[derive(Debug, Clone)]
pub(crate) struct Cut<T> {
    /// The last version in the chunk (`after` when there is nothing new).
    pub end: Option<u64>,
    /// The table's latest version when the chunk was cut.
    pub latest: u64,
    /// The versions whose commit yielded items, in order, with their items.
    pub versions: Vec<(u64, Vec<T>)>,
}

/// Cut the next chunk of `handle`'s table (loaded at its latest version) after `after`
/// (`None`: nothing consumed, the chunk starts at version 0), read as `kind` reads it.
pub(crate) async fn read_chunk<K: Interpret>(
    kind: &mut K,
    handle: &TableHandle,
    after: Option<u64>,
    limits: ChunkLimits,
) -> Result<Cut<K::Item>> {
    handle.refuse_deletion_vectors()?;
    let latest = handle.version().unwrap_or(0);
    if let Some(a) = after
        && a > latest
    {
        return Err(kind.recreated(a, latest));
    }
    let mut cut = Cut {
        end: after,
        latest,
        versions: vec![],
    };
    let first = after.map_or(0, |a| a + 1);
    let (mut files, mut bytes) = (0usize, 0u64);
    // One commit at a time: the stream fetches a commit only when asked for it, so a chunk
    // cut at its limits reads no commit past its end. (A chunk that `read_chunk_rows` ends
    // earlier, by its decoded size, was cut here first: its later commits were read, and an
    // error in one of them fails the run as it did before that cut.)
    let mut commits = handle.commits(first..=latest).stream();
    loop {
        if cut.end != after && (files >= limits.max_files || bytes >= limits.max_bytes) {
            break;
        }
        let commit = match commits.next().await {
            None => break,
            Some(Ok(commit)) => commit,
            Some(Err(Error::CommitGone { version, .. })) => return Err(kind.gone(version, latest)),
            Some(Err(e)) => return Err(e),
        };
        let items = kind.items(&commit)?;
        files += items.len();
        bytes += items.iter().map(K::size).sum::<u64>();
        if !items.is_empty() {
            cut.versions.push((commit.version(), items));
        }
        cut.end = Some(commit.version());
    }
    Ok(cut)
}
