//! Compaction: bin-pack the small files of each partition into files near a target size,
//! committed with `dataChange=false` (streaming readers skip it; appends never conflict with
//! it). One commit per partition, so a partition that a concurrent delete/merge touched is
//! skipped and reported without losing the others. Optional z-order within each rewritten file.

use crate::error::{Error, Result};
use crate::handle::TableHandle;
use crate::read::read_data_file;
use crate::storage::Lake;
use chrono::{DateTime, Utc};
use deltalake::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use deltalake::arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Remove};
use deltalake::protocol::DeltaOperation;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use std::collections::{BTreeMap, HashMap};

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
    /// Partitions skipped because a concurrent writer changed their files.
    pub partitions_conflicted: Vec<String>,
    /// Bins left for the next run because of `max_bytes`.
    pub bins_deferred: usize,
    /// Last version committed.
    pub version: Option<u64>,
}

struct FileInfo {
    path: deltalake::Path,
    size: u64,
    modified_ms: i64,
    partition: Vec<(String, Option<String>)>,
    remove: Remove,
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
    let schema = h.arrow_schema()?;
    for c in &opts.zorder_by {
        if schema.field_with_name(c).is_err() {
            return Err(Error::Config(format!(
                "z-order column `{c}` is not in table `{table}`"
            )));
        }
    }
    let files = live_files(&h, table)?;
    let mut report = CompactReport {
        table: table.to_string(),
        files_before: files.len(),
        ..Default::default()
    };
    let partition_columns = h
        .table()
        .snapshot()
        .map_err(|e| Error::storage(table, e))?
        .metadata()
        .partition_columns()
        .to_vec();

    // Plan: per partition, first-fit-decreasing bins of small files.
    let mut by_partition: BTreeMap<String, Vec<&FileInfo>> = BTreeMap::new();
    for f in &files {
        by_partition
            .entry(partition_label(&f.partition))
            .or_default()
            .push(f);
    }
    let cutoff = opts.changed_within.map(|d| (now - d).timestamp_millis());
    let mut plan: Vec<(String, Vec<Vec<&FileInfo>>)> = Vec::new();
    let mut planned_bytes = 0u64;
    for (label, files) in by_partition {
        if let Some(c) = cutoff
            && files.iter().all(|f| f.modified_ms < c)
        {
            continue;
        }
        let mut small: Vec<&FileInfo> = files
            .into_iter()
            .filter(|f| f.size < opts.small_file_threshold)
            .collect();
        if small.len() < opts.min_small_files.max(2) {
            continue;
        }
        small.sort_by_key(|f| std::cmp::Reverse(f.size));
        let mut bins: Vec<(u64, Vec<&FileInfo>)> = Vec::new();
        for f in small {
            match bins.iter_mut().find(|b| b.0 + f.size <= opts.target_size) {
                Some(b) => {
                    b.0 += f.size;
                    b.1.push(f);
                }
                None => bins.push((f.size, vec![f])),
            }
        }
        let mut keep = Vec::new();
        for (bytes, bin) in bins.into_iter().filter(|b| b.1.len() > 1) {
            if opts.max_bytes.is_some_and(|m| planned_bytes + bytes > m) && planned_bytes > 0 {
                report.bins_deferred += 1;
                continue;
            }
            planned_bytes += bytes;
            keep.push(bin);
        }
        if !keep.is_empty() {
            plan.push((label, keep));
        }
    }

    // Execute: rewrite each partition's bins, then one commit for the partition.
    let store = h.table().object_store();
    let url = lake.table_url(table)?;
    let mut done_bytes = 0u64;
    progress(0, planned_bytes);
    for (label, bins) in plan {
        let mut actions: Vec<Action> = Vec::new();
        let mut removed = 0usize;
        let mut bytes = 0u64;
        for bin in &bins {
            // Fetch the bin's files concurrently (S3 latency, not bandwidth, bounds small files),
            // decode them in order.
            let fetched: Vec<deltalake::arrow::array::RecordBatch> = {
                use futures::{StreamExt, TryStreamExt};
                let store = &store;
                let schema = &schema;
                futures::stream::iter(bin.iter())
                    .map(|f| async move {
                        let values: HashMap<String, Option<String>> =
                            f.partition.iter().cloned().collect();
                        read_data_file(store, &f.path, &values, schema, table).await
                    })
                    .buffered(FETCH_CONCURRENCY)
                    .try_collect::<Vec<_>>()
                    .await?
                    .into_iter()
                    .flatten()
                    .collect()
            };
            let batches = fetched;
            let mut batch = concat_batches(&schema, &batches)?;
            if !opts.zorder_by.is_empty() {
                let size = batch.get_array_memory_size() as u64;
                if size > opts.memory_budget {
                    return Err(Error::Config(format!(
                        "z-order of partition {label} of `{table}` needs ~{} MiB, over the {} MiB budget: \
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
                Some(partition_columns.clone()),
                Some(lake.storage_options().clone()),
            )
            .map_err(|e| Error::storage(table, e))?
            .with_target_file_size(opts.target_size);
            writer
                .write(batch)
                .await
                .map_err(|e| Error::storage(table, e))?;
            for mut add in writer.flush().await.map_err(|e| Error::storage(table, e))? {
                add.data_change = false;
                actions.push(Action::Add(add));
                report.files_added += 1;
            }
            for f in bin {
                actions.push(Action::Remove(f.remove.clone()));
                removed += 1;
                bytes += f.size;
            }
        }
        h.refresh().await?;
        let snapshot = h.table().snapshot().map_err(|e| Error::storage(table, e))?;
        let op = DeltaOperation::Optimize {
            predicate: Some(label.clone()),
            target_size: opts.target_size as i64,
        };
        let res = CommitBuilder::from(CommitProperties::default().with_max_retries(10))
            .with_actions(actions)
            .build(Some(snapshot), h.table().log_store(), op)
            .await;
        match res {
            Ok(done) => {
                report.version = Some(done.version());
                report.partitions_compacted += 1;
                report.files_removed += removed;
                report.bytes_rewritten += bytes;
            }
            Err(e) => {
                tracing::warn!(table, partition = %label, error = %e, "compaction of partition skipped (concurrent change)");
                report.partitions_conflicted.push(label);
            }
        }
        done_bytes += bytes;
        progress(done_bytes, planned_bytes);
    }
    h.refresh().await?;
    report.files_after = h
        .table()
        .snapshot()
        .map_err(|e| Error::storage(table, e))?
        .log_data()
        .num_files();
    Ok(report)
}

fn live_files(h: &TableHandle, table: &str) -> Result<Vec<FileInfo>> {
    let snapshot = h.table().snapshot().map_err(|e| Error::storage(table, e))?;
    let columns = snapshot.metadata().partition_columns().to_vec();
    Ok(snapshot
        .log_data()
        .iter()
        .map(|f| {
            let values = f.partition_values_map();
            FileInfo {
                path: f.object_store_path(),
                size: f.size().max(0) as u64,
                modified_ms: f.modification_time(),
                partition: columns
                    .iter()
                    .map(|c| (c.clone(), values.get(c).cloned().flatten()))
                    .collect(),
                remove: f.remove_action(false),
            }
        })
        .collect())
}

fn partition_label(p: &[(String, Option<String>)]) -> String {
    if p.is_empty() {
        return "(unpartitioned)".into();
    }
    p.iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                v.as_deref().unwrap_or("__HIVE_DEFAULT_PARTITION__")
            )
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Sort rows by the Morton (z-order) code of their per-column ranks.
fn zorder(batch: &RecordBatch, columns: &[String]) -> Result<RecordBatch> {
    let n = batch.num_rows();
    if n < 2 {
        return Ok(batch.clone());
    }
    let bits = (64 / columns.len().max(1)).min(32) as u32;
    let scale = |rank: usize| -> u64 {
        ((rank as u128 * ((1u128 << bits) - 1)) / (n as u128 - 1).max(1)) as u64
    };
    let mut keys = vec![0u64; n];
    for (ci, c) in columns.iter().enumerate() {
        let col: &ArrayRef = batch
            .column_by_name(c)
            .ok_or_else(|| Error::Config(format!("z-order column `{c}` missing")))?;
        let order = sort_to_indices(col, None, None)?;
        for (rank, &row) in order.values().iter().enumerate() {
            let r = scale(rank);
            for b in 0..bits {
                if r >> b & 1 == 1 {
                    keys[row as usize] |= 1u64 << (b as usize * columns.len() + ci);
                }
            }
        }
    }
    let mut idx: Vec<u32> = (0..n as u32).collect();
    idx.sort_by_key(|&i| keys[i as usize]);
    Ok(take_record_batch(batch, &UInt32Array::from(idx))?)
}
