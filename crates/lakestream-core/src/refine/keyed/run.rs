//! The one commit loop of a keyed run (the upsert and the CDC SCD1 apply): a [`KeyedPlan`]
//! writes data files from a snapshot, the winning deletes' tombstones are the side write
//! (durable before the output commit), and after a commit lands old tombstones expire.

use super::tombstones::{self, Deletes};
use super::{Planned, empty_report};
use crate::commit::{ChangePlanner, Proposal, TableState, run};
use crate::error::Result;
use crate::refine::context::RunContext;
use crate::refine::report::RunReport;
use crate::table::TableHandle;

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
/// data files only; the tombstones of winning deletes are the side write, durable before the
/// output commit (and repeated after a re-plan: writing one twice is harmless).
struct KeyedPlanner<'a, 'c, P> {
    ctx: &'a RunContext<'c>,
    job: &'a str,
    app: String,
    inner: P,
    tombstones: Option<Deletes>,
    report: RunReport,
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
        match self.inner.plan(output, state, consumed).await? {
            Planned::Commit(p) => {
                let p = *p;
                self.tombstones = p.tombstones;
                self.report = p.report;
                Ok(Some(p.proposal))
            }
            Planned::Nothing(report) => {
                self.tombstones = None;
                self.report = report;
                Ok(None)
            }
        }
    }

    async fn side_writes(&mut self, _: &Proposal) -> Result<()> {
        let Some(d) = &self.tombstones else {
            return Ok(());
        };
        d.write(self.ctx, self.job).await
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
        tombstones: None,
        report: empty_report(),
    };
    let ran = run(&mut output, ctx.settings, &mut planner).await?;
    // The next run starts from this run's commit (no reading it back).
    ctx.keep(output);
    let mut report = planner.report;
    report.attempts = ran.attempts;
    if let Some(landed) = ran.landed {
        report.output_version = Some(landed.version);
        if let Some(Expiry { retention, horizon }) = expire {
            let tombs = tombstones::table_name(job);
            super::expiry::expire(ctx, &tombs, retention, horizon).await?;
        }
    }
    Ok(report)
}
