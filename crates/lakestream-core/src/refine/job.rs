//! One run of an interval-join job, planned on the checked commit path: read what each source
//! gained since the versions the output's `txn`s record, join new rows with the other side's
//! rows (new-left x all-right + old-left x new-right), dead-letter late rows, and append the
//! pairs together with one `txn` per source in one commit. A concurrent run that committed
//! first makes this one re-plan from the newer `txn`s, so no pair is written twice.

use super::join::{Rows, Verdict, interval_pairs, late_flags};
use super::source::{Chunk, ChunkLimits, file_error, gone, next_chunk, read_version};
use super::state::{Snapshot, identity, late_set, row_json};
use super::{RunReport, SideReport};
use crate::commit::{Planned, Planner, TableState};
use crate::dead_letter::{DeadLetter, write_dead_letters};
use crate::error::{Error, Result};
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use deltalake::arrow::compute::{cast, concat_batches, take};
use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use deltalake::kernel::Transaction;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::join::{IntervalJoinConfig, JoinSideConfig};
use std::collections::HashSet;
use std::sync::Arc;

/// Everything a run needs besides the job's config.
pub struct RunContext<'a> {
    /// The lake.
    pub lake: &'a Lake,
    /// Pipeline name (first segment of `txn` appIds).
    pub pipeline: &'a str,
    /// Dead-letter table for late rows.
    pub dead_letter_table: &'a str,
    /// Commit settings.
    pub settings: &'a crate::commit::CommitSettings,
    /// Ingestion time recorded on dead letters.
    pub now: chrono::DateTime<chrono::Utc>,
}

impl<'a> RunContext<'a> {
    /// The context of `config`'s pipeline (its name and dead-letter table).
    pub fn new(
        config: &'a lakestream_formats::config::PipelineConfig,
        lake: &'a Lake,
        settings: &'a crate::commit::CommitSettings,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Self {
        Self {
            lake,
            pipeline: &config.pipeline,
            dead_letter_table: &config.dead_letter_table,
            settings,
            now,
        }
    }
}

/// `txn` appId of a job's consumption of `table`.
pub fn source_app_id(pipeline: &str, job: &str, table: &str) -> String {
    format!("{pipeline}/{job}/{table}")
}

/// Output table property recording a source's table id (a re-created source fails the job).
pub fn source_id_property(table: &str) -> String {
    format!("lakestream.refine.source.{table}.tableId")
}

/// One side while planning.
struct Side<'a> {
    cfg: &'a JoinSideConfig,
    handle: TableHandle,
    schema: SchemaRef,
    after: Option<u64>,
    chunk: Chunk,
    /// New rows of the chunk and, per row, the version that added it and whether it is late.
    new: Rows,
    late: Vec<bool>,
    /// Base of the lateness rule: largest event time up to `after`; the snapshot at `after`.
    before: Option<i64>,
    snapshot: Option<Snapshot>,
    letters: Vec<DeadLetter>,
}

/// The planner of one run.
pub(crate) struct JoinPlanner<'a> {
    pub ctx: &'a RunContext<'a>,
    pub cfg: &'a RefineJob,
    pub join: &'a IntervalJoinConfig,
    pub report: RunReport,
    /// Late and future rows of the last plan: the loop's side write, durable before the output
    /// commit records their versions as consumed.
    pub letters: Vec<DeadLetter>,
}

impl JoinPlanner<'_> {
    fn app_id(&self, table: &str) -> String {
        source_app_id(self.ctx.pipeline, &self.cfg.job, table)
    }

    /// The largest event time that may feed a watermark or join in this run: processing time
    /// plus `max_future_skew` (µs).
    fn future_cap(&self) -> i64 {
        let skew = i64::try_from(self.join.max_future_skew.as_micros()).unwrap_or(i64::MAX);
        self.ctx.now.timestamp_micros().saturating_add(skew)
    }

    async fn side<'c>(
        &self,
        cfg: &'c JoinSideConfig,
        after: Option<u64>,
    ) -> Result<Option<Side<'c>>> {
        let mut handle = TableHandle::open(self.ctx.lake, &cfg.table)?;
        if !handle.refresh().await? {
            return Ok(None);
        }
        let schema = handle.arrow_schema()?;
        let limits = ChunkLimits {
            max_files: self.cfg.max_files_per_run,
            max_bytes: self.cfg.max_mib_per_run << 20,
        };
        let chunk = next_chunk(
            &self.cfg.job,
            &handle,
            after,
            limits,
            self.cfg.ignore_changes,
        )
        .await?;
        let mut batches = Vec::new();
        let mut per_version = Vec::new();
        for v in &chunk.versions {
            let rows = read_version(&self.cfg.job, &handle, &chunk, v, &schema).await?;
            let batch = concat_batches(&schema, &rows)?;
            per_version.push((v.version, batch.num_rows()));
            batches.push(batch);
        }
        let new = Rows::new(
            concat_batches(&schema, &batches)?,
            &cfg.key,
            &cfg.time,
            &cfg.table,
        )?;
        let snapshot = match after {
            Some(a) => Some(self.snapshot(&handle, cfg, a, chunk.latest).await?),
            None => None,
        };
        let cap = self.future_cap();
        let before = match &snapshot {
            // A file of the consumed version that is gone (vacuumed) fails like a new one.
            Some(s) => s
                .max_time(&schema, &cfg.table, &cfg.key, &cfg.time, cap)
                .await
                .map_err(|e| {
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
        // Lateness, version by version.
        let mut times = Vec::new();
        let mut offset = 0;
        for (_, n) in &per_version {
            times.push(new.times[offset..offset + n].to_vec());
            offset += n;
        }
        let delay = i64::try_from(cfg.delay.as_micros()).unwrap_or(i64::MAX);
        let flags = late_flags(&times, before, delay, cap);
        let mut late = Vec::with_capacity(new.len());
        let mut letters = Vec::new();
        let mut offset = 0;
        for ((version, n), (f, watermark)) in per_version.iter().zip(&flags) {
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
                    let (kind, error) = match f[*i as usize - offset] {
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
                    letters.push(DeadLetter::delta_row(
                        &cfg.table,
                        *version,
                        serde_json::to_string(&row).unwrap_or_default().as_bytes(),
                        &self.cfg.output,
                        format!("{}/{kind}/{version}", self.app_id(&cfg.table)),
                        error,
                    ));
                }
            }
            late.extend(f.iter().map(|v| *v != Verdict::OnTime));
            offset += n;
        }
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

    /// The side's table at the version the job consumed (the join state and the lateness base).
    async fn snapshot(
        &self,
        handle: &TableHandle,
        cfg: &JoinSideConfig,
        version: u64,
        latest: u64,
    ) -> Result<Snapshot> {
        match Snapshot::load(self.ctx.lake, &cfg.table, version, &cfg.key, &cfg.time).await {
            Ok(s) => Ok(s),
            Err(e) => match handle.table().log_store().read_commit_entry(version).await {
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
    async fn state(
        &self,
        side: &Side<'_>,
        probe: &Rows,
        probe_ok: &[bool],
        shift: (i64, i64),
    ) -> Result<(Rows, Vec<bool>)> {
        let empty = || -> Result<(Rows, Vec<bool>)> {
            let rows = Rows::new(
                RecordBatch::new_empty(side.schema.clone()),
                &side.cfg.key,
                &side.cfg.time,
                &side.cfg.table,
            )?;
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
            .rows(
                &side.schema,
                &side.cfg.table,
                &side.cfg.key,
                &side.cfg.time,
                &keys,
                range,
            )
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

fn micros_text(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| us.to_string())
}

/// Output columns in table order: `(left side?, source column, output column)`, the non-partition
/// columns first (left, then right), then the partition columns in `partition_by` order.
fn output_columns(cfg: &RefineJob, join: &IntervalJoinConfig) -> Vec<(bool, String, String)> {
    let all: Vec<(bool, String, String)> = [(true, &join.left), (false, &join.right)]
        .into_iter()
        .flat_map(|(is_left, side)| {
            side.column_pairs()
                .into_iter()
                .map(move |(src, out)| (is_left, src, out))
        })
        .collect();
    let mut ordered: Vec<_> = all
        .iter()
        .filter(|c| !cfg.partition_by.contains(&c.2))
        .cloned()
        .collect();
    for p in &cfg.partition_by {
        ordered.extend(all.iter().filter(|c| &c.2 == p).cloned());
    }
    ordered
}

/// The output schema (see [`output_columns`] for the order).
pub fn output_schema(
    cfg: &RefineJob,
    join: &IntervalJoinConfig,
    left: &Schema,
    right: &Schema,
) -> Result<SchemaRef> {
    let mut fields = Vec::new();
    for (is_left, src, out) in output_columns(cfg, join) {
        let (side, schema) = if is_left {
            (&join.left, left)
        } else {
            (&join.right, right)
        };
        let f = schema.field_with_name(&src).map_err(|_| Error::Schema {
            table: side.table.clone(),
            reason: format!("no column `{src}` (named in refine job `{}`)", cfg.job),
        })?;
        fields.push(Field::new(out, f.data_type().clone(), true));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The output columns of `pairs` of rows of `left` and `right`.
fn pair_columns(
    cfg: &RefineJob,
    join: &IntervalJoinConfig,
    left: &RecordBatch,
    right: &RecordBatch,
    pairs: Vec<(u32, u32)>,
) -> Result<Vec<ArrayRef>> {
    let (li, ri): (Vec<u32>, Vec<u32>) = pairs.into_iter().unzip();
    let (li, ri) = (UInt32Array::from(li), UInt32Array::from(ri));
    output_columns(cfg, join)
        .iter()
        .map(|(is_left, src, _)| {
            let (batch, idx) = if *is_left { (left, &li) } else { (right, &ri) };
            let c = batch
                .column_by_name(src)
                .ok_or_else(|| Error::Internal(format!("no `{src}`")))?;
            Ok(take(c.as_ref(), idx, None)?)
        })
        .collect()
}

impl Planner for JoinPlanner<'_> {
    fn app_ids(&self) -> Vec<String> {
        self.cfg.sources().iter().map(|t| self.app_id(t)).collect()
    }

    async fn side_writes(&mut self) -> Result<()> {
        if self.letters.is_empty() {
            return Ok(());
        }
        let mut dl = TableHandle::open(self.ctx.lake, self.ctx.dead_letter_table)?;
        write_dead_letters(
            self.ctx.lake,
            &mut dl,
            self.ctx.pipeline,
            self.ctx.settings,
            &self.letters,
            self.ctx.now,
        )
        .await?;
        Ok(())
    }

    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        self.letters.clear();
        self.report = RunReport::default();
        let consumed = |table: &str| {
            state
                .committed
                .get(&self.app_id(table))
                .and_then(|v| u64::try_from(*v).ok())
        };
        let (lcfg, rcfg) = (&self.join.left, &self.join.right);
        let Some(left) = self.side(lcfg, consumed(&lcfg.table)).await? else {
            self.report.waiting_for = Some(lcfg.table.clone());
            return Ok(None);
        };
        let Some(right) = self.side(rcfg, consumed(&rcfg.table)).await? else {
            self.report.waiting_for = Some(rcfg.table.clone());
            return Ok(None);
        };
        if !left.chunk.advanced() && !right.chunk.advanced() {
            return Ok(None);
        }
        let (lower, upper) = (
            i64::try_from(self.join.lower.as_micros()).unwrap_or(i64::MAX),
            i64::try_from(self.join.upper.as_micros()).unwrap_or(i64::MAX),
        );
        let left_ok: Vec<bool> = left.late.iter().map(|l| !l).collect();
        let right_ok: Vec<bool> = right.late.iter().map(|l| !l).collect();
        // new-left x consumed-right: right.time in [left.time - upper, left.time - lower]
        let (r_state, r_state_ok) = self
            .state(&right, &left.new, &left_ok, (-upper, -lower))
            .await?;
        // consumed-left x new-right: left.time in [right.time + lower, right.time + upper]
        let (l_state, l_state_ok) = self
            .state(&left, &right.new, &right_ok, (lower, upper))
            .await?;
        let parts = [
            (
                &left.new.batch,
                &right.new.batch,
                interval_pairs(&left.new, &left_ok, &right.new, &right_ok, lower, upper),
            ),
            (
                &left.new.batch,
                &r_state.batch,
                interval_pairs(&left.new, &left_ok, &r_state, &r_state_ok, lower, upper),
            ),
            (
                &l_state.batch,
                &right.new.batch,
                interval_pairs(&l_state, &l_state_ok, &right.new, &right_ok, lower, upper),
            ),
        ];
        let out_schema = match &state.schema {
            Some(s) => s.clone(),
            None => output_schema(self.cfg, self.join, &left.schema, &right.schema)?,
        };
        let mut batches = Vec::new();
        for (lb, rb, pairs) in parts {
            if pairs.is_empty() {
                continue;
            }
            let cols = pair_columns(self.cfg, self.join, lb, rb, pairs)?
                .into_iter()
                .zip(out_schema.fields())
                .map(|(c, f)| {
                    if c.data_type() == f.data_type() {
                        Ok(c)
                    } else {
                        cast(&c, f.data_type())
                    }
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            batches.push(RecordBatch::try_new(out_schema.clone(), cols).map_err(|e| {
                Error::Schema {
                    table: self.cfg.output.clone(),
                    reason: format!("the join's rows do not fit the output table: {e}"),
                }
            })?);
        }
        let batch = concat_batches(&out_schema, &batches)?;
        // Late rows reach the dead-letter table (the side write, below) before the output
        // records their versions as consumed, so a later run can always tell them apart.
        self.letters = left.letters.iter().chain(&right.letters).cloned().collect();
        let mut txns = Vec::new();
        let mut properties = vec![("lakestream.refine.job".to_string(), self.cfg.job.clone())];
        for side in [&left, &right] {
            if let Some(end) = side.chunk.end {
                txns.push(Transaction::new(self.app_id(&side.cfg.table), end as i64));
            }
            let snapshot = side
                .handle
                .table()
                .snapshot()
                .map_err(|e| Error::storage(&side.cfg.table, e))?;
            properties.push((
                source_id_property(&side.cfg.table),
                snapshot.metadata().id().to_string(),
            ));
        }
        self.report.joined = batch.num_rows();
        self.report.sides = [&left, &right]
            .map(|s| SideReport {
                table: s.cfg.table.clone(),
                from: s.after,
                to: s.chunk.end,
                latest: s.chunk.latest,
                files: s.chunk.files(),
                rows: s.new.len(),
                late: s.late.iter().filter(|l| **l).count(),
            })
            .to_vec();
        Ok(Some(Planned {
            batch,
            schema: out_schema,
            partition_columns: self.cfg.partition_by.clone(),
            txns,
            table_properties: properties,
            commit_if_empty: true,
        }))
    }
}
