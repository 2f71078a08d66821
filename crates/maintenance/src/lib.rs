//! The scheduled maintenance function: an EventBridge Scheduler (ScheduleV2) `Input` such as
//! `{"job":"optimize","tables":["raw/order"]}` names the job; with no table named it runs on
//! every table the pipeline writes (topic tables, the dead-letter table, the access-log tables —
//! the `single` one, or every per-bucket one found under the prefix —, refine outputs and CDC
//! tombstone tables; the same list as the CLI's `--all`). Each job is safe to overlap with
//! ingestion and with itself.
//!
//! [`handle`] is the whole function without the Lambda runtime (`lakestream invoke
//! maintenance` calls it too); `main` only builds a [`Maintainer`] once and serves.

mod catalog;
mod jobs;
pub mod request;

pub use jobs::{job_line, table_line};
pub use request::{Job, JobSpec, OptimizeOptions, Request};

use lakestream_core::maintenance::{Readers, refine_readers};
use lakestream_core::{Clock, Lake};
use lakestream_formats::config::PipelineConfig;
use lakestream_lambda::FunctionError;
use std::sync::Arc;

/// Where the manifest job keeps the tables registered: a catalog (Glue, built once in `main`)
/// and the database.
#[derive(Clone)]
pub struct CatalogTarget {
    /// The catalog.
    pub catalog: Arc<dyn lakestream_catalog::Catalog>,
    /// The database (`[catalog].database`, or `LAKESTREAM_CATALOG_DATABASE`).
    pub database: String,
}

/// What a maintenance invocation needs, built once per process: the config, its lake and a
/// clock.
pub struct Maintainer {
    /// The pipeline config (which tables it writes, what refine jobs read).
    pub config: PipelineConfig,
    /// The lake the jobs maintain.
    pub lake: Lake,
    /// Retention windows are measured against it.
    pub clock: Arc<dyn Clock>,
    /// The catalog the manifest job syncs after writing each table's manifests; none: no sync.
    pub catalog: Option<CatalogTarget>,
}

impl Maintainer {
    /// Build the lake of `config` (the function's `main` does this once).
    pub fn new(config: PipelineConfig, clock: Arc<dyn Clock>) -> Result<Self, FunctionError> {
        let lake = Lake::new(&config.lake)?;
        Ok(Self {
            config,
            lake,
            clock,
            catalog: None,
        })
    }
}

/// One job on one table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobResult {
    /// Table.
    pub table: String,
    /// Job.
    pub job: Job,
    /// The job's report, or the error.
    pub outcome: Result<serde_json::Value, String>,
    /// How long the job ran and when it finished; `None` for entries that are reported but
    /// were not run (no EMF line). Serialized as `duration_ms` (0 when not run).
    #[serde(rename = "duration_ms", serialize_with = "duration_ms")]
    pub ran: Option<Ran>,
}

/// A job that ran on its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    /// Wall time.
    pub duration_ms: u64,
    /// When the job finished (epoch milliseconds), the EMF timestamp.
    pub finished_at_ms: i64,
}

fn duration_ms<S: serde::Serializer>(ran: &Option<Ran>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(ran.map_or(0, |r| r.duration_ms))
}

/// What the function returns: one result per table (serialized as the list of results).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(transparent)]
pub struct MaintenanceResponse {
    /// The results.
    pub results: Vec<JobResult>,
}

impl MaintenanceResponse {
    /// The log lines (`\n`-separated): one per table the job ran on successfully, its values
    /// as properties (logged, not billed), then one EMF line per job with the values summed
    /// over those tables (the custom metrics: per job, not per table).
    pub fn metrics_line(&self) -> String {
        let mut lines = Vec::new();
        let mut per_job: Vec<(request::Job, Vec<_>, i64)> = Vec::new();
        for r in &self.results {
            let (Ok(report), Some(ran)) = (r.outcome.as_ref(), r.ran) else {
                continue;
            };
            let ts = ran.finished_at_ms;
            lines.push(table_line(r.job, &r.table, report, ran.duration_ms, ts));
            let values = jobs::table_values(report, ran.duration_ms);
            match per_job.iter_mut().find(|(j, _, _)| *j == r.job) {
                Some((_, v, at)) => {
                    v.push(values);
                    *at = (*at).max(ts);
                }
                None => per_job.push((r.job, vec![values], ts)),
            }
        }
        for (job, values, ts) in per_job {
            lines.push(job_line(job, &values, ts));
        }
        lines.join("\n")
    }

    /// The failed tables as one error, or `None` when every table succeeded.
    pub fn failure(&self) -> Option<FunctionError> {
        failures(&self.results).map(FunctionError::MaintenanceFailed)
    }

    /// The invocation's result: the response, or `Lakestream.MaintenanceFailed` when a table's
    /// job failed (scheduled invocations are retried twice by Lambda; every job is idempotent).
    pub fn into_result(self) -> Result<Self, FunctionError> {
        match self.failure() {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }
}

/// Handle one scheduled invocation: parse the input and [`run`] it. The caller prints
/// [`MaintenanceResponse::metrics_line`], then returns [`MaintenanceResponse::into_result`].
pub async fn handle(
    maintainer: &Maintainer,
    event: &serde_json::Value,
) -> Result<MaintenanceResponse, FunctionError> {
    let req = Request::from_event(event)?;
    let Maintainer {
        config,
        lake,
        clock,
        catalog,
    } = maintainer;
    Ok(MaintenanceResponse {
        results: run(config, lake, &req, clock.clone(), catalog.as_ref()).await,
    })
}

/// The failed tables of a run as one message (`table: error; ...`), or `None` when every table
/// succeeded: the function's `Lakestream.MaintenanceFailed` diagnostic and the CLI's error.
pub fn failures(results: &[JobResult]) -> Option<String> {
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| {
            r.outcome
                .as_ref()
                .err()
                .map(|e| format!("{}: {e}", r.table))
        })
        .collect();
    (!failed.is_empty()).then(|| failed.join("; "))
}

/// Tables a job without `tables` runs on: every table the pipeline writes
/// ([`lakestream_core::maintenance::maintained_tables`], the list `lakestream optimize --all`
/// and the other CLI maintenance commands use too), sorted.
pub async fn all_tables(
    config: &PipelineConfig,
    lake: &Lake,
) -> lakestream_core::Result<Vec<String>> {
    Ok(
        lakestream_core::maintenance::maintained_tables(config, lake)
            .await?
            .into_iter()
            .map(|t| t.name)
            .collect(),
    )
}

/// Run a request; one result per table (a failing table does not stop the others). With a
/// `catalog`, the manifest job then syncs each table `[catalog]` selects into it.
pub async fn run(
    config: &PipelineConfig,
    lake: &Lake,
    req: &Request,
    clock: Arc<dyn Clock>,
    catalog: Option<&CatalogTarget>,
) -> Vec<JobResult> {
    let (tables, skipped) = match &req.tables {
        Some(t) => (t.clone(), Vec::new()),
        None => {
            match lakestream_core::maintenance::maintained_tables_and_skipped(config, lake).await {
                Ok((t, skipped)) => (t.into_iter().map(|t| t.name).collect(), skipped),
                // Listing the access-log tables failed: fail the invocation (Lambda retries it)
                // rather than report success for a schedule that skipped tables.
                Err(e) => {
                    let e = e.redacted();
                    tracing::error!(job = ?req.kind(), error = %e, "listing the tables failed");
                    return vec![JobResult {
                        table: config.access_logs.table_prefix.clone(),
                        job: req.kind(),
                        outcome: Err(format!("listing the pipeline's tables: {e}")),
                        ran: None,
                    }];
                }
            }
        }
    };
    // What the refine jobs consumed, read once per run: vacuum and log cleanup keep what they
    // still need. If it cannot be read, neither deletes anything.
    let readers: Result<Readers, String> = match req.kind() {
        Job::Vacuum | Job::Checkpoint => refine_readers(lake, config).await.map_err(|e| {
            format!(
                "cannot read what the refine jobs consumed ({}); nothing was deleted",
                e.redacted()
            )
        }),
        Job::Optimize | Job::Manifest => Ok(Readers::new()),
    };
    let catalog = match catalog {
        Some(c) if req.kind() == Job::Manifest => {
            Some(catalog::CatalogStep::prepare(c, config, &tables, req.dry_run).await)
        }
        _ => None,
    };
    let mut out = Vec::with_capacity(tables.len());
    for table in tables {
        let started = std::time::Instant::now();
        let mut outcome = match &readers {
            Ok(r) => {
                let r = r.get(&table).map(Vec::as_slice).unwrap_or_default();
                jobs::run_one(lake, &table, req, clock.clone(), r).await
            }
            Err(e) => Err(e.clone()),
        };
        if let (Some(step), Ok(report)) = (&catalog, &mut outcome)
            && let Err(e) = step.sync(lake, &table, report).await
        {
            outcome = Err(e);
        }
        let duration_ms = started.elapsed().as_millis() as u64;
        match &outcome {
            Ok(v) => {
                tracing::info!(table = %table, job = ?req.kind(), report = %v, "maintenance done")
            }
            Err(e) => {
                tracing::error!(table = %table, job = ?req.kind(), error = %e, "maintenance failed")
            }
        }
        out.push(JobResult {
            table,
            job: req.kind(),
            outcome,
            ran: Some(Ran {
                duration_ms,
                finished_at_ms: clock.now().timestamp_millis(),
            }),
        });
    }
    // Folders under the access-log prefix whose name cannot be a table (warned when listed):
    // reported, not maintained, and not a failure of the run.
    out.extend(skipped.into_iter().map(|s| JobResult {
        outcome: Ok(serde_json::json!({"table": s.name, "skipped": s.reason})),
        table: s.name,
        job: req.kind(),
        ran: None,
    }));
    out
}
