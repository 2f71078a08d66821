//! The join state is the source tables themselves: a side's rows up to the version the job has
//! consumed, read from that version's snapshot with partition and min/max-statistics pruning on
//! the key and time columns. Also: the exact largest event time of a snapshot (the base of the
//! lateness rule) and the rows earlier runs found late (they stay out of every join).

use super::rules::Rows;
use crate::error::Result;
use crate::refine::RunContext;
use crate::storage::Lake;
use crate::table::{DataFile, TableHandle};
use deltalake::arrow::array::UInt32Array;
use deltalake::arrow::compute::{concat_batches, take_record_batch};
use deltalake::arrow::datatypes::SchemaRef;
use lakestream_formats::refine::join::JoinSideConfig;
use std::collections::{BTreeMap, HashSet};

/// One live data file of a snapshot, with what pruning needs.
#[derive(Debug, Clone)]
pub(crate) struct StateFile {
    /// The file (path, size, partition values).
    file: DataFile,
    /// Event-time bounds from statistics (µs; widened by 1 ms: stats are truncated to ms).
    time: Option<(i64, i64)>,
    /// Key bounds from statistics (strings only).
    key: Option<(String, Option<String>)>,
}

/// A side's snapshot at the version the job consumed.
pub(crate) struct Snapshot {
    /// The side's table, loaded at the consumed version.
    handle: TableHandle,
    files: Vec<StateFile>,
}

const MS: i64 = 1000;

impl Snapshot {
    /// Load `table` at `version`. With warm handles the time travel starts from the source's
    /// kept handle, so its log-read cache answers the commit files (only the listing is asked).
    pub async fn load(ctx: &RunContext<'_>, side: &JoinSideConfig, version: u64) -> Result<Self> {
        let (table, key, time) = (side.table.as_str(), side.key.as_str(), side.time.as_str());
        let mut h = if ctx.warm.is_some() {
            ctx.load_source(table).await?
        } else {
            TableHandle::open(ctx.lake, table)?
        };
        h.at_version(version).await?;
        h.refuse_deletion_vectors()?;
        let files = h
            .live_files()?
            .iter()
            .map(|f| {
                let stats = f.stats();
                let stat = |kind: &str, col: &str| stats.as_ref()?.get(kind)?.get(col).cloned();
                let time = match (stat("minValues", time), stat("maxValues", time)) {
                    (Some(lo), Some(hi)) => parse_time(&lo)
                        .zip(parse_time(&hi))
                        .map(|(lo, hi)| (lo - MS, hi + MS)),
                    _ => None,
                };
                let key = match stat("minValues", key) {
                    Some(serde_json::Value::String(lo)) => {
                        let hi = stat("maxValues", key).and_then(|v| match v {
                            // Long strings may be truncated in stats: only trust short maxima.
                            serde_json::Value::String(s) if s.chars().count() < 32 => Some(s),
                            _ => None,
                        });
                        Some((lo, hi))
                    }
                    _ => None,
                };
                StateFile {
                    file: f.data_file(),
                    time,
                    key,
                }
            })
            .collect();
        Ok(Self { handle: h, files })
    }

    /// The exact largest event time at most `cap` of the snapshot (rows beyond `cap`, processing
    /// time plus the allowed skew, feed no watermark): statistics pick the files that can hold
    /// it (stats are truncated to milliseconds), only those are read. A file whose range spans
    /// `cap` is always read (its statistics cannot say what lies below `cap`); one wholly above
    /// it is not.
    pub async fn max_time(
        &self,
        schema: &SchemaRef,
        side: &JoinSideConfig,
        cap: i64,
    ) -> Result<Option<i64>> {
        let below = |f: &StateFile| f.time.is_some_and(|(_, hi)| hi <= cap);
        let top = self
            .files
            .iter()
            .filter(|f| below(f))
            .filter_map(|f| f.time.map(|t| t.1))
            .max();
        let mut best: Option<i64> = None;
        for f in &self.files {
            let read = match (f.time, top) {
                (None, _) => true,
                (Some((lo, _)), _) if lo > cap => false,
                (Some((_, hi)), _) if hi > cap => true,
                (Some((_, hi)), Some(top)) => hi >= top - 3 * MS,
                _ => false,
            };
            if read {
                let rows = self.read(f, schema, side).await?;
                if let Some(hi) = rows.times.iter().flatten().filter(|t| **t <= cap).max() {
                    best = Some(best.map_or(*hi, |b| b.max(*hi)));
                }
            }
        }
        Ok(best)
    }

    /// Rows that can match: key in `keys`, time within `[lo, hi]` (files pruned by partition
    /// values and statistics first, rows filtered after reading).
    pub async fn rows(
        &self,
        schema: &SchemaRef,
        side: &JoinSideConfig,
        keys: &HashSet<String>,
        (lo, hi): (i64, i64),
    ) -> Result<Rows> {
        let key = side.key.as_str();
        let mut batches = Vec::new();
        for f in &self.files {
            if let Some(Some(v)) = f.file.partitions.get(key)
                && !keys.contains(v)
            {
                continue;
            }
            if let Some((tlo, thi)) = f.time
                && (thi < lo || tlo > hi)
            {
                continue;
            }
            if let Some((klo, khi)) = &f.key
                && !keys
                    .iter()
                    .any(|k| k >= klo && khi.as_ref().is_none_or(|h| k <= h))
            {
                continue;
            }
            let rows = self.read(f, schema, side).await?;
            let keep: Vec<u32> = (0..rows.len())
                .filter(|&i| {
                    matches!((&rows.keys[i], rows.times[i]), (Some(k), Some(t)) if keys.contains(k) && t >= lo && t <= hi)
                })
                .map(|i| i as u32)
                .collect();
            if !keep.is_empty() {
                batches.push(take_record_batch(&rows.batch, &UInt32Array::from(keep))?);
            }
        }
        let batch = concat_batches(schema, &batches)?;
        Rows::new(batch, side)
    }

    async fn read(&self, f: &StateFile, schema: &SchemaRef, side: &JoinSideConfig) -> Result<Rows> {
        let batches = self.handle.read_file(&f.file, schema).await?;
        Rows::new(concat_batches(schema, &batches)?, side)
    }
}

/// A statistics value as µs since the epoch (`2026-11-30T12:00:00.123Z`, with or without zone).
fn parse_time(v: &serde_json::Value) -> Option<i64> {
    let s = v.as_str()?;
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t.timestamp_micros());
    }
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc().timestamp_micros())
}

/// A row's identity for the late set: its values in `names` (the columns the join uses).
pub(crate) fn identity(
    row: &serde_json::Map<String, serde_json::Value>,
    names: &[String],
) -> String {
    let picked: BTreeMap<&str, &serde_json::Value> = names
        .iter()
        .filter_map(|n| row.get(n).map(|v| (n.as_str(), v)))
        .collect();
    serde_json::to_string(&picked).unwrap_or_default()
}

/// Identities of the rows of `table` that earlier runs of the job writing `output` found late
/// or beyond the future cap (from the dead-letter table). Read bounded: only files whose `target_table` statistics can
/// hold `output`, only the four columns needed, row by row as they stream in
/// ([`late_rows`](crate::dead_letter::scan::late_rows)); the table is never loaded whole.
pub(crate) async fn late_set(
    lake: &Lake,
    dead_letter_table: &str,
    output: &str,
    table: &str,
    names: &[String],
) -> Result<HashSet<String>> {
    let mut h = TableHandle::open(lake, dead_letter_table)?;
    let mut out = HashSet::new();
    if !h.refresh().await? {
        return Ok(out);
    }
    crate::dead_letter::scan::late_rows(&h, output, table, |bytes| {
        if let Ok(row) = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(bytes)
        {
            out.insert(identity(&row, names));
        }
    })
    .await?;
    Ok(out)
}
