//! The scheduled refine function: an EventBridge Scheduler (ScheduleV2) `Input` such as
//! `{"jobs":["curated"]}` (every minute) or `{"jobs":["processed"]}` (hourly) names the jobs
//! (all configured jobs when absent); each runs in dependency order until nothing is new or
//! `max_runs` runs committed. Exactly once per source version (the output's `txn`s), so
//! overlapping or repeated invocations are harmless.
//!
//! [`handle`] is the whole function without the Lambda runtime (the CLI's `lakestream invoke
//! refine` and `lakestream refine` call it too); `main` only builds a [`Refiner`] once and
//! serves.

pub mod report;
pub mod request;

pub use request::Request;

use lakestream_core::refine::cdc::family::all_jobs;
use lakestream_core::refine::{JobReport, RunContext, in_dependency_order, run_job};
use lakestream_core::{Clock, Lake};
use lakestream_formats::config::PipelineConfig;
use lakestream_lambda::FunctionError;
use std::sync::Arc;
use std::time::Duration;

/// What a refine invocation needs, built once per process: the config, its lake and a clock.
pub struct Refiner {
    /// The pipeline config (its `[[refine]]` jobs).
    pub config: PipelineConfig,
    /// The lake the jobs read and write.
    pub lake: Lake,
    /// Processing time (late and future rows are judged against it).
    pub clock: Arc<dyn Clock>,
}

impl Refiner {
    /// Build the lake of `config` (the function's `main` does this once).
    pub fn new(config: PipelineConfig, clock: Arc<dyn Clock>) -> Result<Self, FunctionError> {
        let lake = Lake::new(&config.lake)?;
        Ok(Self {
            config,
            lake,
            clock,
        })
    }
}

/// One job's outcome.
#[derive(Debug, serde::Serialize)]
pub struct JobResult {
    /// The job.
    pub job: String,
    /// Its report, or the error.
    pub outcome: Result<JobReport, String>,
    /// The error can go away by itself (storage, contention): the invocation fails and is
    /// retried; otherwise a human must act (the message says what to do).
    pub retryable: bool,
    /// The job's output table.
    #[serde(skip)]
    pub output: String,
    /// How long the job ran.
    #[serde(skip)]
    pub took: Duration,
    /// When it finished (processing time, epoch milliseconds): the EMF timestamp.
    #[serde(skip)]
    pub finished_at_ms: i64,
}

/// What the function returns: one result per job, in the order they ran (serialized as the
/// list of results).
#[derive(Debug, serde::Serialize)]
#[serde(transparent)]
pub struct RefineResponse {
    /// The jobs' results.
    pub jobs: Vec<JobResult>,
}

impl RefineResponse {
    /// The CloudWatch EMF lines of the jobs that ran (one line per job, `\n`-separated; empty
    /// when none did).
    pub fn metrics_line(&self) -> String {
        self.jobs
            .iter()
            .filter_map(|j| {
                let report = j.outcome.as_ref().ok()?;
                Some(report::metrics_line(
                    report,
                    j.took.as_secs_f64() * 1000.0,
                    j.finished_at_ms,
                ))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The failed jobs as one error (`job: error; ...`), or `None` when every job succeeded.
    pub fn failure(&self) -> Option<FunctionError> {
        let failed: Vec<String> = self
            .jobs
            .iter()
            .filter_map(|r| r.outcome.as_ref().err().map(|e| format!("{}: {e}", r.job)))
            .collect();
        (!failed.is_empty()).then(|| FunctionError::JobsFailed {
            message: failed.join("; "),
            retryable: self.jobs.iter().all(|r| r.outcome.is_ok() || r.retryable),
        })
    }

    /// The invocation's result: the response, or the jobs' failure (the next tick retries
    /// anyway; the error type tells alarms whether a human is needed).
    pub fn into_result(self) -> Result<Self, FunctionError> {
        match self.failure() {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }
}

/// Handle one scheduled invocation: parse the input and [`run`] it. The caller prints
/// [`RefineResponse::metrics_line`], then returns [`RefineResponse::into_result`].
pub async fn handle(
    refiner: &Refiner,
    event: &serde_json::Value,
) -> Result<RefineResponse, FunctionError> {
    run(refiner, &Request::from_event(event)?).await
}

/// Run the request's jobs (configured, and every `[[cdc]]` family table's apply job) in
/// dependency order; a failing job stops the jobs after it that
/// read its output, not the others. An unknown job name is [`FunctionError::BadInput`].
pub async fn run(refiner: &Refiner, req: &Request) -> Result<RefineResponse, FunctionError> {
    let Refiner {
        config,
        lake,
        clock,
    } = refiner;
    let settings = (&config.commit).into();
    let ctx = RunContext::new(config, lake, &settings, clock.now());
    // The configured jobs plus one apply job per table of each `[[cdc]]` family (listed).
    let jobs = all_jobs(lake, config).await?;
    let order =
        in_dependency_order(&jobs, &req.jobs).map_err(|e| FunctionError::BadInput(e.redacted()))?;
    let mut failed_outputs: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for job in order {
        let started = std::time::Instant::now();
        let result = |outcome, retryable| JobResult {
            job: job.job.clone(),
            outcome,
            retryable,
            output: job.output.clone(),
            took: started.elapsed(),
            finished_at_ms: clock.now().timestamp_millis(),
        };
        if job.sources().iter().any(|s| failed_outputs.contains(s)) {
            out.push(result(
                Err("skipped: a job it reads from failed".into()),
                true,
            ));
            failed_outputs.push(&job.output);
            continue;
        }
        match run_job(&ctx, job, req.max_runs).await {
            Ok(report) => {
                tracing::info!(job = %job.job, runs = report.runs.len(), joined = report.joined(), more = report.more, "refine job done");
                out.push(result(Ok(report), false));
            }
            Err(e) => {
                tracing::error!(job = %job.job, error = %e.redacted(), "refine job failed");
                failed_outputs.push(&job.output);
                out.push(result(Err(e.redacted()), e.is_retryable()));
            }
        }
    }
    Ok(RefineResponse { jobs: out })
}
