//! Planning a compaction from one snapshot: the live files with what planning needs
//! ([`FileInfo`]), per partition first-fit-decreasing bins of small files ([`plan_bins`]), and
//! what a dry run reports ([`dry_run_counts`]).

use super::{CompactOptions, CompactReport};
use crate::error::Result;
use crate::table::TableHandle;
use chrono::{DateTime, Utc};
use deltalake::kernel::Remove;
use std::collections::BTreeMap;

/// A live file as planning sees it.
pub(super) struct FileInfo {
    pub(super) path: deltalake::Path,
    pub(super) size: u64,
    pub(super) modified_ms: i64,
    pub(super) partition: Vec<(String, Option<String>)>,
    pub(super) remove: Remove,
}

/// A compaction plan: per partition (its label), the bins of files to rewrite into one file.
pub(super) type Plan<'a> = Vec<(String, Vec<Vec<&'a FileInfo>>)>;

/// Plan: per partition, first-fit-decreasing bins of small files (partitions not changed
/// within `changed_within` skipped, bins past `max_bytes` deferred); with the bytes planned.
pub(super) fn plan_bins<'a>(
    files: &'a [FileInfo],
    opts: &CompactOptions,
    now: DateTime<Utc>,
    report: &mut CompactReport,
) -> (Plan<'a>, u64) {
    let mut by_partition: BTreeMap<String, Vec<&FileInfo>> = BTreeMap::new();
    for f in files {
        by_partition
            .entry(partition_label(&f.partition))
            .or_default()
            .push(f);
    }
    let cutoff = opts.changed_within.map(|d| (now - d).timestamp_millis());
    let mut plan: Plan<'a> = Vec::new();
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
    (plan, planned_bytes)
}

/// What a real run of `plan` would do, counted into `report` (a dry run writes nothing).
pub(super) fn dry_run_counts(plan: &Plan<'_>, report: &mut CompactReport) {
    for (_, bins) in plan {
        report.partitions_compacted += 1;
        for bin in bins {
            report.files_removed += bin.len();
            report.files_added += 1;
            report.bytes_rewritten += bin.iter().map(|f| f.size).sum::<u64>();
        }
    }
    report.files_after = report.files_before - report.files_removed + report.files_added;
}

/// The live files of `h`'s loaded snapshot, as planning sees them.
pub(super) fn live_files(h: &TableHandle) -> Result<Vec<FileInfo>> {
    let columns = h.partition_columns()?;
    Ok(h.live_files()?
        .iter()
        .map(|f| {
            let values = f.partition_values();
            FileInfo {
                path: f.object_path(),
                size: f.size(),
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
