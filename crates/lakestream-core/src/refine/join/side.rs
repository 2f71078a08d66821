//! One side of a join run: what its source gained (the one chunk reader), its snapshot at the
//! version the job consumed (the join state and the base of the lateness rule), and the verdict
//! on each new row — on time, late or beyond the future cap — with a dead letter for each row
//! that is not joined; and the consumed rows of a side that can match the other side's new rows.

use super::JoinPlanner;
use super::rules::{Rows, Verdict, late_flags};
use super::state::{Snapshot, identity, late_set};
use crate::dead_letter::DeadLetter;
use crate::error::{Error, Result};
use crate::refine::json_rows::row_json;
use crate::refine::source::{Chunk, SourceRead, file_error, gone, read_next};
use crate::table::TableHandle;
use deltalake::arrow::array::{RecordBatch, UInt32Array};
use deltalake::arrow::datatypes::SchemaRef;
use lakestream_formats::refine::join::JoinSideConfig;
use std::collections::HashSet;

/// One side while planning.
pub(super) struct Side<'a> {
    pub cfg: &'a JoinSideConfig,
    pub handle: TableHandle,
    pub schema: SchemaRef,
    /// The last version consumed before this run.
    pub after: Option<u64>,
    pub chunk: Chunk,
    /// New rows of the chunk and, per row, whether it is late (or beyond the future cap).
    pub new: Rows,
    pub late: Vec<bool>,
    /// Base of the lateness rule: largest event time up to `after`; the snapshot at `after`.
    pub before: Option<i64>,
    pub snapshot: Option<Snapshot>,
    /// Dead letters of the new rows that are not joined.
    pub letters: Vec<DeadLetter>,
}

impl JoinPlanner<'_> {
    /// The largest event time that may feed a watermark or join in this run: processing time
    /// plus `max_future_skew` (µs).
    pub(super) fn future_cap(&self) -> i64 {
        let skew = i64::try_from(self.join.max_future_skew.as_micros()).unwrap_or(i64::MAX);
        self.ctx.now.timestamp_micros().saturating_add(skew)
    }

    /// Read side `cfg` after version `after`; `None`: its table does not exist yet.
    pub(super) async fn side<'c>(
        &self,
        cfg: &'c JoinSideConfig,
        after: Option<u64>,
    ) -> Result<Option<Side<'c>>> {
        let Some(read) = read_next(self.ctx, self.cfg, &cfg.table, after).await? else {
            return Ok(None);
        };
        let new = Rows::new(read.rows()?, cfg)?;
        let SourceRead {
            handle,
            schema,
            chunk,
            version_rows,
            ..
        } = read;
        let snapshot = match after {
            Some(a) => Some(self.snapshot(&handle, cfg, a, chunk.latest).await?),
            None => None,
        };
        let cap = self.future_cap();
        let before = match &snapshot {
            // A file of the consumed version that is gone (vacuumed) fails like a new one.
            Some(s) => s.max_time(&schema, cfg, cap).await.map_err(|e| {
                file_error(
                    &self.cfg.job,
                    &cfg.table,
                    after.unwrap_or(0),
                    after,
                    chunk.latest,
                    e,
                )
            })?,
            None => None,
        };
        let (late, letters) = self.lateness(cfg, &new, &version_rows, before, cap)?;
        Ok(Some(Side {
            cfg,
            handle,
            schema,
            after,
            chunk,
            new,
            late,
            before,
            snapshot,
            letters,
        }))
    }

    /// The lateness rule, version by version: per new row whether it is not joined, and a dead
    /// letter for each such row.
    fn lateness(
        &self,
        cfg: &JoinSideConfig,
        new: &Rows,
        version_rows: &[(u64, usize)],
        before: Option<i64>,
        cap: i64,
    ) -> Result<(Vec<bool>, Vec<DeadLetter>)> {
        let mut times = Vec::new();
        let mut offset = 0;
        for (_, n) in version_rows {
            times.push(new.times[offset..offset + n].to_vec());
            offset += n;
        }
        let delay = i64::try_from(cfg.delay.as_micros()).unwrap_or(i64::MAX);
        let flags = late_flags(&times, before, delay, cap);
        let mut late = Vec::with_capacity(new.len());
        let mut letters = Vec::new();
        let mut offset = 0;
        for ((version, n), (f, watermark)) in version_rows.iter().zip(&flags) {
            let idx: Vec<u32> = (0..*n)
                .filter(|i| f[*i] != Verdict::OnTime)
                .map(|i| (offset + i) as u32)
                .collect();
            if !idx.is_empty() {
                let rows = deltalake::arrow::compute::take_record_batch(
                    &new.batch,
                    &UInt32Array::from(idx.clone()),
                )?;
                for (row, i) in row_json(&rows)?.into_iter().zip(&idx) {
                    let t = new.times[*i as usize].map(micros_text).unwrap_or_default();
                    let verdict = f[*i as usize - offset];
                    letters.push(self.letter(cfg, *version, verdict, &t, *watermark, &row));
                }
            }
            late.extend(f.iter().map(|v| *v != Verdict::OnTime));
            offset += n;
        }
        Ok((late, letters))
    }

    /// The dead letter of a row of `version` that is not joined (`t`: its event time as text).
    fn letter(
        &self,
        cfg: &JoinSideConfig,
        version: u64,
        verdict: Verdict,
        t: &str,
        watermark: Option<i64>,
        row: &serde_json::Map<String, serde_json::Value>,
    ) -> DeadLetter {
        let (kind, error) = match verdict {
            Verdict::Future => (
                "future",
                format!(
                    "future: `{}` {t} is more than {} (`max_future_skew`) ahead of processing time {}; not joined by job `{}` and not counted in the {} watermark (a wrong clock or unit? an epoch in microseconds read as milliseconds?)",
                    cfg.time,
                    humantime::format_duration(self.join.max_future_skew),
                    micros_text(self.ctx.now.timestamp_micros()),
                    self.cfg.job,
                    cfg.table
                ),
            ),
            _ => (
                "late",
                format!(
                    "late: `{}` {t} is below the {} watermark {} (largest `{}` in versions before {version} minus {}); not joined by job `{}`",
                    cfg.time,
                    cfg.table,
                    watermark.map(micros_text).unwrap_or_default(),
                    cfg.time,
                    humantime::format_duration(cfg.delay),
                    self.cfg.job
                ),
            ),
        };
        DeadLetter::delta_row(
            &cfg.table,
            version,
            serde_json::to_string(row).unwrap_or_default().as_bytes(),
            &self.cfg.output,
            format!("{}/{kind}/{version}", self.app_id(&cfg.table)),
            error,
        )
    }

    /// The side's table at the version the job consumed (the join state and the lateness base).
    async fn snapshot(
        &self,
        handle: &TableHandle,
        cfg: &JoinSideConfig,
        version: u64,
        latest: u64,
    ) -> Result<Snapshot> {
        match Snapshot::load(self.ctx, cfg, version).await {
            Ok(s) => Ok(s),
            Err(e) => match handle.commit(version).await {
                Ok(None) => Err(Error::Source {
                    job: self.cfg.job.clone(),
                    table: cfg.table.clone(),
                    reason: gone(
                        &self.cfg.job,
                        &cfg.table,
                        version,
                        Some(version),
                        latest,
                        "the log to load the consumed version",
                    ),
                }),
                _ => Err(e),
            },
        }
    }

    /// The other side's consumed rows that can match `probe` (times shifted into its frame),
    /// with late ones (recorded by earlier runs) excluded.
    pub(super) async fn consumed_rows(
        &self,
        side: &Side<'_>,
        probe: &Rows,
        probe_ok: &[bool],
        shift: (i64, i64),
    ) -> Result<(Rows, Vec<bool>)> {
        let empty = || -> Result<(Rows, Vec<bool>)> {
            let rows = Rows::new(RecordBatch::new_empty(side.schema.clone()), side.cfg)?;
            Ok((rows, vec![]))
        };
        let Some(snapshot) = &side.snapshot else {
            return empty();
        };
        let usable: Vec<usize> = (0..probe.len()).filter(|i| probe_ok[*i]).collect();
        let keys: HashSet<String> = usable
            .iter()
            .filter_map(|i| probe.keys[*i].clone())
            .collect();
        let times: Vec<i64> = usable.iter().filter_map(|i| probe.times[*i]).collect();
        let (Some(lo), Some(hi)) = (times.iter().min(), times.iter().max()) else {
            return empty();
        };
        let range = (lo.saturating_add(shift.0), hi.saturating_add(shift.1));
        let rows = snapshot
            .rows(&side.schema, side.cfg, &keys, range)
            .await
            .map_err(|e| {
                let at = side.after.unwrap_or(0);
                file_error(
                    &self.cfg.job,
                    &side.cfg.table,
                    at,
                    side.after,
                    side.chunk.latest,
                    e,
                )
            })?;
        // A consumed row beyond the future cap was beyond it when it was consumed too (the cap
        // only grows with processing time): out. One at or above the watermark of the consumed
        // version is certainly on time (watermarks only grow); below it, ask the late set.
        let cap = self.future_cap();
        let delay = i64::try_from(side.cfg.delay.as_micros()).unwrap_or(i64::MAX);
        let watermark = side.before.map(|m| m.saturating_sub(delay));
        let doubtful: Vec<usize> = (0..rows.len())
            .filter(|i| matches!((rows.times[*i], watermark), (Some(t), Some(w)) if t < w))
            .collect();
        let mut ok: Vec<bool> = rows
            .times
            .iter()
            .map(|t| t.is_none_or(|t| t <= cap))
            .collect();
        if !doubtful.is_empty() {
            let names = side_names(side.cfg);
            let late = late_set(
                self.ctx.lake,
                self.ctx.dead_letter_table,
                &self.cfg.output,
                &side.cfg.table,
                &names,
            )
            .await?;
            if !late.is_empty() {
                let idx = UInt32Array::from(doubtful.iter().map(|i| *i as u32).collect::<Vec<_>>());
                let picked = deltalake::arrow::compute::take_record_batch(&rows.batch, &idx)?;
                for (row, i) in row_json(&picked)?.iter().zip(&doubtful) {
                    if late.contains(&identity(row, &names)) {
                        ok[*i] = false;
                    }
                }
            }
        }
        Ok((rows, ok))
    }
}

/// The columns that identify a row of a side for the late set.
fn side_names(cfg: &JoinSideConfig) -> Vec<String> {
    let mut names: Vec<String> = cfg.column_pairs().into_iter().map(|(src, _)| src).collect();
    names.push(cfg.key.clone());
    names.push(cfg.time.clone());
    names.sort();
    names.dedup();
    names
}

/// An event time (µs) as RFC 3339 text for dead-letter messages.
fn micros_text(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| us.to_string())
}
