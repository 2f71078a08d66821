//! Compaction: bin-pack the small files of each partition into files near a target size,
//! committed with `dataChange=false` (streaming readers skip it; appends never conflict with
//! it). One commit per partition on the checked commit path, planned from one snapshot: a bin
//! whose input files a concurrent commit removed (another compaction, a delete or an upsert) is
//! dropped, the partition's other bins still land. Optional z-order within each rewritten file.

mod plan;

use crate::commit::{
    Change, ChangePlanner, CommitSettings, Conflict, Decision, Proposal, ReadScope, TableState, run,
};
use crate::error::{Error, Result};
use crate::maintenance::zorder::zorder;
use crate::storage::Lake;
use crate::table::{DataFile, TableHandle};
use chrono::{DateTime, Utc};
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::compute::concat_batches;
use deltalake::kernel::{Add, Remove};
use deltalake::protocol::DeltaOperation;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use plan::{FileInfo, Plan, dry_run_counts, live_files, plan_bins};

/// Files of one bin fetched at once.
const FETCH_CONCURRENCY: usize = 32;

/// Compaction settings.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Target file size (default 128 MiB).
    pub target_size: u64,
    /// Files smaller than this are candidates (default: a quarter of the target).
    pub small_file_threshold: u64,
    /// A partition is compacted only when it has at least this many small files (default 4).
    pub min_small_files: usize,
    /// Only partitions with a file written within this window (e.g. "yesterday's partition").
    pub changed_within: Option<chrono::Duration>,
    /// Stop after rewriting this many bytes; the rest is picked up by the next run.
    pub max_bytes: Option<u64>,
    /// Z-order rows of each rewritten file by these columns.
    pub zorder_by: Vec<String>,
    /// Memory allowed for one z-ordered bin (decoded); larger bins are refused.
    pub memory_budget: u64,
    /// Plan only: report what would be rewritten, write nothing.
    pub dry_run: bool,
    /// Commit retries (conflicts re-check, storage errors back off).
    pub commit: CommitSettings,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            target_size: 128 << 20,
            small_file_threshold: 32 << 20,
            min_small_files: 4,
            changed_within: None,
            max_bytes: None,
            zorder_by: vec![],
            memory_budget: 512 << 20,
            dry_run: false,
            commit: CommitSettings::from(&lakestream_formats::config::CommitConfig::default()),
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CompactReport {
    /// Table.
    pub table: String,
    /// Live files before.
    pub files_before: usize,
    /// Live files after.
    pub files_after: usize,
    /// Files removed (rewritten).
    pub files_removed: usize,
    /// Files added.
    pub files_added: usize,
    /// Bytes of the files rewritten.
    pub bytes_rewritten: u64,
    /// Partitions compacted (one commit each).
    pub partitions_compacted: usize,
    /// Partitions skipped because a concurrent writer changed their files, by position in
    /// this run's plan (`partition 2 of 5`): partition values are record values and this
    /// report reaches the logs.
    pub partitions_conflicted: Vec<String>,
    /// Bins left for the next run because of `max_bytes`.
    pub bins_deferred: usize,
    /// Last version committed.
    pub version: Option<u64>,
    /// A dry run: nothing was written; the counts are what a real run would do.
    pub dry_run: bool,
}

/// Compact `table`. `progress` is called with (bytes done, bytes planned).
pub async fn compact(
    lake: &Lake,
    table: &str,
    opts: &CompactOptions,
    now: DateTime<Utc>,
    progress: &dyn Fn(u64, u64),
) -> Result<CompactReport> {
    let mut h = TableHandle::open_existing(lake, table).await?;
    h.refuse_deletion_vectors()?;
    // Every partition's change is checked against every commit after this version.
    let read_version = h.version();
    let schema = h.arrow_schema()?;
    for c in &opts.zorder_by {
        if schema.field_with_name(c).is_err() {
            return Err(Error::Config(format!(
                "z-order column `{c}` is not in table `{table}`"
            )));
        }
    }
    let files = live_files(&h)?;
    let mut report = CompactReport {
        table: table.to_string(),
        files_before: files.len(),
        dry_run: opts.dry_run,
        ..Default::default()
    };
    let (plan, planned_bytes) = plan_bins(&files, opts, now, &mut report);
    if opts.dry_run {
        dry_run_counts(&plan, &mut report);
        return Ok(report);
    }
    let partition_columns = h.partition_columns()?;
    let run = Execution {
        lake,
        table,
        schema: &schema,
        partition_columns: &partition_columns,
        opts,
        read_version,
    };
    run.execute(&mut h, plan, planned_bytes, progress, &mut report)
        .await?;
    h.refresh().await?;
    report.files_after = h.num_live_files()?;
    Ok(report)
}

/// What executing a plan needs besides the handle.
struct Execution<'a> {
    lake: &'a Lake,
    table: &'a str,
    schema: &'a deltalake::arrow::datatypes::SchemaRef,
    partition_columns: &'a [String],
    opts: &'a CompactOptions,
    /// The version the plan was made from: every partition's change is checked against it.
    read_version: Option<u64>,
}

impl Execution<'_> {
    /// Execute: rewrite each partition's bins, then one commit for the partition.
    async fn execute(
        &self,
        h: &mut TableHandle,
        plan: Plan<'_>,
        planned_bytes: u64,
        progress: &dyn Fn(u64, u64),
        report: &mut CompactReport,
    ) -> Result<()> {
        let mut done_bytes = 0u64;
        progress(0, planned_bytes);
        let planned = plan.len();
        for (i, (label, bins)) in plan.into_iter().enumerate() {
            // Logs and errors name the partition by position, never by its values.
            let tag = format!("partition {} of {planned}", i + 1);
            let mut rewritten: Vec<(Vec<Remove>, Vec<Add>, u64)> = Vec::new();
            for bin in &bins {
                let adds = rewrite_bin(
                    self.lake,
                    h,
                    self.table,
                    self.schema,
                    self.partition_columns,
                    bin,
                    self.opts,
                    &tag,
                )
                .await?;
                let removes = bin.iter().map(|f| f.remove.clone()).collect();
                rewritten.push((removes, adds, bin.iter().map(|f| f.size).sum()));
            }
            let bytes: u64 = rewritten.iter().map(|r| r.2).sum();
            let part = (label.as_str(), tag.as_str());
            commit_partition(h, self.read_version, part, rewritten, self.opts, report).await?;
            done_bytes += bytes;
            progress(done_bytes, planned_bytes);
        }
        Ok(())
    }
}

/// One partition's rewritten bins as a change planned from `read_version` (the snapshot the
/// whole run was planned from), on the one commit loop. A bin whose input files a commit after
/// that version removed is dropped (its new file stays unreferenced until vacuum) and the rest
/// is retried — checked again against every commit since `read_version`, including this run's
/// own earlier partitions; a schema or protocol change skips the partition until the next run.
struct PartitionCompaction<'a> {
    /// The partition's values (the commit's predicate, in the Delta log only).
    label: &'a str,
    /// Its position in the run (`partition 2 of 5`): what logs and reports name.
    tag: &'a str,
    target_size: u64,
    read_version: Option<u64>,
    schema: deltalake::arrow::datatypes::SchemaRef,
    bins: Vec<(Vec<Remove>, Vec<Add>, u64)>,
    planned: bool,
}

impl PartitionCompaction<'_> {
    fn change(&self) -> Change {
        Change {
            read_version: self.read_version,
            operation: DeltaOperation::Optimize {
                predicate: Some(self.label.to_string()),
                target_size: self.target_size as i64,
            },
            adds: self.bins.iter().flat_map(|b| b.1.iter().cloned()).collect(),
            removes: self.bins.iter().flat_map(|b| b.0.iter().cloned()).collect(),
            txns: vec![],
            scope: ReadScope::Files,
            properties: vec![],
            // Compaction changes no row (`dataChange = false`): no change data, even on a
            // table with the change data feed.
            cdc_files: vec![],
            info: vec![],
        }
    }
}

impl ChangePlanner for PartitionCompaction<'_> {
    async fn plan(&mut self, _: &TableHandle, _: &TableState) -> Result<Option<Proposal>> {
        if std::mem::replace(&mut self.planned, true) || self.bins.is_empty() {
            return Ok(None);
        }
        Ok(Some(Proposal {
            change: self.change(),
            schema: self.schema.clone(),
            create: None,
        }))
    }

    fn on_conflict(&mut self, c: &Conflict, change: &mut Change) -> Decision {
        let tag = self.tag;
        if !c.gone.is_empty() {
            let before = self.bins.len();
            self.bins
                .retain(|b| !b.0.iter().any(|r| c.gone.contains(&r.path)));
            tracing::info!(partition = %tag, dropped = before - self.bins.len(), reason = %crate::redact::scrub(&c.reason), "compaction bins dropped: their files were rewritten or removed concurrently");
            if self.bins.is_empty() {
                return Decision::Stop;
            }
            *change = self.change();
            return Decision::Retry;
        }
        if c.contended {
            return Decision::Retry;
        }
        tracing::warn!(partition = %tag, reason = %crate::redact::scrub(&c.reason), "compaction of partition skipped until the next run");
        Decision::Stop
    }
}

/// Commit one partition's rewritten bins (see [`PartitionCompaction`]); `part` is its values'
/// label and its position tag.
async fn commit_partition(
    h: &mut TableHandle,
    read_version: Option<u64>,
    (label, tag): (&str, &str),
    bins: Vec<(Vec<Remove>, Vec<Add>, u64)>,
    opts: &CompactOptions,
    report: &mut CompactReport,
) -> Result<()> {
    let mut planner = PartitionCompaction {
        label,
        tag,
        target_size: opts.target_size,
        read_version,
        schema: h.arrow_schema()?,
        bins,
        planned: false,
    };
    let ran = run(h, &opts.commit, &mut planner).await?;
    match (ran.landed, ran.proposal) {
        (Some(landed), Some(p)) => {
            report.version = Some(landed.version);
            report.partitions_compacted += 1;
            report.files_removed += p.change.removes.len();
            report.files_added += p.change.adds.len();
            report.bytes_rewritten += planner.bins.iter().map(|b| b.2).sum::<u64>();
        }
        _ => report.partitions_conflicted.push(tag.to_string()),
    }
    Ok(())
}

/// Read, concatenate (and z-order) one bin's files and write them as new files
/// (`dataChange=false`).
#[allow(clippy::too_many_arguments)]
async fn rewrite_bin(
    lake: &Lake,
    h: &TableHandle,
    table: &str,
    schema: &deltalake::arrow::datatypes::SchemaRef,
    partition_columns: &[String],
    bin: &[&FileInfo],
    opts: &CompactOptions,
    tag: &str,
) -> Result<Vec<Add>> {
    let url = lake.table_url(table)?;
    // Fetch the bin's files concurrently (S3 latency, not bandwidth, bounds small files),
    // decode them in order.
    let batches: Vec<RecordBatch> = {
        use futures::{StreamExt, TryStreamExt};
        futures::stream::iter(bin.iter())
            .map(|f| async move {
                let file = DataFile {
                    path: f.path.clone(),
                    size: Some(f.size),
                    partitions: f.partition.iter().cloned().collect(),
                };
                h.read_file(&file, schema).await
            })
            .buffered(FETCH_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?
            .into_iter()
            .flatten()
            .collect()
    };
    let mut batch = concat_batches(schema, &batches)?;
    if !opts.zorder_by.is_empty() {
        let size = batch.get_array_memory_size() as u64;
        if size > opts.memory_budget {
            return Err(Error::Config(format!(
                "z-order of {tag} of `{table}` needs ~{} MiB, over the {} MiB budget: \
                 give the function more memory, lower the target size, or compact without z-order",
                size >> 20,
                opts.memory_budget >> 20
            )));
        }
        batch = zorder(&batch, &opts.zorder_by)?;
    }
    let mut writer = RecordBatchWriter::try_new(
        url.as_str(),
        schema.clone(),
        Some(partition_columns.to_vec()),
        Some(lake.storage_options().clone()),
    )
    .map_err(|e| Error::storage(table, e))?
    .with_writer_properties(crate::table::parquet_write::writer_properties())
    .with_target_file_size(opts.target_size);
    crate::table::parquet_write::write_sliced(&mut writer, &batch)
        .await
        .map_err(|e| Error::storage(table, e))?;
    let mut adds = writer.flush().await.map_err(|e| Error::storage(table, e))?;
    for add in &mut adds {
        add.data_change = false;
    }
    Ok(adds)
}
