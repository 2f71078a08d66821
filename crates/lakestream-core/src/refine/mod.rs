//! Refine jobs: derived tables computed from what source Delta tables gained, exactly once
//! (ARCHITECTURE.md "Refine"). This module runs jobs — one run, a job until nothing is new,
//! several jobs in dependency order — and dispatches each run on the job's kind. Two kinds
//! kinds, each in its own folder (a new kind is a new folder and a new [`JobKind`] variant):
//! the interval join (the seed's curated job), the keyed latest-wins upsert (the seed's
//! processed job; CDC deletes), the CDC apply (SCD1/SCD2) and the incremental aggregate (gold
//! tables).
//!
//! - [`context`]: what a run needs besides the job, and the names of a job's progress
//!   (`txn` appIds, output table properties).
//! - [`consumed`]: what a job's output consumed of each source, and when the oldest version
//!   after that was committed (where a holding job counts from).
//! - [`chunk`]: the one chunk reader (a bounded chunk of whole versions after the consumed
//!   one, through the table layer's commits; each kind interprets the actions its own way).
//! - [`source`]: the incremental Delta source (Spark's Delta-source rules, bounded chunks).
//! - [`report`]: what runs and jobs did, with per-kind counts.
//! - [`skip`]: `--skip-to`, a consumed version recorded without rows.
//! - [`rebuild`]: `--rebuild`, the output emptied and its sources marked unread in one commit.
//! - [`join`]: one interval-join run on the checked commit path.
//! - [`keyed`]: the keyed machinery the upsert, the CDC apply and the aggregate share (target
//!   reads, key encoding, ordering, tombstones, the keyed plan and commit loop).
//! - [`upsert`]: one upsert run (copy-on-write: rewrite files that lose rows, add new rows).
//! - [`cdc`]: one CDC apply run (SCD1 / SCD2, with the change data feed).
//! - [`aggregate`]: one aggregate run (signed changes folded into touched groups).

pub mod aggregate;
pub mod cdc;
pub(crate) mod chunk;
pub mod consumed;
pub mod context;
pub mod join;
pub(crate) mod json_rows;
pub mod keyed;
pub mod rebuild;
pub mod report;
pub mod skip;
pub mod snapshot_limit;
pub mod source;
pub mod upsert;

pub use consumed::{Consumed, consumed};
pub use context::{RunContext, source_app_id, source_id_property};
pub use rebuild::{rebuild, void_truncate};
pub use report::{
    AggregateCounts, JobReport, JoinCounts, RunCounts, RunReport, SideReport, UpsertCounts,
};
pub use skip::skip_to;

use crate::error::{Error, Result};
use crate::table::TableHandle;
use lakestream_formats::refine::{JobKind, RefineJob};

/// Fail when a source was re-created since the output recorded its table id.
async fn check_source_ids(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    output: &TableHandle,
) -> Result<()> {
    let snapshot = output.snapshot()?;
    let recorded = snapshot.metadata().configuration();
    for table in cfg.sources() {
        let Some(expected) = recorded.get(&source_id_property(table)) else {
            continue;
        };
        let h = ctx.load_source(table).await?;
        if !h.exists() {
            continue;
        }
        let id = h.table_id()?;
        if &id != expected {
            return Err(Error::Source {
                job: cfg.job.clone(),
                table: table.to_string(),
                reason: format!(
                    "the table was re-created (table id {id}, the output `{}` was built from {expected}); \
                     its versions no longer mean what the job consumed. Rebuild the output (delete it and \
                     run again) or accept the new table with `lakestream refine {} --skip-to {table}=-1`",
                    cfg.output, cfg.job
                ),
            });
        }
    }
    Ok(())
}

/// One run: read the next chunk of each source and commit what the job's kind makes of it,
/// with one `txn` per source, in one commit.
pub async fn run_once(ctx: &RunContext<'_>, cfg: &RefineJob) -> Result<RunReport> {
    let output = ctx.load_output(&cfg.output).await?;
    if output.exists() {
        check_source_ids(ctx, cfg, &output).await?;
    }
    match &cfg.kind {
        JobKind::Join(join) => join::run_once(ctx, cfg, join, output).await,
        JobKind::Upsert(upsert) => upsert::run_once(ctx, cfg, upsert, output).await,
        JobKind::Cdc(apply)
            if output.exists()
                && cdc::positions::resets_changed(&output, &apply.position_resets)? =>
        {
            // The family's `position_resets` changed: silver's rows were ranked under others,
            // so it is rebuilt from bronze with the new ranks.
            tracing::warn!(job = %cfg.job, "position_resets changed: rebuilding the output from bronze's snapshot");
            rebuild::rebuild(ctx, cfg).await?;
            let output = ctx.load(&cfg.output).await?;
            cdc::run_once(ctx, cfg, apply, output).await
        }
        JobKind::Cdc(apply) => match cdc::run_once(ctx, cfg, apply, output).await {
            // Another writer removed rows from bronze (a GDPR erasure): silver is rebuilt from
            // bronze's snapshot, so it holds exactly what bronze holds now.
            Err(Error::SourceRewritten { version, path, .. }) => {
                tracing::warn!(job = %cfg.job, version, path = %path, "bronze lost rows to another writer: rebuilding the output from its snapshot");
                rebuild::rebuild(ctx, cfg).await?;
                let output = ctx.load(&cfg.output).await?;
                cdc::run_once(ctx, cfg, apply, output).await
            }
            other => other,
        },
        JobKind::Aggregate(a) => aggregate::run_once(ctx, cfg, a, output).await,
    }
}

/// Run `cfg` until nothing is new, at most `max_runs` committed runs.
pub async fn run_job(ctx: &RunContext<'_>, cfg: &RefineJob, max_runs: usize) -> Result<JobReport> {
    run_job_until(ctx, cfg, max_runs, None).await
}

/// [`run_job`], starting no run after `until` (a time budget: the report then says `more`,
/// and the next invocation continues from the last commit).
pub async fn run_job_until(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    max_runs: usize,
    until: Option<std::time::Instant>,
) -> Result<JobReport> {
    let mut report = JobReport {
        job: cfg.job.clone(),
        ..Default::default()
    };
    loop {
        let out_of_time = until.is_some_and(|u| std::time::Instant::now() >= u);
        if report.runs.len() >= max_runs || out_of_time {
            report.more = true;
            break;
        }
        let run = run_once(ctx, cfg).await?;
        if run.waiting_for.is_some() {
            report.waiting_for = run.waiting_for;
            break;
        }
        if run.output_version.is_none() {
            break;
        }
        let done = run.sides.iter().all(|s| s.to == Some(s.latest));
        report.runs.push(run);
        if done {
            break;
        }
    }
    Ok(report)
}

/// The jobs named (all when empty) in dependency order: a job reading another job's output
/// runs after it.
pub fn in_dependency_order<'a>(
    jobs: &'a [RefineJob],
    named: &[String],
) -> Result<Vec<&'a RefineJob>> {
    for n in named {
        if !jobs.iter().any(|j| &j.job == n) {
            let known: Vec<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
            return Err(Error::Config(format!(
                "no refine job `{n}` (configured: {})",
                known.join(", ")
            )));
        }
    }
    let wanted: Vec<&RefineJob> = jobs
        .iter()
        .filter(|j| named.is_empty() || named.contains(&j.job))
        .collect();
    let mut done: Vec<&RefineJob> = Vec::new();
    while done.len() < wanted.len() {
        let next = wanted.iter().find(|j| {
            !done.iter().any(|d| d.job == j.job)
                && j.sources().iter().all(|s| {
                    wanted
                        .iter()
                        .all(|o| o.output != *s || done.iter().any(|d| d.job == o.job))
                })
        });
        match next {
            Some(j) => done.push(j),
            None => {
                return Err(Error::Config(
                    "refine jobs read each other's outputs in a cycle".into(),
                ));
            }
        }
    }
    Ok(done)
}
