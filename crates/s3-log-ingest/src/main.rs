//! `s3-log-ingest` Lambda entry point. Serves two triggers with one binary: an SQS event
//! (partial batch response) and a scheduled event (drain the queue named by
//! `LAKESTREAM_QUEUE_URL`). Clients, config and ingestor are built once; the buckets it may read
//! (`LAKESTREAM_LOG_BUCKETS` or `access_logs.source_buckets`) must be set.

use lakestream_core::SystemClock;
use lakestream_core::access_log::AccessLogIngestor;
use lakestream_core::redact::scrub;
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::telemetry::{Metric, emf_line, init_tracing};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use s3_log_ingest::drain::{DrainSettings, SqsQueue, drain};
use s3_log_ingest::s3::S3Objects;
use serde_json::Value;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = FunctionEnv::from_lookup(|k| std::env::var(k).ok())?;
    init_tracing(&env.log_filter, true);
    let config = env.load_config().await?;
    if config.access_logs.source_buckets.is_empty() {
        // Every notification would be refused: a deploy mistake, said at start.
        return Err(lakestream_core::Error::Config(format!(
            "s3-log-ingest reads log objects only from the configured raw-logs bucket(s): set {} \
             (the template sets it to RawLogsBucketName) or `access_logs.source_buckets`",
            lakestream_formats::config::LOG_BUCKETS_ENV
        ))
        .into());
    }
    let endpoint = env.s3.endpoint_url.clone();
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let s3_conf = aws_sdk_s3::config::Builder::from(&aws)
        .force_path_style(endpoint.is_some())
        .build();
    let objects = S3Objects::new(aws_sdk_s3::Client::from_conf(s3_conf));
    let queue = env
        .queue_url
        .clone()
        .map(|url| SqsQueue::new(aws_sdk_sqs::Client::new(&aws), url));
    let ingestor = AccessLogIngestor::new(config, Arc::new(SystemClock))?;
    let settings = DrainSettings::default();
    let (ingestor, objects, queue, settings) = (&ingestor, &objects, &queue, &settings);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let started = std::time::Instant::now();
        let is_sqs = event
            .payload
            .get("Records")
            .and_then(Value::as_array)
            .is_some_and(|r| {
                r.first()
                    .and_then(|m| m.get("eventSource"))
                    .and_then(Value::as_str)
                    == Some("aws:sqs")
            });
        if is_sqs {
            let sqs: aws_lambda_events::sqs::SqsEvent = serde_json::from_value(event.payload)
                .map_err(|e| Diagnostic {
                    error_type: "Lakestream.MalformedEvent".into(),
                    error_message: scrub(&e.to_string()),
                })?;
            let (response, report) = s3_log_ingest::handle_sqs(ingestor, objects, sqs).await;
            println!(
                "{}",
                emf_line(
                    "Lakestream",
                    &[("Function", "s3-log-ingest")],
                    &[
                        Metric::new("MessagesAcknowledged", "Count", report.acknowledged as f64),
                        Metric::new("MessagesFailed", "Count", report.failed.len() as f64),
                        Metric::new("RowsWritten", "Count", report.objects.rows_written as f64),
                        Metric::new(
                            "LinesDeadLettered",
                            "Count",
                            report.objects.lines_dead_lettered as f64
                        ),
                        Metric::new("BytesRead", "Bytes", report.objects.bytes_read as f64),
                        Metric::new(
                            "DurationMs",
                            "Milliseconds",
                            started.elapsed().as_millis() as f64
                        ),
                    ],
                    chrono::Utc::now().timestamp_millis()
                )
            );
            return serde_json::to_value(response).map_err(|e| Diagnostic {
                error_type: "Lakestream.Internal".into(),
                error_message: e.to_string(),
            });
        }
        let Some(queue) = queue else {
            return Err(Diagnostic {
                error_type: "Lakestream.Config".into(),
                error_message: "scheduled drain needs LAKESTREAM_QUEUE_URL".into(),
            });
        };
        let deadline = event.context.deadline();
        let remaining = move || {
            deadline
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
        };
        let report = drain(ingestor, objects, queue, settings, remaining)
            .await
            .map_err(|e| Diagnostic {
                error_type: "Lakestream.DrainRetryable".into(),
                error_message: scrub(&format!("{e:#}")),
            })?;
        println!(
            "{}",
            emf_line(
                "Lakestream",
                &[("Function", "s3-log-ingest")],
                &[
                    Metric::new("DrainReceived", "Count", report.received as f64),
                    Metric::new("DrainDeleted", "Count", report.deleted as f64),
                    Metric::new("DrainFailed", "Count", report.failed as f64),
                    Metric::new("RowsWritten", "Count", report.rows_written as f64),
                    Metric::new(
                        "DurationMs",
                        "Milliseconds",
                        started.elapsed().as_millis() as f64
                    ),
                ],
                chrono::Utc::now().timestamp_millis()
            )
        );
        serde_json::to_value(report).map_err(|e| Diagnostic {
            error_type: "Lakestream.Internal".into(),
            error_message: e.to_string(),
        })
    }))
    .await
}
