//! The refine function: runs refine jobs exactly once per source version (the output's
//! `txn`s), so overlapping, repeated or redelivered invocations are harmless. Two triggers:
//! - **notices** (an SQS event from the refine FIFO queue): an ingest function committed to
//!   tables these jobs read; the jobs run within seconds, then every job reading what they
//!   wrote (processed after curated), in dependency order. Notices of one job coalesce: they
//!   share its message group, so the ones that piled up during a run arrive as one batch;
//! - **schedule ticks** (an EventBridge Scheduler `Input` such as `{"jobs":["curated"]}`, all
//!   jobs when absent): the safety net for a lost notice, checking each job's sources with one
//!   HEAD each when the process already saw them ([`due`]).
//!
//! One invocation handles every due job within a time budget (the deadline less
//! [`RefineSettings::reserve`]); a job not reached is *deferred* (its notices go back to the
//! queue, the schedule also finds it). Tables are kept warm across invocations.
//!
//! [`handle`] is the whole function without the Lambda runtime (the CLI's `lakestream invoke
//! refine` and `lakestream refine` call it too); `main` only builds a [`Refiner`] once and
//! serves.

mod assess;
pub mod due;
mod hold;
pub mod listing;
pub mod memory;
pub mod report;
pub mod request;
mod response;

pub use request::{Notices, Request, Trigger};
pub use response::{JobResult, JobState, RefineResponse};

use chrono::{DateTime, Utc};
use due::{Hints, Known, Probe, Progress};
use lakestream_core::refine::{JobReport, RunContext, in_dependency_order, run_job_until};
use lakestream_core::table::WarmHandles;
use lakestream_core::{Clock, Lake};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::refine::RefineJob;
use lakestream_lambda::FunctionError;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the function spends an invocation (each job's freshness target is in the config:
/// [`PipelineConfig::freshness_of_job`]).
#[derive(Debug, Clone, Copy)]
pub struct RefineSettings {
    /// Kept free before the invocation's deadline: no job and no run starts later.
    pub reserve: Duration,
    /// How long the listing of the `[[cdc]]` families' tables is kept for schedule ticks (a
    /// notice names its table, so a new table runs at once; the listing finds the tables whose
    /// notices were lost).
    pub listing_ttl: chrono::TimeDelta,
    /// Which per-job values are CloudWatch metrics ([`report::JobMetrics`]).
    pub job_metrics: report::JobMetrics,
    /// Whether a due job holds its changes while its freshness target leaves room (the
    /// function: `true`; `lakestream refine`, a one-off run to the end: `false`).
    pub holds: bool,
}

impl Default for RefineSettings {
    fn default() -> Self {
        Self {
            reserve: Duration::from_secs(20),
            listing_ttl: chrono::TimeDelta::minutes(15),
            job_metrics: report::JobMetrics::Behind,
            holds: true,
        }
    }
}

/// What a refine invocation needs, built once per process: the config, its lake, a clock, and
/// what is kept warm across invocations (table handles, what each job saw, the family listing).
pub struct Refiner {
    /// The pipeline config (its `[[refine]]` jobs and `[[cdc]]` families).
    pub config: PipelineConfig,
    /// The lake the jobs read and write.
    pub lake: Lake,
    /// Processing time (late and future rows are judged against it).
    pub clock: Arc<dyn Clock>,
    /// Budget and freshness target.
    pub settings: RefineSettings,
    warm: WarmHandles,
    progress: Progress,
    listed: listing::Listing,
}

impl Refiner {
    /// Build the lake of `config` (the function's `main` does this once).
    pub fn new(config: PipelineConfig, clock: Arc<dyn Clock>) -> Result<Self, FunctionError> {
        let lake = Lake::new(&config.lake)?;
        Ok(Self::with_lake(config, lake, clock))
    }

    /// A refiner on an already opened lake (the CLI's).
    pub fn with_lake(config: PipelineConfig, lake: Lake, clock: Arc<dyn Clock>) -> Self {
        Self {
            config,
            lake,
            clock,
            settings: RefineSettings::default(),
            warm: WarmHandles::new(),
            progress: Progress::default(),
            listed: listing::Listing::default(),
        }
    }

    /// Every job: the configured ones plus one apply job per `[[cdc]]` family table (the
    /// listing kept for [`RefineSettings::listing_ttl`], see [`listing`]).
    async fn all_jobs(&self, now: DateTime<Utc>) -> Result<Vec<RefineJob>, FunctionError> {
        if self.config.cdc.is_empty() {
            return Ok(self.config.refine.clone());
        }
        let jobs = self
            .listed
            .jobs(&self.lake, &self.config, self.settings.listing_ttl, now)
            .await?;
        Ok(jobs)
    }
}

/// Handle one invocation with no time budget (the CLI): [`handle_until`].
pub async fn handle(
    refiner: &Refiner,
    event: &serde_json::Value,
) -> Result<RefineResponse, FunctionError> {
    handle_until(refiner, event, None).await
}

/// Handle one invocation: parse the trigger and [`run_trigger`] it, starting nothing after
/// `until`. The caller prints [`RefineResponse::metrics_line`], then returns
/// [`RefineResponse::into_result`].
pub async fn handle_until(
    refiner: &Refiner,
    event: &serde_json::Value,
    until: Option<Instant>,
) -> Result<RefineResponse, FunctionError> {
    run_trigger(refiner, &Trigger::from_event(event)?, until).await
}

/// Run the request's jobs (a schedule tick's; no time budget).
pub async fn run(refiner: &Refiner, req: &Request) -> Result<RefineResponse, FunctionError> {
    run_trigger(refiner, &Trigger::Schedule(req.clone()), None).await
}

/// The time budget of an invocation whose deadline is `deadline`: `reserve` before it.
pub fn budget_until(deadline: std::time::SystemTime, reserve: Duration) -> Instant {
    let left = deadline
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    Instant::now() + left.saturating_sub(reserve)
}

/// What to run for a trigger: the jobs, the ones asked for, what is known, how to probe.
struct Plan {
    jobs: Vec<RefineJob>,
    named: Vec<String>,
    hints: Hints,
    probe: Probe,
    max_runs: usize,
}

/// The plan of a batch of notices: the notices' jobs (found from their tables, no listing) and
/// every job reading their outputs, transitively; a notice of a job the config no longer has
/// is dropped with a warning.
fn notice_plan(config: &PipelineConfig, batch: &Notices) -> Plan {
    let mut jobs = config.refine.clone();
    let mut named: Vec<String> = Vec::new();
    let mut hints = Hints::new();
    for (_, n) in &batch.notices {
        let Some(job) = config.job_for_notice(&n.job, &n.table) else {
            tracing::warn!(job = %n.job, table = %n.table, "notice for a job that does not read the table (config changed?); dropped");
            continue;
        };
        if !jobs.iter().any(|j| j.job == job.job) {
            jobs.push(job);
        }
        if !named.contains(&n.job) {
            named.push(n.job.clone());
        }
        hints
            .entry(n.table.clone())
            .or_insert_with(|| Known::new(n.version, None))
            // A commit time before 1970 is not one (the lag would be decades).
            .add(n.version, (n.committed_ms > 0).then_some(n.committed_ms));
    }
    // Readers of what the named jobs write, transitively.
    loop {
        let outputs: HashSet<&str> = jobs
            .iter()
            .filter(|j| named.contains(&j.job))
            .map(|j| j.output.as_str())
            .collect();
        let more: Vec<String> = jobs
            .iter()
            .filter(|j| !named.contains(&j.job) && j.sources().iter().any(|s| outputs.contains(s)))
            .map(|j| j.job.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        named.extend(more);
    }
    Plan {
        jobs,
        named,
        hints,
        probe: Probe::HintsOnly,
        max_runs: request::DEFAULT_MAX_RUNS,
    }
}

/// Run a trigger's jobs in dependency order, skipping those with nothing new, until `until`;
/// a failing job stops the jobs after it that read its output, not the others. An unknown job
/// name in a schedule input is [`FunctionError::BadInput`].
pub async fn run_trigger(
    refiner: &Refiner,
    trigger: &Trigger,
    until: Option<Instant>,
) -> Result<RefineResponse, FunctionError> {
    let clock = &refiner.clock;
    let mut plan = match trigger {
        Trigger::Schedule(req) => Plan {
            jobs: refiner.all_jobs(clock.now()).await?,
            named: req.jobs.clone(),
            hints: Hints::new(),
            probe: Probe::Heads,
            max_runs: req.max_runs,
        },
        Trigger::Notices(batch) => notice_plan(&refiner.config, batch),
    };
    let settings = (&refiner.config.commit).into();
    let ctx = RunContext::new(&refiner.config, &refiner.lake, &settings, clock.now())
        .with_warm(&refiner.warm);
    let order = if matches!(trigger, Trigger::Notices(_)) && plan.named.is_empty() {
        Vec::new()
    } else {
        in_dependency_order(&plan.jobs, &plan.named)
            .map_err(|e| FunctionError::BadInput(e.redacted()))?
    };
    let how = |job: &RefineJob| HowToRun {
        probe: plan.probe,
        max_runs: plan.max_runs,
        until,
        can_hold: refiner.settings.holds && hold::can_hold(trigger, &job.job),
    };
    let mut assessed = assess::assess_independent(refiner, &ctx, &order, &plan.hints, how).await;
    let mut failed_outputs: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for job in order {
        let started = Instant::now();
        let state = if until.is_some_and(|u| Instant::now() >= u) {
            JobState::Deferred
        } else if job.sources().iter().any(|s| failed_outputs.contains(s)) {
            failed_outputs.push(&job.output);
            JobState::UpstreamFailed
        } else {
            let ahead = assessed.remove(&job.job);
            let state = run_if_due(refiner, &ctx, job, &mut plan.hints, how(job), ahead).await;
            if matches!(state, JobState::Failed { .. }) {
                failed_outputs.push(&job.output);
            }
            state
        };
        let target = refiner.config.freshness_of_job(job).target();
        out.push(JobResult::finished(
            job,
            target,
            state,
            started,
            clock.now(),
        ));
    }
    Ok(RefineResponse::of(
        trigger,
        out,
        refiner.settings.job_metrics,
    ))
}

/// How a trigger runs its jobs: how to probe whether one is due, at most how many runs each,
/// no run started after `until`, and whether the job may hold for its freshness target.
#[derive(Clone, Copy)]
pub(crate) struct HowToRun {
    probe: Probe,
    max_runs: usize,
    until: Option<Instant>,
    can_hold: bool,
}

/// Run `job` when it has something new ([`assess::assess`], or as `assessed` ahead), then
/// record what it read and, in `hints`, the output version it committed (for the jobs reading
/// it).
async fn run_if_due(
    refiner: &Refiner,
    ctx: &RunContext<'_>,
    job: &RefineJob,
    hints: &mut Hints,
    how: HowToRun,
    assessed: Option<assess::Assessed>,
) -> JobState {
    let assessed = match assessed {
        Some(a) => a,
        None => assess::assess(refiner, ctx, job, hints, how).await,
    };
    let (mut observed, new, now) = match assessed {
        assess::Assessed::Settled(state) => return state,
        assess::Assessed::Run { observed, new, now } => (observed, new, now),
    };
    let clock = &refiner.clock;
    match run_observed(refiner, ctx, job, &mut observed, now, how).await {
        Ok(report) => {
            tracing::info!(job = %job.job, runs = report.runs.len(), joined = report.joined(), more = report.more, "refine job done");
            record_progress(refiner, job, &observed, &report);
            if let Some(v) = report.runs.last().and_then(|r| r.output_version) {
                hints.insert(
                    job.output.clone(),
                    Known::new(v, Some(clock.now().timestamp_millis())),
                );
            }
            // The lag starts at the oldest change the run read (a version named again after
            // it was applied is not one).
            let oldest_ms = report.runs.first().and_then(|r| {
                new.oldest_read(r.sides.iter().map(|s| (s.table.as_str(), s.from, s.latest)))
            });
            JobState::Ran { report, oldest_ms }
        }
        Err(e) => {
            tracing::error!(job = %job.job, error = %e.redacted(), "refine job failed");
            refiner.progress.forget(&job.job);
            JobState::Failed {
                error: e.redacted(),
                retryable: e.is_retryable(),
                oldest_ms: new.oldest(),
            }
        }
    }
}

/// Run `job` on sources at least as new as `observed` (on first sight, what they hold `now`
/// is added to it: what this run is sure to cover).
async fn run_observed(
    refiner: &Refiner,
    ctx: &RunContext<'_>,
    job: &RefineJob,
    observed: &mut HashMap<String, u64>,
    now: DateTime<Utc>,
    how: HowToRun,
) -> lakestream_core::Result<JobReport> {
    // First sight: what the sources hold now is what this run is sure to cover. Else what was
    // observed is what the run must see: a snapshot another job loaded earlier in this
    // invocation may be older than a version the probe found. The output and the sources are
    // loaded together (one wait at S3); the run takes the output's load as it is
    // (`RunContext::load_output`), as it does the hold decision's.
    let first_sight = !refiner.progress.knows(&job.job, now);
    let sources = job.sources();
    let (output, loaded) = futures::join!(
        ctx.load_output(&job.output),
        futures::future::join_all(
            sources
                .iter()
                .map(|s| ctx.load_source_at_least(s, observed.get(*s).copied()))
        )
    );
    for (s, h) in sources.iter().zip(loaded) {
        let h = h?;
        if first_sight && let Some(v) = h.version() {
            observed.insert(s.to_string(), v);
        }
    }
    output?;
    run_job_until(ctx, job, how.max_runs, how.until).await
}

/// Record what a run of `job` that succeeded read: a job that caught up remembers the versions
/// `observed` and read (and its sources' table ids), so the next trigger can skip it; one that
/// did not (more to read, or waiting for a source) is forgotten, so it runs again.
fn record_progress(
    refiner: &Refiner,
    job: &RefineJob,
    observed: &HashMap<String, u64>,
    report: &JobReport,
) {
    if report.more || report.waiting_for.is_some() {
        refiner.progress.forget(&job.job);
        return;
    }
    let mut read: Vec<(String, u64)> = report
        .runs
        .last()
        .map(|r| {
            r.sides
                .iter()
                .filter_map(|s| Some((s.table.clone(), s.to?)))
                .collect()
        })
        .unwrap_or_default();
    // A source the run did not read (nothing new in it): what this process loaded of it, so an
    // observed version counts up to that (never past it: a forged notice's version).
    for s in job.sources() {
        if !read.iter().any(|(t, _)| t == s)
            && let Some(v) = refiner.warm.version(s)
        {
            read.push((s.to_string(), v));
        }
    }
    refiner.progress.ran_to_end(
        &job.job,
        observed,
        &read,
        source_ids(refiner, job),
        refiner.clock.now(),
    );
}

/// The table id of each of `job`'s sources this process holds a handle on.
pub(crate) fn source_ids(refiner: &Refiner, job: &RefineJob) -> HashMap<String, String> {
    job.sources()
        .iter()
        .filter_map(|s| Some((s.to_string(), refiner.warm.table_id(s)?)))
        .collect()
}
