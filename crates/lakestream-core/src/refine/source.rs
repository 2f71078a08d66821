//! The incremental Delta source: what a table gained after a version, read by replaying its
//! commit files (no DataFusion), with Spark's Delta-source rules:
//! - only `add` actions with `dataChange=true` are new data;
//! - commits made only of `dataChange=false` actions (compaction) add nothing;
//! - a `remove` with `dataChange=true` (delete, update, overwrite) fails the job unless it
//!   ignores changes (then only that commit's new adds are read);
//! - a backlog is cut into bounded chunks of whole versions (max files / bytes), the rest is
//!   read by the next run;
//! - a version whose commit file is gone (log retention) or whose data files are gone (vacuum)
//!   fails with the version, how far behind the job is and how to skip ahead.
//!
//! [`read_next`] is what every kind of job but the aggregate uses: open the source, cut the
//! next chunk after the consumed version (with the one chunk reader, [`super::chunk`]), read
//! its rows (with the table layer's Parquet reader). [`read_snapshot`] reads the whole table
//! at its latest version instead: a CDC apply's first run (a new output, or one rebuilt),
//! which therefore never needs the source's early log.

use super::chunk::{Cut, Interpret, read_chunk};
use super::context::RunContext;
use crate::error::{Error, Result};
use crate::partition_path::decode;
use crate::table::{Commit, DataFile, TableHandle, is_missing_file};
use deltalake::Path;
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::compute::concat_batches;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::Action;
use futures::{StreamExt, TryStreamExt};
use lakestream_formats::refine::{JobKind, RefineJob};
use std::collections::HashMap;

pub use super::chunk::ChunkLimits;

/// A data file a version added.
#[derive(Debug, Clone)]
pub struct NewFile {
    /// Path relative to the table root, percent-decoded.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Partition values as stored in the log.
    pub partition_values: HashMap<String, Option<String>>,
}

impl NewFile {
    /// The object-store path of the file.
    pub fn object_path(&self) -> Path {
        self.data_file().path
    }

    /// The file to read.
    pub fn data_file(&self) -> DataFile {
        DataFile::new(&self.path, Some(self.size), self.partition_values.clone())
    }
}

/// The new data of one source version.
#[derive(Debug, Clone)]
pub struct SourceVersion {
    /// The version.
    pub version: u64,
    /// Files it added with `dataChange=true`.
    pub files: Vec<NewFile>,
}

/// What a table gained in `(after, end]`.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// The last version consumed before (`None`: nothing yet, the chunk starts at version 0).
    pub after: Option<u64>,
    /// The last version in the chunk (`after` when there is nothing new).
    pub end: Option<u64>,
    /// The table's latest version when the chunk was cut.
    pub latest: u64,
    /// Versions with new data, in order (versions without new data are skipped).
    pub versions: Vec<SourceVersion>,
}

impl Chunk {
    /// The chunk moved past `after`.
    pub fn advanced(&self) -> bool {
        self.end != self.after
    }

    /// New files in the chunk.
    pub fn files(&self) -> usize {
        self.versions.iter().map(|v| v.files.len()).sum()
    }
}

/// The append-only source's reading of a commit (Spark's Delta-source rules).
struct Appends<'a> {
    job: &'a str,
    table: &'a str,
    after: Option<u64>,
    ignore_changes: bool,
    /// A CDC apply: a removal is [`Error::SourceRewritten`] (the job rebuilds), not a failure.
    rebuilds: bool,
}

impl Appends<'_> {
    fn fail(&self, reason: String) -> Error {
        Error::Source {
            job: self.job.to_string(),
            table: self.table.to_string(),
            reason,
        }
    }
}

impl Interpret for Appends<'_> {
    type Item = NewFile;

    fn items(&mut self, commit: &Commit) -> Result<Vec<NewFile>> {
        let v = commit.version();
        let mut added = Vec::new();
        for action in commit.actions()? {
            match action {
                // A file added with a deletion vector (the table gained the feature after
                // the snapshot the job checked): its rows cannot be read as plain Parquet.
                Action::Add(a) if a.deletion_vector.is_some() => {
                    return Err(Error::DeletionVectors {
                        table: self.table.to_string(),
                        found: format!("version {v} adds `{}` with one", a.path),
                    });
                }
                Action::Add(a) if a.data_change => added.push(NewFile {
                    path: decode(&a.path),
                    size: a.size.max(0) as u64,
                    partition_values: a.partition_values.clone(),
                }),
                Action::Remove(r) if r.data_change && self.rebuilds => {
                    return Err(Error::SourceRewritten {
                        job: self.job.to_string(),
                        table: self.table.to_string(),
                        version: v,
                        path: r.path.clone(),
                    });
                }
                Action::Remove(r) if r.data_change && !self.ignore_changes => {
                    return Err(self.fail(format!(
                        "version {v} removes data (`{}` with dataChange=true: a delete, update \
                         or overwrite); an append-only source cannot express that downstream. \
                         Set `ignore_changes = true` on the job to read only new rows of such \
                         commits, or rebuild the output",
                        r.path
                    )));
                }
                _ => {}
            }
        }
        Ok(added)
    }

    fn size(item: &NewFile) -> u64 {
        item.size
    }

    fn recreated(&self, a: u64, latest: u64) -> Error {
        let (job, table) = (self.job, self.table);
        self.fail(format!(
            "the job consumed up to version {a} but the table's latest version is {latest}: \
             the table was re-created. Restart the job on it with `lakestream refine {job} \
             --skip-to {table}=-1` (reads it from the start) or from a chosen version"
        ))
    }

    fn gone(&self, version: u64, latest: u64) -> Error {
        let (job, table) = (self.job, self.table);
        if self.rebuilds {
            return self.fail(format!(
                "its commit file for version {version} is gone (log retention; latest {latest}): \
                 the job fell behind the log. Rebuild the output from the table's snapshot with \
                 `lakestream refine {job} --rebuild` (a CDC apply's first run reads the \
                 snapshot, not the log)"
            ));
        }
        self.fail(gone(
            job,
            table,
            version,
            self.after,
            latest,
            "its commit file",
        ))
    }
}

/// Cut the next chunk of `handle`'s table (loaded at its latest version) after `after`.
pub async fn next_chunk(
    job: &str,
    handle: &TableHandle,
    after: Option<u64>,
    limits: ChunkLimits,
    ignore_changes: bool,
) -> Result<Chunk> {
    let mut appends = Appends {
        job,
        table: handle.name(),
        after,
        ignore_changes,
        rebuilds: false,
    };
    cut(&mut appends, handle, after, limits).await
}

async fn cut(
    appends: &mut Appends<'_>,
    handle: &TableHandle,
    after: Option<u64>,
    limits: ChunkLimits,
) -> Result<Chunk> {
    let Cut {
        end,
        latest,
        versions,
    } = read_chunk(appends, handle, after, limits).await?;
    Ok(Chunk {
        after,
        end,
        latest,
        versions: versions
            .into_iter()
            .map(|(version, files)| SourceVersion { version, files })
            .collect(),
    })
}

/// What a source gained after the version a job consumed: its next chunk, read.
pub struct SourceRead {
    /// The source, loaded at its latest version.
    pub handle: TableHandle,
    /// The source's latest schema (every version's rows are read in it).
    pub schema: SchemaRef,
    /// The chunk.
    pub chunk: Chunk,
    /// The chunk's rows, version after version.
    pub batches: Vec<RecordBatch>,
    /// `(version, rows it added)` per version of the chunk with new data, in order.
    pub version_rows: Vec<(u64, usize)>,
}

impl SourceRead {
    /// Every row of the chunk in one batch, in version order.
    pub fn rows(&self) -> Result<RecordBatch> {
        Ok(concat_batches(&self.schema, &self.batches)?)
    }
}

/// Open `table`, a source of `job`, and read its next chunk after `after` (the version the
/// output's `txn` records as consumed). `None`: the table does not exist yet.
pub async fn read_next(
    ctx: &RunContext<'_>,
    job: &RefineJob,
    table: &str,
    after: Option<u64>,
) -> Result<Option<SourceRead>> {
    // At least the version the output says was consumed: another writer may have consumed
    // past the snapshot this invocation holds.
    let handle = ctx.load_source_at_least(table, after).await?;
    if !handle.exists() {
        return Ok(None);
    }
    let schema = handle.arrow_schema()?;
    let mut appends = Appends {
        job: &job.job,
        table: handle.name(),
        after,
        ignore_changes: job.ignore_changes,
        rebuilds: matches!(job.kind, JobKind::Cdc(_)),
    };
    let limits = ChunkLimits::of(job);
    let chunk = cut(&mut appends, &handle, after, limits).await?;
    read_chunk_rows(&job.job, handle, schema, chunk, limits.max_decoded_bytes())
        .await
        .map(Some)
}

/// Open `table`, a source of `job`, and read every row of its latest snapshot as one chunk
/// (`after` none, `end` the latest version): a CDC apply's first run, which needs neither the
/// early log (cleaned after 30 days) nor a history without removals (a GDPR erasure by
/// another engine). The whole snapshot is one run, as an aggregate's first run. `None`: the
/// table does not exist yet.
pub async fn read_snapshot(
    ctx: &RunContext<'_>,
    job: &RefineJob,
    table: &str,
) -> Result<Option<SourceRead>> {
    let handle = ctx.load_source(table).await?;
    if !handle.exists() {
        return Ok(None);
    }
    handle.refuse_deletion_vectors()?;
    let schema = handle.arrow_schema()?;
    let latest = handle.version().unwrap_or(0);
    let files = super::snapshot_limit::snapshot_files(&handle)?;
    super::snapshot_limit::refuse_oversized_snapshot(job, table, &files)?;
    let chunk = Chunk {
        after: None,
        end: Some(latest),
        latest,
        versions: vec![SourceVersion {
            version: latest,
            files,
        }],
    };
    // The whole snapshot is one run: bounded before reading, by `snapshot_max_mib`.
    read_chunk_rows(&job.job, handle, schema, chunk, u64::MAX)
        .await
        .map(Some)
}

/// Versions of a chunk read ahead at once, and files of one version read at once: the GETs
/// of a chunk wait together at S3 instead of one after another.
const READ_AHEAD: usize = 4;

/// A version is read ahead only while the rows read plus this many times the Parquet bytes in
/// flight stay under the decoded limit: a small chunk reads its versions together, one near its
/// limit one at a time. While rows decode to at most this many times their Parquet bytes (text:
/// 1.4-2x, `make bench-memory`), nothing past the version crossing the limit is read; data that
/// compresses better may read up to `READ_AHEAD - 1` versions more and drop them at the cut.
const AHEAD_DECODED_PER_BYTE: u64 = 4;

/// Read the rows of `chunk`'s versions in order ([`READ_AHEAD`] at a time while far below the
/// limit), ending the chunk after the first version whose rows take the chunk's rows to
/// `max_decoded` bytes in memory (at least one version; the rest is the next run's).
async fn read_chunk_rows(
    job: &str,
    handle: TableHandle,
    schema: SchemaRef,
    mut chunk: Chunk,
    max_decoded: u64,
) -> Result<SourceRead> {
    let mut batches = Vec::new();
    let mut version_rows = Vec::new();
    let mut decoded = 0u64;
    let mut cut_at = None;
    {
        let versions = &chunk.versions;
        let parquet = |i: usize| versions[i].files.iter().map(|f| f.size).sum::<u64>();
        let mut reads = futures::stream::FuturesOrdered::new();
        let (mut next, mut in_flight) = (0, 0u64);
        let mut i = 0;
        loop {
            if i > 0 && i < versions.len() && decoded >= max_decoded {
                cut_at = Some(i);
                break;
            }
            while next < versions.len()
                && reads.len() < READ_AHEAD
                && (reads.is_empty()
                    || decoded.saturating_add(
                        in_flight
                            .saturating_add(parquet(next))
                            .saturating_mul(AHEAD_DECODED_PER_BYTE),
                    ) < max_decoded)
            {
                reads.push_back(read_version(job, &handle, &chunk, &versions[next], &schema));
                in_flight += parquet(next);
                next += 1;
            }
            let Some(read) = reads.next().await else {
                break;
            };
            in_flight -= parquet(i);
            let read = read?;
            version_rows.push((
                versions[i].version,
                read.iter().map(RecordBatch::num_rows).sum(),
            ));
            decoded += read
                .iter()
                .map(|b| b.get_array_memory_size() as u64)
                .sum::<u64>();
            batches.extend(read);
            i += 1;
        }
    }
    if let Some(i) = cut_at {
        chunk.end = Some(chunk.versions[i - 1].version);
        chunk.versions.truncate(i);
    }
    Ok(SourceRead {
        handle,
        schema,
        chunk,
        batches,
        version_rows,
    })
}

/// The rows version `v` of `chunk` added, in `schema` (the table's latest), its files read
/// [`READ_AHEAD`] at a time, with a vacuumed file reported as a gone version.
pub async fn read_version(
    job: &str,
    handle: &TableHandle,
    chunk: &Chunk,
    v: &SourceVersion,
    schema: &SchemaRef,
) -> Result<Vec<RecordBatch>> {
    let table = handle.name();
    let reads: Vec<Vec<RecordBatch>> = futures::stream::iter(&v.files)
        .map(|f| async move {
            let read = handle.read_file(&f.data_file(), schema).await;
            read.map_err(|e| file_error(job, table, v.version, chunk.after, chunk.latest, e))
        })
        .buffered(READ_AHEAD)
        .try_collect()
        .await?;
    Ok(reads.into_iter().flatten().collect())
}

/// The message for a version whose log entry or data files are gone.
pub(crate) fn gone(
    job: &str,
    table: &str,
    version: u64,
    after: Option<u64>,
    latest: u64,
    what: &str,
) -> String {
    let behind = (latest + 1).saturating_sub(after.map_or(0, |a| a + 1));
    format!(
        "{what} for version {version} is gone (log retention or vacuum); the job is {behind} \
         version(s) behind (consumed {}, latest {latest}). Rows of the missing versions cannot be \
         read any more: skip ahead with `lakestream refine {job} --skip-to {table}=V` (V = the \
         last version to treat as consumed; one the table can still be loaded at: the latest, \
         {latest}, or a checkpointed version), then rebuild the output if it must be complete",
        after.map_or("nothing".to_string(), |a| a.to_string())
    )
}

/// Map a data-file read error: a missing file is a vacuumed version, anything else storage.
pub(crate) fn file_error(
    job: &str,
    table: &str,
    version: u64,
    after: Option<u64>,
    latest: u64,
    e: Error,
) -> Error {
    if is_missing_file(&e) {
        return Error::Source {
            job: job.to_string(),
            table: table.to_string(),
            reason: gone(job, table, version, after, latest, "a data file"),
        };
    }
    e
}
