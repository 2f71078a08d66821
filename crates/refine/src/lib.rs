//! The scheduled refine function: an EventBridge Scheduler (ScheduleV2) `Input` such as
//! `{"jobs":["curated"]}` (every minute) or `{"jobs":["processed"]}` (hourly) names the jobs (all configured jobs when absent); each runs in
//! dependency order until nothing is new or `max_runs` runs committed. Exactly once per source
//! version (the output's `txn`s), so overlapping or repeated invocations are harmless.

use lakestream_core::refine::{JobReport, RunContext, in_dependency_order, run_job};
use lakestream_core::{Clock, Error, Lake};
use lakestream_formats::config::PipelineConfig;
use lakestream_lambda::telemetry::{Metric, emf_line};
use serde::Deserialize;

/// The schedule's input.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Jobs to run; every configured job when absent.
    #[serde(default)]
    pub jobs: Vec<String>,
    /// Committed runs per job per invocation (each bounded by the job's chunk limits).
    #[serde(default = "default_max_runs")]
    pub max_runs: usize,
}

fn default_max_runs() -> usize {
    20
}

impl Request {
    /// Parse the invocation payload: a ScheduleV2 `Input`, `{}` or a classic scheduled event
    /// (both run every job).
    pub fn from_event(v: &serde_json::Value) -> Result<Self, String> {
        if v.get("detail-type").and_then(|d| d.as_str()) == Some("Scheduled Event") {
            return Ok(Self {
                max_runs: default_max_runs(),
                ..Default::default()
            });
        }
        serde_json::from_value(v.clone()).map_err(|e| {
            format!("bad refine input ({e}); expected {{\"jobs\":[\"curated\"],\"max_runs\":20}}")
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
}

/// Run the request's jobs in dependency order; a failing job stops the jobs after it that
/// read its output, not the others.
pub async fn run(
    config: &PipelineConfig,
    lake: &Lake,
    req: &Request,
    clock: &dyn Clock,
) -> Result<Vec<JobResult>, Error> {
    let settings = (&config.commit).into();
    let ctx = RunContext::new(config, lake, &settings, clock.now());
    let mut failed_outputs: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for job in in_dependency_order(&config.refine, &req.jobs)? {
        if job.sources().iter().any(|s| failed_outputs.contains(s)) {
            out.push(JobResult {
                job: job.job.clone(),
                outcome: Err("skipped: a job it reads from failed".into()),
                retryable: true,
            });
            failed_outputs.push(&job.output);
            continue;
        }
        let started = std::time::Instant::now();
        match run_job(&ctx, job, req.max_runs).await {
            Ok(report) => {
                println!(
                    "{}",
                    metrics_line(
                        &report,
                        started.elapsed().as_millis() as f64,
                        clock.now().timestamp_millis()
                    )
                );
                tracing::info!(job = %job.job, runs = report.runs.len(), joined = report.joined(), more = report.more, "refine job done");
                out.push(JobResult {
                    job: job.job.clone(),
                    outcome: Ok(report),
                    retryable: false,
                });
            }
            Err(e) => {
                tracing::error!(job = %job.job, error = %e.redacted(), "refine job failed");
                failed_outputs.push(&job.output);
                out.push(JobResult {
                    job: job.job.clone(),
                    retryable: e.is_retryable(),
                    outcome: Err(e.redacted()),
                });
            }
        }
    }
    Ok(out)
}

/// One EMF line per job (dimensions `Function`, `Job`): rows read and late per side, rows
/// joined, runs, and the versions still unread (lag).
pub fn metrics_line(r: &JobReport, duration_ms: f64, ts: i64) -> String {
    let totals = r.totals();
    let side = |i: usize| totals.get(i).cloned().unwrap_or_default();
    let (l, rt) = (side(0), side(1));
    let lag =
        |s: &lakestream_core::refine::SideReport| s.latest.saturating_sub(s.to.unwrap_or(0)) as f64;
    emf_line(
        "Lakestream",
        &[("Function", "refine"), ("Job", &r.job)],
        &[
            Metric::new("Runs", "Count", r.runs.len() as f64),
            Metric::new("LeftRowsRead", "Count", l.rows as f64),
            Metric::new("RightRowsRead", "Count", rt.rows as f64),
            Metric::new("LateRows", "Count", (l.late + rt.late) as f64),
            Metric::new("RowsJoined", "Count", r.joined() as f64),
            Metric::new("KeysInserted", "Count", r.upserted()[0] as f64),
            Metric::new("KeysUpdated", "Count", r.upserted()[1] as f64),
            Metric::new("KeysDeleted", "Count", r.upserted()[2] as f64),
            Metric::new("OlderRowsIgnored", "Count", r.upserted()[3] as f64),
            Metric::new("VersionsBehind", "Count", lag(&l).max(lag(&rt))),
            Metric::new("DurationMs", "Milliseconds", duration_ms),
        ],
        ts,
    )
}
