//! The scheduled maintenance function: an EventBridge Scheduler (ScheduleV2) `Input` such as
//! `{"job":"optimize","tables":["raw/order"]}` names the job; with no table named it runs on
//! every table the pipeline writes (topic tables, the dead-letter table, the access-log tables —
//! the `single` one, or every per-bucket one found under the prefix —, refine outputs and CDC
//! tombstone tables; the same list as the CLI's `--all`). Each job is safe to overlap with
//! ingestion and with itself.

use lakestream_core::maintenance::{
    CompactOptions, Reader, Readers, VacuumOptions, checkpoint, compact, manifest, refine_readers,
    vacuum,
};
use lakestream_core::{Clock, Lake};
use lakestream_formats::config::PipelineConfig;
use lakestream_lambda::telemetry::{Metric, emf_line};
use serde::Deserialize;
use std::sync::Arc;

/// A maintenance job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Job {
    /// Compact small files.
    Optimize,
    /// Delete unreferenced files past retention.
    Vacuum,
    /// Write a checkpoint when due, clean expired logs.
    Checkpoint,
    /// Regenerate changed symlink manifests.
    Manifest,
}

/// The schedule's input.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The job.
    pub job: Job,
    /// Tables; all configured tables when absent.
    #[serde(default)]
    pub tables: Option<Vec<String>>,
    /// Only report what would happen; every job writes nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Only partitions changed within this many hours (optimize).
    #[serde(default)]
    pub changed_within_hours: Option<i64>,
    /// Stop after rewriting this many MiB (optimize); the rest is picked up next run.
    #[serde(default)]
    pub max_mib: Option<u64>,
    /// Minimum small files in a partition before it is compacted (optimize; default 4).
    #[serde(default)]
    pub min_files: Option<usize>,
}

impl Request {
    /// Parse the invocation payload: a ScheduleV2 `Input`; a classic scheduled event without
    /// input is refused with what to do.
    pub fn from_event(v: &serde_json::Value) -> Result<Self, String> {
        if v.get("detail-type").and_then(|d| d.as_str()) == Some("Scheduled Event") {
            return Err("a scheduled event without input: give the schedule an Input such as {\"job\":\"optimize\"}".into());
        }
        serde_json::from_value(v.clone()).map_err(|e| format!("bad maintenance input ({e}); expected {{\"job\":\"optimize|vacuum|checkpoint|manifest\",\"tables\":[...]}}"))
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
    /// Wall time.
    pub duration_ms: u64,
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

/// Run a request; one result per table (a failing table does not stop the others).
pub async fn run(
    config: &PipelineConfig,
    lake: &Lake,
    req: &Request,
    clock: Arc<dyn Clock>,
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
                    tracing::error!(job = ?req.job, error = %e, "listing the tables failed");
                    return vec![JobResult {
                        table: config.access_logs.table_prefix.clone(),
                        job: req.job,
                        outcome: Err(format!("listing the pipeline's tables: {e}")),
                        duration_ms: 0,
                    }];
                }
            }
        }
    };
    // What the refine jobs consumed, read once per run: vacuum and log cleanup keep what they
    // still need. If it cannot be read, neither deletes anything.
    let readers: Result<Readers, String> = match req.job {
        Job::Vacuum | Job::Checkpoint => refine_readers(lake, config).await.map_err(|e| {
            format!(
                "cannot read what the refine jobs consumed ({}); nothing was deleted",
                e.redacted()
            )
        }),
        Job::Optimize | Job::Manifest => Ok(Readers::new()),
    };
    let mut out = Vec::with_capacity(tables.len());
    for table in tables {
        let started = std::time::Instant::now();
        let outcome = match &readers {
            Ok(r) => {
                let r = r.get(&table).map(Vec::as_slice).unwrap_or_default();
                run_one(lake, &table, req, clock.clone(), r).await
            }
            Err(e) => Err(e.clone()),
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        match &outcome {
            Ok(v) => {
                tracing::info!(table = %table, job = ?req.job, report = %v, "maintenance done");
                println!(
                    "{}",
                    metrics_line(
                        req.job,
                        &table,
                        v,
                        duration_ms,
                        clock.now().timestamp_millis()
                    )
                );
            }
            Err(e) => {
                tracing::error!(table = %table, job = ?req.job, error = %e, "maintenance failed")
            }
        }
        out.push(JobResult {
            table,
            job: req.job,
            outcome,
            duration_ms,
        });
    }
    // Folders under the access-log prefix whose name cannot be a table (warned when listed):
    // reported, not maintained, and not a failure of the run.
    out.extend(skipped.into_iter().map(|s| JobResult {
        outcome: Ok(serde_json::json!({"table": s.name, "skipped": s.reason})),
        table: s.name,
        job: req.job,
        duration_ms: 0,
    }));
    out
}

async fn run_one(
    lake: &Lake,
    table: &str,
    req: &Request,
    clock: Arc<dyn Clock>,
    readers: &[Reader],
) -> Result<serde_json::Value, String> {
    match req.job {
        Job::Optimize => {
            let opts = CompactOptions {
                changed_within: req.changed_within_hours.map(chrono::Duration::hours),
                max_bytes: req.max_mib.map(|m| m << 20),
                min_small_files: req
                    .min_files
                    .unwrap_or(CompactOptions::default().min_small_files),
                dry_run: req.dry_run,
                ..Default::default()
            };
            json(compact(lake, table, &opts, clock.now(), &|_, _| {}).await)
        }
        Job::Vacuum => {
            let opts = VacuumOptions {
                dry_run: req.dry_run,
                readers: readers.to_vec(),
                ..Default::default()
            };
            json(vacuum(lake, table, &opts, clock).await)
        }
        // A dry run reports the version it would describe and writes nothing.
        Job::Checkpoint | Job::Manifest if req.dry_run => {
            match lakestream_core::read::summarize(lake, table).await {
                Ok(Some(s)) => Ok(serde_json::json!({
                    "table": table, "dry_run": true, "version": s.version, "files": s.files,
                })),
                Ok(None) => json::<()>(Err(lakestream_core::Error::TableNotFound(table.into()))),
                Err(e) => Err(e.redacted()),
            }
        }
        Job::Checkpoint => json(checkpoint(lake, table, false, clock.as_ref(), readers).await),
        Job::Manifest => json(manifest(lake, table).await),
    }
}

fn json<T: serde::Serialize>(
    r: Result<T, lakestream_core::Error>,
) -> Result<serde_json::Value, String> {
    match r {
        Ok(v) => serde_json::to_value(v).map_err(|e| e.to_string()),
        // A configured table that nothing has written yet has nothing to maintain.
        Err(lakestream_core::Error::TableNotFound(table)) => {
            Ok(serde_json::json!({"table": table, "skipped": "table does not exist yet"}))
        }
        // Redacted: the message may name an object under `col=value/` (a record value) and
        // reaches the logs, the EMF-adjacent error line and the function's Diagnostic.
        Err(e) => Err(e.redacted()),
    }
}

/// The EMF line of one job on one table.
pub fn metrics_line(
    job: Job,
    table: &str,
    report: &serde_json::Value,
    duration_ms: u64,
    ts: i64,
) -> String {
    let n = |k: &str| report.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let job_name = match job {
        Job::Optimize => "optimize",
        Job::Vacuum => "vacuum",
        Job::Checkpoint => "checkpoint",
        Job::Manifest => "manifest",
    };
    let files_vacuumed = report
        .get("files")
        .and_then(|f| f.as_array())
        .map_or(0.0, |a| a.len() as f64);
    emf_line(
        "Lakestream",
        &[
            ("Function", "maintenance"),
            ("Job", job_name),
            ("Table", table),
        ],
        &[
            Metric::new("FilesBefore", "Count", n("files_before")),
            Metric::new("FilesAfter", "Count", n("files_after")),
            Metric::new("BytesRewritten", "Bytes", n("bytes_rewritten")),
            Metric::new("FilesVacuumed", "Count", files_vacuumed),
            Metric::new("BytesVacuumed", "Bytes", n("bytes")),
            Metric::new("ManifestsWritten", "Count", n("written")),
            Metric::new("DurationMs", "Milliseconds", duration_ms as f64),
        ],
        ts,
    )
}
