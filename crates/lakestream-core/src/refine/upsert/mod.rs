//! The keyed latest-wins upsert (the seed's processed job; CDC with deletes), copy-on-write and
//! without DataFusion (ARCHITECTURE.md "Refine: upsert"): the source's next chunk encoded
//! ([`IncomingRows`]) and planned into one commit by the shared keyed machinery
//! ([`keyed::plan`](super::keyed::plan), step by step there), on the keyed commit loop
//! ([`run_keyed`]).

use super::context::RunContext;
use super::keyed::incoming::IncomingRows;
use super::keyed::rewrite::Sweep;
use super::keyed::{Expiry, KeyedPlan, Planned, empty_report, plan, run_keyed};
use super::report::RunReport;
use super::source::read_next;
use crate::commit::TableState;
use crate::error::Result;
use crate::table::TableHandle;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::upsert::UpsertConfig;

/// The upsert's plans.
struct UpsertPlan<'a, 'c> {
    ctx: &'a RunContext<'c>,
    cfg: &'a RefineJob,
    u: &'a UpsertConfig,
}

impl KeyedPlan for UpsertPlan<'_, '_> {
    async fn plan(
        &mut self,
        output: &TableHandle,
        state: &TableState,
        consumed: Option<u64>,
    ) -> Result<Planned> {
        let (ctx, cfg, u) = (self.ctx, self.cfg, self.u);
        let mut report = empty_report();
        let Some(read) = read_next(ctx, cfg, &u.source, consumed).await? else {
            report.waiting_for = Some(u.source.clone());
            return Ok(Planned::Nothing(report));
        };
        if !read.chunk.advanced() {
            return Ok(Planned::Nothing(report));
        }
        let partition_columns = if state.version.is_some() {
            output.partition_columns()?
        } else {
            cfg.partition_by.clone()
        };
        let src = IncomingRows::new(cfg, u, read, &partition_columns)?;
        let (plan, _) = plan(ctx, &src, output, state, consumed, &Sweep::default()).await?;
        Ok(Planned::Commit(Box::new(plan)))
    }
}

/// Run the upsert once on the one commit loop (re-planned from a fresh snapshot on conflict).
pub(crate) async fn run_once(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    u: &UpsertConfig,
    output: TableHandle,
) -> Result<RunReport> {
    let app = ctx.app_id(&cfg.job, &u.source);
    let expire = u.op.is_some().then_some(Expiry {
        retention: u.tombstone_retention,
        horizon: None,
    });
    run_keyed(
        ctx,
        &cfg.job,
        app,
        UpsertPlan { ctx, cfg, u },
        output,
        expire,
    )
    .await
}
