//! The `msk-ingest` handler: an MSK batch in, one Delta commit per table out.
//!
//! The handler is an adapter: it unwraps the tolerant [`KafkaEvent`] into core records, hands
//! them to a [`RecordSink`] (the core [`KafkaIngestor`] in production, anything in tests), prints one
//! EMF metrics line and maps failures to a `Diagnostic`. It only fails the invocation for
//! retryable errors; Lambda then redelivers the batch, and the `txn` versions make that a no-op
//! for whatever already landed. A permanent failure (retrying cannot help) puts the batch's
//! records in the dead-letter table with the reason and succeeds, so one poison batch does not
//! block its partition; only if that fails too does the invocation fail (at once when the lake
//! refuses every write: an endpoint that ignores `If-None-Match`).

use lakestream_core::{IngestReport, KafkaIngestor};
use lakestream_formats::kafka::KafkaEvent;
use lakestream_formats::record::SourceRecord;
use lakestream_lambda::FunctionError;
use lakestream_lambda::telemetry::{Metric, emf_record};

/// Where records go. Implemented by the core [`KafkaIngestor`].
#[allow(async_fn_in_trait)]
pub trait RecordSink {
    /// Ingest a batch.
    async fn ingest(&self, records: &[SourceRecord]) -> lakestream_core::Result<IngestReport>;
    /// Put every record in the dead-letter table with `reason` (idempotent per record).
    async fn dead_letter(
        &self,
        records: &[SourceRecord],
        reason: &str,
    ) -> lakestream_core::Result<IngestReport>;
}

impl RecordSink for KafkaIngestor {
    async fn ingest(&self, records: &[SourceRecord]) -> lakestream_core::Result<IngestReport> {
        KafkaIngestor::ingest(self, records).await
    }
    async fn dead_letter(
        &self,
        records: &[SourceRecord],
        reason: &str,
    ) -> lakestream_core::Result<IngestReport> {
        KafkaIngestor::dead_letter_batch(self, records, reason).await
    }
}

/// What the function returns (also what the CLI prints).
#[derive(Debug, Clone, serde::Serialize)]
pub struct MskResponse {
    /// The ingest report.
    #[serde(flatten)]
    pub report: IngestReport,
    /// Wall time of the ingest.
    pub duration_ms: f64,
}

impl MskResponse {
    /// The tables this invocation committed to, with their new version (what the refine
    /// notices name; the dead-letter table is not read by refine jobs).
    pub fn advanced(&self) -> Vec<(String, u64)> {
        self.report
            .tables
            .iter()
            .filter_map(|t| Some((t.table.clone(), t.version?)))
            .collect()
    }

    /// The CloudWatch EMF line for this invocation.
    pub fn metrics_line(&self) -> String {
        metrics_line(&self.report, self.duration_ms)
    }
}

/// Handle one MSK event. The caller prints [`MskResponse::metrics_line`] (the Lambda does).
pub async fn handle(
    sink: &impl RecordSink,
    event: KafkaEvent,
) -> Result<MskResponse, FunctionError> {
    let records = event.into_source_records();
    let started = std::time::Instant::now();
    let report = match sink.ingest(&records).await {
        Ok(report) => report,
        Err(e) if e.is_retryable() => {
            tracing::error!(error = %e.redacted(), retryable = true, "batch failed; it will be redelivered");
            return Err(FunctionError::Core(e));
        }
        // The lake takes no write at all (its endpoint ignores If-None-Match): dead letters
        // cannot be written either; failing keeps the batch for the on-failure destination.
        Err(e @ lakestream_core::Error::UnsafeStorage(_)) => {
            tracing::error!(error = %e.redacted(), "the lake refuses every write; the batch is not acknowledged");
            return Err(FunctionError::Core(e));
        }
        Err(e) => {
            tracing::error!(error = %e.redacted(), retryable = false, "batch cannot be ingested; dead-lettering it");
            let reason = format!("the batch cannot be ingested: {e}");
            sink.dead_letter(&records, &reason).await.map_err(|dl| {
                tracing::error!(error = %dl.redacted(), "dead-lettering the batch failed too");
                FunctionError::Core(dl)
            })?
        }
    };
    // The EMF line carries these counts on every invocation; the summary line is logged at the
    // default level only when something needs a look (dead letters, conflicts).
    if report.dead_lettered > 0 || report.conflicts() > 0 {
        tracing::info!(
            received = report.received,
            written = report.written,
            dead_lettered = report.dead_lettered,
            duplicates = report.duplicates,
            tombstones_skipped = report.tombstones_skipped,
            conflicts = report.conflicts(),
            "batch ingested"
        );
    } else {
        tracing::debug!(
            received = report.received,
            written = report.written,
            duplicates = report.duplicates,
            tombstones_skipped = report.tombstones_skipped,
            "batch ingested"
        );
    }
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(MskResponse {
        report,
        duration_ms,
    })
}

/// The EMF line of one invocation. Two values are CloudWatch metrics, what the alarms and a
/// freshness dashboard need (records dead-lettered, record lag); the rest are logged on the
/// same line for Logs Insights (records in and written, commit conflicts, ...), since every
/// metric name is a fixed $0.30 a month and Lambda's own metrics (invocations, errors, the
/// event source mapping's `OffsetLag`) are free.
pub fn metrics_line(r: &IngestReport, duration_ms: f64) -> String {
    let version = r.tables.iter().filter_map(|t| t.version).max().unwrap_or(0);
    emf_record(
        "Lakestream",
        &[("Function", "msk-ingest")],
        &[
            Metric::new("RecordsDeadLettered", "Count", r.dead_lettered as f64),
            Metric::new(
                "MaxRecordLagMs",
                "Milliseconds",
                r.max_lag_ms.unwrap_or(0) as f64,
            ),
        ],
        &[
            Metric::new("RecordsReceived", "Count", r.received as f64),
            Metric::new("RecordsWritten", "Count", r.written as f64),
            Metric::new("CommitConflicts", "Count", r.conflicts()),
            Metric::new("RecordsDuplicate", "Count", r.duplicates as f64),
            Metric::new(
                "RecordsTombstoneSkipped",
                "Count",
                r.tombstones_skipped as f64,
            ),
            Metric::new("BytesReceived", "Bytes", r.bytes_received as f64),
            Metric::new("CommitVersion", "None", version as f64),
            Metric::new("DurationMs", "Milliseconds", duration_ms),
        ],
        chrono::Utc::now().timestamp_millis(),
    )
}
