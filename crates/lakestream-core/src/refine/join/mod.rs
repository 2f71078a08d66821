//! The interval join (the seed's curated job), one run planned on the checked commit path: read
//! what each source gained since the versions the output's `txn`s record, join new rows with
//! the other side's rows (new-left x all-right + old-left x new-right), dead-letter late rows,
//! and append the pairs together with one `txn` per source in one commit. A concurrent run
//! that committed first makes this one re-plan from the newer `txn`s, so no pair is written
//! twice.
//!
//! - [`rules`]: keys, event times, the lateness rule and interval matching (pure, on Arrow).
//! - [`side`]: one side of a run: its new rows, their verdicts, its consumed rows that match.
//! - [`state`]: a side's consumed rows, read from the source table itself with pruning.
//! - [`output`]: the output table's columns and schema.

pub mod output;
pub mod rules;
mod side;
pub(crate) mod state;

use super::context::{JOB_PROPERTY, RunContext, source_id_property};
use super::report::{JoinCounts, RunCounts, RunReport, SideReport};
use crate::commit::{self, Planned, Planner, TableState};
use crate::dead_letter::{DeadLetter, write_dead_letters};
use crate::error::{Error, Result};
use crate::table::TableHandle;
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::compute::{cast, concat_batches};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::Transaction;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::join::IntervalJoinConfig;
use output::{output_schema, pair_columns};
use rules::{Rows, interval_pairs};
use side::Side;

/// Run the join once on the append commit loop (re-planned from newer `txn`s on conflict).
pub(crate) async fn run_once(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    join: &IntervalJoinConfig,
    mut output: TableHandle,
) -> Result<RunReport> {
    let mut planner = JoinPlanner {
        ctx,
        cfg,
        join,
        report: empty_report(),
        letters: vec![],
    };
    let outcome = commit::append(ctx.lake, &mut output, ctx.settings, &mut planner).await?;
    ctx.keep(output); // the next run starts from this commit
    let mut report = planner.report;
    report.output_version = outcome.version;
    report.attempts = outcome.attempts;
    if outcome.version.is_none() {
        report.sides.clear();
        report.counts = RunCounts::Join(JoinCounts::default());
    }
    Ok(report)
}

fn empty_report() -> RunReport {
    RunReport::new(RunCounts::Join(JoinCounts::default()))
}

/// The planner of one run.
pub(crate) struct JoinPlanner<'a> {
    ctx: &'a RunContext<'a>,
    cfg: &'a RefineJob,
    join: &'a IntervalJoinConfig,
    report: RunReport,
    /// Late and future rows of the last plan: the loop's side write, durable before the output
    /// commit records their versions as consumed.
    letters: Vec<DeadLetter>,
}

impl JoinPlanner<'_> {
    fn app_id(&self, table: &str) -> String {
        self.ctx.app_id(&self.cfg.job, table)
    }

    /// The interval bounds in µs.
    fn bounds(&self) -> (i64, i64) {
        (
            i64::try_from(self.join.lower.as_micros()).unwrap_or(i64::MAX),
            i64::try_from(self.join.upper.as_micros()).unwrap_or(i64::MAX),
        )
    }

    /// The output rows of this run: new-left x new-right, new-left x consumed-right and
    /// consumed-left x new-right, in the output's schema (`current`, or the one a new output
    /// gets).
    async fn joined_rows(
        &self,
        left: &Side<'_>,
        right: &Side<'_>,
        current: Option<&SchemaRef>,
    ) -> Result<(RecordBatch, SchemaRef)> {
        let (lower, upper) = self.bounds();
        let left_ok: Vec<bool> = left.late.iter().map(|l| !l).collect();
        let right_ok: Vec<bool> = right.late.iter().map(|l| !l).collect();
        // new-left x consumed-right: right.time in [left.time - upper, left.time - lower]
        let (r_state, r_state_ok) = self
            .consumed_rows(right, &left.new, &left_ok, (-upper, -lower))
            .await?;
        // consumed-left x new-right: left.time in [right.time + lower, right.time + upper]
        let (l_state, l_state_ok) = self
            .consumed_rows(left, &right.new, &right_ok, (lower, upper))
            .await?;
        let pairs = |l: &Rows, l_ok: &[bool], r: &Rows, r_ok: &[bool]| {
            interval_pairs(l, l_ok, r, r_ok, lower, upper)
        };
        let parts = [
            (
                &left.new.batch,
                &right.new.batch,
                pairs(&left.new, &left_ok, &right.new, &right_ok),
            ),
            (
                &left.new.batch,
                &r_state.batch,
                pairs(&left.new, &left_ok, &r_state, &r_state_ok),
            ),
            (
                &l_state.batch,
                &right.new.batch,
                pairs(&l_state, &l_state_ok, &right.new, &right_ok),
            ),
        ];
        let out_schema = match current {
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
        Ok((concat_batches(&out_schema, &batches)?, out_schema))
    }
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
        self.report = empty_report();
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
        let (batch, out_schema) = self
            .joined_rows(&left, &right, state.schema.as_ref())
            .await?;
        // Late rows reach the dead-letter table (the side write, below) before the output
        // records their versions as consumed, so a later run can always tell them apart.
        self.letters = left.letters.iter().chain(&right.letters).cloned().collect();
        let mut txns = Vec::new();
        let mut properties = vec![(JOB_PROPERTY.to_string(), self.cfg.job.clone())];
        for side in [&left, &right] {
            if let Some(end) = side.chunk.end {
                txns.push(Transaction::new(self.app_id(&side.cfg.table), end as i64));
            }
            properties.push((source_id_property(&side.cfg.table), side.handle.table_id()?));
        }
        self.report.counts = RunCounts::Join(JoinCounts {
            joined: batch.num_rows(),
        });
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
            set_properties: vec![],
            table_properties: properties,
            commit_if_empty: true,
        }))
    }
}
