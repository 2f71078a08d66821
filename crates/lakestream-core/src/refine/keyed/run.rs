//! The one commit loop of a keyed run (the upsert and the CDC SCD1 apply): a [`KeyedPlan`]
//! writes data files from a snapshot; the winning deletes' tombstones go into the output
//! commit ([`pending`]: the side write then only sets the output's anchor once) or, for a new
//! output or a chunk too large, to the tombstone table as the side write (durable before the
//! output commit); after a commit lands, pending tombstones are consolidated when due and old
//! tombstones expire.

use super::pending;
use super::tombstone_table;
use super::tombstones::{self, Deletes};
use super::{Planned, empty_report};
use crate::commit::{ChangePlanner, Proposal, TableState, run};
use crate::error::Result;
use crate::refine::context::RunContext;
use crate::refine::report::RunReport;
use crate::table::TableHandle;
use deltalake::arrow::array::RecordBatch;

/// Plans one commit of a keyed run (the source consumed up to `consumed`); writes data files
/// only.
#[allow(async_fn_in_trait)]
pub(crate) trait KeyedPlan {
    /// Plan from the output at `state`.
    async fn plan(
        &mut self,
        output: &TableHandle,
        state: &TableState,
        consumed: Option<u64>,
    ) -> Result<Planned>;
}

/// A keyed run on the one commit loop: `plan` reads the source chunk and the output and writes
/// data files only; the tombstones of winning deletes go into the output commit or, as the
/// side write, are durable before it (and repeated after a re-plan: writing one twice is
/// harmless).
struct KeyedPlanner<'a, 'c, P> {
    ctx: &'a RunContext<'c>,
    job: &'a str,
    app: String,
    inner: P,
    /// The side write before the output commit.
    side: Side,
    /// The last plan found the output anchored or anchors it: tombstones may be pending.
    anchored: bool,
    report: RunReport,
}

/// What must be durable in the tombstone table before the output commit.
enum Side {
    /// Nothing.
    Nothing,
    /// The chunk's tombstones (a new output, or too large to go inline).
    Tombstones(Deletes),
    /// The output's anchor (`output id`, the plan's read version), with the tombstone rows
    /// whose columns a new tombstone table gets.
    Anchor(RecordBatch, (String, i64)),
}

impl<P: KeyedPlan> ChangePlanner for KeyedPlanner<'_, '_, P> {
    fn app_ids(&self) -> Vec<String> {
        vec![self.app.clone()]
    }

    async fn plan(&mut self, output: &TableHandle, state: &TableState) -> Result<Option<Proposal>> {
        let consumed = state
            .committed
            .get(&self.app)
            .and_then(|v| u64::try_from(*v).ok());
        self.side = Side::Nothing;
        self.anchored = false;
        match self.inner.plan(output, state, consumed).await? {
            Planned::Commit(p) => {
                let mut p = *p;
                self.report = p.report;
                if let Some(deletes) = p.tombstones {
                    self.side = self.place(deletes, output, state, &mut p.proposal)?;
                }
                self.anchored = p.anchored || matches!(self.side, Side::Anchor(..));
                Ok(Some(p.proposal))
            }
            Planned::Nothing(report) => {
                self.report = report;
                Ok(None)
            }
        }
    }

    async fn side_writes(&mut self, _: &Proposal) -> Result<()> {
        match &self.side {
            Side::Nothing => Ok(()),
            Side::Tombstones(d) => d.write(self.ctx, self.job).await,
            Side::Anchor(rows, anchor) => {
                tombstone_table::anchor(self.ctx, self.job, rows, anchor.clone()).await
            }
        }
    }
}

impl<P> KeyedPlanner<'_, '_, P> {
    /// Where the plan's tombstones go: into `proposal`'s `commitInfo` when the output exists
    /// and they fit (then the side write is the output's anchor, unless the tombstone table
    /// holds one), else the side write.
    fn place(
        &self,
        deletes: Deletes,
        output: &TableHandle,
        state: &TableState,
        proposal: &mut Proposal,
    ) -> Result<Side> {
        let (Some(read), true) = (state.version, output.exists()) else {
            return Ok(Side::Tombstones(deletes));
        };
        let Some(rows) = deletes.dated(self.ctx.now)? else {
            return Ok(Side::Nothing);
        };
        let Some(text) = pending::encode(&rows)? else {
            return Ok(Side::Tombstones(deletes));
        };
        let key = pending::COMMIT_INFO_KEY.to_string();
        proposal.change.info.push((key, text.into()));
        let read = i64::try_from(read).unwrap_or(i64::MAX);
        Ok(Side::Anchor(rows, (output.table_id()?, read)))
    }
}

/// How a keyed job's tombstones expire.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expiry {
    /// How long a tombstone is kept (processing time).
    pub retention: std::time::Duration,
    /// CDC: the ordering column whose greatest expired value is kept as the horizon below
    /// which a change for a key without row or tombstone stays out
    /// ([`tombstones::keep_out_forgotten`]), and the column of the tombstones' commit times.
    pub horizon: Option<(&'static str, &'static str)>,
}

/// Run a keyed job once on the one commit loop (re-planned from a fresh snapshot on conflict),
/// consuming its source as `app`; after a commit lands, tombstones older than `expire`'s
/// retention go (CDC: recording the greatest `__seq` removed, [`Expiry::horizon`]).
pub(crate) async fn run_keyed<P: KeyedPlan>(
    ctx: &RunContext<'_>,
    job: &str,
    app: String,
    inner: P,
    mut output: TableHandle,
    expire: Option<Expiry>,
) -> Result<RunReport> {
    let mut planner = KeyedPlanner {
        ctx,
        job,
        app,
        inner,
        side: Side::Nothing,
        anchored: false,
        report: empty_report(),
    };
    let ran = run(&mut output, ctx.settings, &mut planner).await?;
    let mut report = std::mem::replace(&mut planner.report, empty_report());
    report.attempts = ran.attempts;
    if let Some(landed) = &ran.landed
        && planner.anchored
    {
        pending::consolidate_if_due(ctx, job, &output, landed.version).await?;
    }
    // The next run starts from this run's commit (no reading it back).
    ctx.keep(output);
    if let Some(landed) = ran.landed {
        report.output_version = Some(landed.version);
        if let Some(Expiry { retention, horizon }) = expire {
            let tombs = tombstones::table_name(job);
            super::expiry::expire(ctx, &tombs, retention, horizon).await?;
        }
    }
    Ok(report)
}
