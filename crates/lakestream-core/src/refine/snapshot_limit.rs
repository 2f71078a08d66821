//! What a run that reads a source's whole snapshot at once (a CDC apply's first run, a
//! rebuild) may read: at most the job's `snapshot_max_mib` of Parquet, which the refine
//! function sets to its memory / [`SNAPSHOT_MEMORY_FACTOR`]. A larger snapshot fails before
//! anything is read (and before a rebuild empties the output), saying how large it is, the
//! memory it needs and the alternative; without the check Lambda would kill the run at the
//! same snapshot on every retry (ARCHITECTURE.md "Memory").

use super::context::RunContext;
use super::source::NewFile;
use crate::error::{Error, Result};
use crate::table::TableHandle;
use lakestream_formats::refine::RefineJob;

/// The live files of `handle`'s snapshot, by path.
pub(crate) fn snapshot_files(handle: &TableHandle) -> Result<Vec<NewFile>> {
    let mut files: Vec<NewFile> = handle
        .live_files()?
        .into_iter()
        .map(|f| NewFile {
            path: f.path(),
            size: f.size(),
            partition_values: f.partition_values(),
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// `Err` when the run after a rebuild of `job` would be refused for reading source `table`'s
/// snapshot (its `snapshot_max_mib`): checked before the rebuild empties the output, which
/// would otherwise stay empty.
pub(crate) async fn check_snapshot_fits(
    ctx: &RunContext<'_>,
    job: &RefineJob,
    table: &str,
) -> Result<()> {
    if job.snapshot_max_mib.is_none() {
        return Ok(());
    }
    let handle = ctx.load_source(table).await?;
    if !handle.exists() {
        return Ok(());
    }
    refuse_oversized_snapshot(job, table, &snapshot_files(&handle)?)
}

/// Memory (MB) a run that reads a whole snapshot in one go needs per MiB of its Parquet
/// (`make bench-memory`: 164 MiB of bronze of random text peaked at 1.56 GB, 9.5x; 121 MiB of
/// text of words, which compresses ~2x, at 1.57 GB, 13x). Data that compresses better needs
/// more: the snapshot's decoded size is not in the log, so this is the one guess here.
pub const SNAPSHOT_MEMORY_FACTOR: u64 = 16;

/// The most memory a Lambda function can have (MB).
const LAMBDA_MAX_MEMORY_MB: u64 = 10_240;

/// `Err` when `files` (a snapshot read in one run) hold more than the job's
/// `snapshot_max_mib`: the run would need 10-16x that in memory, and a function killed for it
/// would be killed again at every retry. Checked before anything is read.
pub(crate) fn refuse_oversized_snapshot(
    job: &RefineJob,
    table: &str,
    files: &[NewFile],
) -> Result<()> {
    let Some(max) = job.snapshot_max_mib else {
        return Ok(());
    };
    let mib = files.iter().map(|f| f.size).sum::<u64>() >> 20;
    if mib <= max {
        return Ok(());
    }
    let need = mib.saturating_mul(SNAPSHOT_MEMORY_FACTOR);
    let raise = if need <= LAMBDA_MAX_MEMORY_MB {
        format!("Raise RefineMemory to at least {need} MB, or run")
    } else {
        format!("That is more than Lambda's {LAMBDA_MAX_MEMORY_MB} MB (~{need} MB): run")
    };
    Err(Error::Source {
        job: job.job.clone(),
        table: table.to_string(),
        reason: format!(
            "this run reads the table's whole snapshot at once (a CDC apply's first run, or a \
             rebuild): {mib} MiB of Parquet, and this function's memory holds about {max} MiB \
             of it (10-16x in memory at the peak; ARCHITECTURE.md \"Memory\"). Nothing was read \
             or changed. {raise} this job once where memory allows: `lakestream refine {}` (or \
             `--rebuild`) with the pipeline's config; later runs read in chunks",
            job.job
        ),
    })
}
