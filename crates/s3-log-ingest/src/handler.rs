//! The whole `s3-log-ingest` function without the Lambda runtime: one payload in, either an SQS
//! event (partial batch response) or a scheduled event (drain the queue), and the response with
//! its EMF line. `main` builds a [`LogIngest`] once and serves; tests call [`handle`] directly.

use crate::drain::{DrainReport, DrainSettings, Queue, drain};
use crate::{MessagesReport, handle_sqs};
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lakestream_core::Clock;
use lakestream_core::access_log::{AccessLogIngestor, ObjectSource};
use lakestream_formats::config::PipelineConfig;
use lakestream_lambda::FunctionError;
use lakestream_lambda::telemetry::{Metric, emf_line};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// What an invocation needs, built once per process: the ingestor, where log objects are read
/// from, and the queue a scheduled drain pulls from (none without `LAKESTREAM_QUEUE_URL`).
pub struct LogIngest<S, Q> {
    /// Parses log objects into the access-log tables.
    pub ingestor: AccessLogIngestor,
    /// Where log objects are read from (S3 in production).
    pub objects: S,
    /// The notification queue for drain mode.
    pub queue: Option<Q>,
    /// Drain rounds and time reserve.
    pub settings: DrainSettings,
}

impl<S: ObjectSource, Q: Queue> LogIngest<S, Q> {
    /// The function's dependencies. Refuses a config naming no bucket to read log objects from:
    /// every notification would be refused, a deploy mistake said at start.
    pub fn new(
        config: PipelineConfig,
        clock: Arc<dyn Clock>,
        objects: S,
        queue: Option<Q>,
    ) -> Result<Self, FunctionError> {
        let ingestor = AccessLogIngestor::new(config, clock)?;
        if !ingestor.reads_objects() {
            return Err(lakestream_core::Error::Config(format!(
                "s3-log-ingest reads log objects only from the configured raw-logs bucket(s): set {} \
                 (the template sets it to RawLogsBucketName) or `access_logs.source_buckets`, \
                 or declare a `[[cdc]]` family with `source = \"dms\"` or `\"files\"`",
                lakestream_formats::config::LOG_BUCKETS_ENV
            ))
            .into());
        }
        Ok(Self {
            ingestor,
            objects,
            queue,
            settings: DrainSettings::default(),
        })
    }
}

/// The SQS trigger's answer: the partial batch response (what Lambda gets), and the report
/// behind it (for the EMF line and the logs).
#[derive(Debug, serde::Serialize)]
#[serde(transparent)]
pub struct SqsResponse {
    /// The messages to retry.
    pub response: SqsBatchResponse,
    /// What happened to every message.
    #[serde(skip)]
    pub report: MessagesReport,
    /// Wall time of the invocation, whole milliseconds.
    #[serde(skip)]
    pub duration_ms: f64,
}

/// A scheduled drain's answer: its report (also what Lambda gets).
#[derive(Debug, serde::Serialize)]
#[serde(transparent)]
pub struct DrainResponse {
    /// What the drain did.
    pub report: DrainReport,
    /// Wall time of the invocation, whole milliseconds.
    #[serde(skip)]
    pub duration_ms: f64,
}

/// What the function returns, by trigger.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum LogResponse {
    /// An SQS-triggered invocation.
    Sqs(SqsResponse),
    /// A scheduled drain.
    Drain(DrainResponse),
}

impl LogResponse {
    /// The tables this invocation committed to, with their latest version (what the refine
    /// notices name).
    pub fn advanced(&self) -> Vec<(String, u64)> {
        let versions = match self {
            LogResponse::Sqs(s) => &s.report.objects.versions,
            LogResponse::Drain(d) => &d.report.versions,
        };
        versions.iter().map(|(t, v)| (t.clone(), *v)).collect()
    }

    /// The CloudWatch EMF line of this invocation.
    pub fn metrics_line(&self) -> String {
        let metrics = match self {
            LogResponse::Sqs(s) => vec![
                Metric::new(
                    "MessagesAcknowledged",
                    "Count",
                    s.report.acknowledged as f64,
                ),
                Metric::new("MessagesFailed", "Count", s.report.failed.len() as f64),
                Metric::new("RowsWritten", "Count", s.report.objects.rows_written as f64),
                Metric::new(
                    "LinesDeadLettered",
                    "Count",
                    s.report.objects.lines_dead_lettered as f64,
                ),
                Metric::new("BytesRead", "Bytes", s.report.objects.bytes_read as f64),
                Metric::new("DurationMs", "Milliseconds", s.duration_ms),
            ],
            LogResponse::Drain(d) => vec![
                Metric::new("DrainReceived", "Count", d.report.received as f64),
                Metric::new("DrainDeleted", "Count", d.report.deleted as f64),
                Metric::new("DrainFailed", "Count", d.report.failed as f64),
                Metric::new("RowsWritten", "Count", d.report.rows_written as f64),
                Metric::new("DurationMs", "Milliseconds", d.duration_ms),
            ],
        };
        emf_line(
            "Lakestream",
            &[("Function", "s3-log-ingest")],
            &metrics,
            chrono::Utc::now().timestamp_millis(),
        )
    }
}

/// How much of the invocation is left, from its deadline (what a drain stops on).
pub fn time_left(deadline: SystemTime) -> impl Fn() -> Duration {
    move || {
        deadline
            .duration_since(SystemTime::now())
            .unwrap_or_default()
    }
}

/// Whether the payload is an SQS event (its records come from `aws:sqs`); anything else is a
/// scheduled drain.
fn is_sqs(payload: &Value) -> bool {
    payload
        .get("Records")
        .and_then(Value::as_array)
        .is_some_and(|r| {
            r.first()
                .and_then(|m| m.get("eventSource"))
                .and_then(Value::as_str)
                == Some("aws:sqs")
        })
}

/// Handle one invocation: an SQS event is answered with the messages to retry; any other
/// payload drains the queue until it is empty or `remaining` runs low. The caller prints
/// [`LogResponse::metrics_line`].
pub async fn handle<S: ObjectSource, Q: Queue>(
    deps: &LogIngest<S, Q>,
    payload: Value,
    remaining: impl Fn() -> Duration,
) -> Result<LogResponse, FunctionError> {
    let started = Instant::now();
    let took = || started.elapsed().as_millis() as f64;
    if is_sqs(&payload) {
        let sqs: SqsEvent = serde_json::from_value(payload)
            .map_err(|e| FunctionError::MalformedEvent(e.to_string()))?;
        // Boxed: the ingest futures are deep enough to overflow rustc's layout query depth in
        // the binary's `service_fn` closure; one allocation per invocation.
        let (response, report) = Box::pin(handle_sqs(&deps.ingestor, &deps.objects, sqs)).await;
        return Ok(LogResponse::Sqs(SqsResponse {
            response,
            report,
            duration_ms: took(),
        }));
    }
    let Some(queue) = &deps.queue else {
        return Err(FunctionError::NotConfigured(
            "scheduled drain needs LAKESTREAM_QUEUE_URL".into(),
        ));
    };
    let report = Box::pin(drain(
        &deps.ingestor,
        &deps.objects,
        queue,
        &deps.settings,
        remaining,
    ))
    .await
    .map_err(|e| FunctionError::DrainFailed(e.to_string()))?;
    Ok(LogResponse::Drain(DrainResponse {
        report,
        duration_ms: took(),
    }))
}
