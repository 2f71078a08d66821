//! One maintenance job on one table, its report as JSON (the function's response carries it
//! verbatim) or its redacted error; and the EMF line of that job.

use crate::request::{Job, JobSpec, Request};
use lakestream_core::maintenance::{
    CompactOptions, Reader, VacuumOptions, checkpoint, compact, manifest, vacuum,
};
use lakestream_core::{Clock, Lake};
use lakestream_lambda::telemetry::{Metric, emf_line, emf_record};
use std::sync::Arc;

/// Run `req`'s job on `table`; `readers` are the refine jobs reading it (vacuum and log cleanup
/// keep what they still need). A table nothing has written yet is reported as skipped.
pub(crate) async fn run_one(
    lake: &Lake,
    table: &str,
    req: &Request,
    clock: Arc<dyn Clock>,
    readers: &[Reader],
) -> Result<serde_json::Value, String> {
    match &req.job {
        JobSpec::Optimize(o) => {
            let opts = CompactOptions {
                changed_within: o.changed_within_hours.map(chrono::Duration::hours),
                max_bytes: o.max_mib.map(|m| m << 20),
                min_small_files: o
                    .min_files
                    .unwrap_or(CompactOptions::default().min_small_files),
                dry_run: req.dry_run,
                ..Default::default()
            };
            json(compact(lake, table, &opts, clock.now(), &|_, _| {}).await)
        }
        JobSpec::Vacuum => {
            let opts = VacuumOptions {
                dry_run: req.dry_run,
                readers: readers.to_vec(),
                ..Default::default()
            };
            json(vacuum(lake, table, &opts, clock).await)
        }
        // A dry run reports the version it would describe and writes nothing.
        JobSpec::Checkpoint | JobSpec::Manifest if req.dry_run => {
            match lakestream_core::read::summarize(lake, table).await {
                Ok(Some(s)) => Ok(serde_json::json!({
                    "table": table, "dry_run": true, "version": s.version, "files": s.files,
                })),
                Ok(None) => json::<()>(Err(lakestream_core::Error::TableNotFound(table.into()))),
                Err(e) => Err(e.redacted()),
            }
        }
        JobSpec::Checkpoint => json(checkpoint(lake, table, false, clock.as_ref(), readers).await),
        JobSpec::Manifest => json(manifest(lake, table).await),
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

/// The values of one job on one table (FilesBefore, ..., DurationMs).
pub fn table_values(report: &serde_json::Value, duration_ms: u64) -> [Metric; 7] {
    let n = |k: &str| report.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let files_vacuumed = report
        .get("files")
        .and_then(|f| f.as_array())
        .map_or(0.0, |a| a.len() as f64);
    [
        Metric::new("FilesBefore", "Count", n("files_before")),
        Metric::new("FilesAfter", "Count", n("files_after")),
        Metric::new("BytesRewritten", "Bytes", n("bytes_rewritten")),
        Metric::new("FilesVacuumed", "Count", files_vacuumed),
        Metric::new("BytesVacuumed", "Bytes", n("bytes")),
        Metric::new("ManifestsWritten", "Count", n("written")),
        Metric::new("DurationMs", "Milliseconds", duration_ms as f64),
    ]
}

/// The log line of one job on one table: its values as searchable properties, not metrics
/// (a metric per table would cost a custom metric per table and value: ~$4 a table a month).
pub fn table_line(
    job: Job,
    table: &str,
    report: &serde_json::Value,
    duration_ms: u64,
    ts: i64,
) -> String {
    emf_record(
        "Lakestream",
        &[
            ("Function", "maintenance"),
            ("Job", job.name()),
            ("Table", table),
        ],
        &[],
        &table_values(report, duration_ms),
        ts,
    )
}

/// The EMF line of one job over every table it ran on: the values summed, and `Tables`; the
/// custom metrics are per job (dimensions `Function`, `Job`), a fixed count however many
/// tables the lake has.
pub fn job_line(job: Job, tables: &[[Metric; 7]], ts: i64) -> String {
    let mut sums = table_values(&serde_json::Value::Null, 0);
    for t in tables {
        for (s, v) in sums.iter_mut().zip(t) {
            s.value += v.value;
        }
    }
    let mut metrics: Vec<Metric> = sums.into();
    metrics.push(Metric::new("Tables", "Count", tables.len() as f64));
    emf_line(
        "Lakestream",
        &[("Function", "maintenance"), ("Job", job.name())],
        &metrics,
        ts,
    )
}
