//! The `s3-log-ingest` handler: S3 server access log objects named by S3 notifications,
//! delivered by an SQS trigger (partial batch responses) or pulled from the queue by a
//! scheduled drain, parsed into per-bucket Delta tables; and, through the same queue, the file
//! deliveries of DMS / files CDC families (objects under a family's `location`), streamed into
//! their bronze tables by [`lakestream_core::cdc::files`].
//!
//! [`handler::handle`] is the whole function without the Lambda runtime; `main` only reads the
//! environment, builds the clients and a [`handler::LogIngest`] once, and serves. The pieces:
//! [`process_messages`] (message bodies -> objects -> one ingest), [`handle_sqs`] (the SQS
//! trigger's partial batch response), [`drain`] (scheduled drain mode), [`s3`] (reading
//! objects).

pub mod drain;
pub mod error;
pub mod handler;
pub mod s3;

pub use error::{Error, Result};

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use lakestream_core::access_log::{AccessLogIngestor, ObjectIngestReport, ObjectSource};
use lakestream_core::redact::reason_class;
use lakestream_formats::notification::{LogObject, Notification, parse_body};
use std::collections::BTreeSet;

/// One queue message, from an SQS event or from ReceiveMessage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    /// SQS message id.
    pub id: String,
    /// Receipt handle (needed to delete in drain mode).
    pub receipt: String,
    /// Body.
    pub body: String,
}

/// What happened to a set of messages.
#[derive(Debug, Default, serde::Serialize)]
pub struct MessagesReport {
    /// Message ids that must be retried (not acknowledged / not deleted).
    pub failed: Vec<String>,
    /// Messages acknowledged.
    pub acknowledged: usize,
    /// Test events skipped.
    pub test_events: usize,
    /// Bodies that were not notifications (dead-lettered).
    pub unusable: usize,
    /// The object ingestion report.
    pub objects: ObjectIngestReport,
}

/// Process messages: parse bodies, ingest every named object (few large commits), and decide
/// per message whether it is done. A message fails only if one of its objects failed with a
/// retryable error; a storage failure of the commit itself fails every message with objects.
pub async fn process_messages(
    ingestor: &AccessLogIngestor,
    source: &impl ObjectSource,
    messages: &[QueueMessage],
) -> MessagesReport {
    let mut report = MessagesReport::default();
    let mut per_message: Vec<Vec<LogObject>> = Vec::with_capacity(messages.len());
    let mut unusable = Vec::new();
    for m in messages {
        match parse_body(&m.body) {
            Ok(Notification::Objects(o)) => per_message.push(o),
            Ok(Notification::TestEvent) => {
                report.test_events += 1;
                per_message.push(vec![]);
            }
            Ok(Notification::Ignored(why)) => {
                // `why` names event types from the body: logged by class only.
                tracing::info!(message = %m.id, reason = reason_class(&why), "notification ignored");
                per_message.push(vec![]);
            }
            Err(reason) => {
                tracing::error!(message = %m.id, reason = reason_class(&reason), "message body is not a notification; dead-lettered");
                unusable.push((
                    format!("sqs-message:{}", m.id),
                    m.body.clone().into_bytes(),
                    reason,
                ));
                per_message.push(vec![]);
            }
        }
    }
    report.unusable = unusable.len();
    let mut failed: BTreeSet<usize> = BTreeSet::new();
    if let Err(e) = ingestor.dead_letter_inputs(&unusable).await {
        tracing::error!(error = %e.redacted(), "could not record unusable messages");
        for (i, m) in messages.iter().enumerate() {
            if unusable
                .iter()
                .any(|u| u.0 == format!("sqs-message:{}", m.id))
            {
                failed.insert(i);
            }
        }
    }
    // CDC file deliveries (objects of a DMS / files family's location) go to the file
    // ingestor, one object at a time; the rest are access logs, in few large commits.
    let (cdc, objects): (Vec<LogObject>, Vec<LogObject>) = per_message
        .iter()
        .flatten()
        .cloned()
        .partition(|o| ingestor.cdc_files_for(o).is_some());
    if let Some(files) = cdc.first().and_then(|o| ingestor.cdc_files_for(o)) {
        let outcome = files.ingest(&cdc, source).await;
        settle(
            outcome,
            &cdc,
            &per_message,
            &mut failed,
            &mut report.objects,
            "CDC file ingest",
        );
    }
    if !objects.is_empty() {
        let outcome = ingestor.ingest(&objects, source).await;
        settle(
            outcome,
            &objects,
            &per_message,
            &mut failed,
            &mut report.objects,
            "ingest",
        );
    }
    report.failed = failed.iter().map(|&i| messages[i].id.clone()).collect();
    report.acknowledged = messages.len() - report.failed.len();
    report
}

/// Mark the messages whose objects failed (all of `group`'s on an error: retried) and add a
/// report to the total.
fn settle(
    outcome: lakestream_core::Result<ObjectIngestReport>,
    group: &[LogObject],
    per_message: &[Vec<LogObject>],
    failed: &mut std::collections::BTreeSet<usize>,
    total: &mut ObjectIngestReport,
    what: &str,
) {
    match outcome {
        Ok(r) => {
            for (i, objs) in per_message.iter().enumerate() {
                if objs.iter().any(|o| r.failed(o)) {
                    failed.insert(i);
                }
            }
            merge(total, r);
        }
        Err(e) => {
            tracing::error!(error = %e.redacted(), "{what} failed; messages will be retried");
            for (i, objs) in per_message.iter().enumerate() {
                if objs.iter().any(|o| group.contains(o)) {
                    failed.insert(i);
                }
            }
        }
    }
}

/// Add `r` to `total`.
fn merge(total: &mut ObjectIngestReport, r: ObjectIngestReport) {
    total.objects.extend(r.objects);
    total.rows_written += r.rows_written;
    total.lines_dead_lettered += r.lines_dead_lettered;
    total.bytes_read += r.bytes_read;
    for (t, v) in r.versions {
        let e = total.versions.entry(t).or_insert(v);
        *e = (*e).max(v);
    }
}

/// Handle an SQS-triggered invocation: the response lists exactly the messages to retry.
pub async fn handle_sqs(
    ingestor: &AccessLogIngestor,
    source: &impl ObjectSource,
    event: SqsEvent,
) -> (SqsBatchResponse, MessagesReport) {
    let messages: Vec<QueueMessage> = event
        .records
        .into_iter()
        .enumerate()
        .map(|(i, m)| QueueMessage {
            id: m.message_id.unwrap_or_else(|| format!("missing-id-{i}")),
            receipt: m.receipt_handle.unwrap_or_default(),
            body: m.body.unwrap_or_default(),
        })
        .collect();
    let report = process_messages(ingestor, source, &messages).await;
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = report
        .failed
        .iter()
        .map(|id| {
            let mut f = BatchItemFailure::default();
            f.item_identifier = id.clone();
            f
        })
        .collect();
    (response, report)
}
