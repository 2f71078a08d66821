//! Scheduled drain mode (how the seed pipeline ran: hourly): pull notifications from the queue
//! with long polling, ingest them in few large commits, delete only the messages whose objects
//! are committed. Stops when the queue is empty or the invocation's time runs low (the reserve
//! kept for the last round is a fifth of the invocation's time, at most 60 s, so a 30 s or 60 s
//! function drains too); failures stay in the queue and come back after the visibility timeout.

use crate::error::{Error, Result};
use crate::{QueueMessage, process_messages};
use lakestream_core::access_log::{AccessLogIngestor, ObjectSource};
use std::time::Duration;

/// The queue operations drain mode needs (aws-sdk-sqs in production).
#[allow(async_fn_in_trait)]
pub trait Queue {
    /// Receive up to `max` (<= 10) messages, waiting up to `wait` for the first.
    async fn receive(&self, max: i32, wait: Duration) -> Result<Vec<QueueMessage>>;
    /// Delete messages by receipt handle.
    async fn delete(&self, messages: &[&QueueMessage]) -> Result<()>;
}

/// Drain settings.
#[derive(Debug, Clone)]
pub struct DrainSettings {
    /// Messages gathered before one ingest round (one commit per table per round).
    pub messages_per_round: usize,
    /// Stop receiving when less than the reserve is left of the invocation: a fifth of the
    /// time left when the drain starts, at most this ([`DrainSettings::reserve_for`]).
    pub reserve: Duration,
    /// Long-poll wait for each receive.
    pub wait: Duration,
}

impl Default for DrainSettings {
    fn default() -> Self {
        Self {
            messages_per_round: 100,
            reserve: Duration::from_secs(60),
            wait: Duration::from_secs(2),
        }
    }
}

impl DrainSettings {
    /// The time kept back for the last round of an invocation that has `total` left when the
    /// drain starts: `total / 5`, at most [`DrainSettings::reserve`]. A fixed reserve as long
    /// as the timeout (60 s with `LogIngestTimeout=60`) never received a message, and the
    /// queue's messages expired unread.
    pub fn reserve_for(&self, total: Duration) -> Duration {
        (total / 5).min(self.reserve)
    }
}

/// What a drain did.
#[derive(Debug, Default, serde::Serialize)]
pub struct DrainReport {
    /// Messages received.
    pub received: usize,
    /// Messages deleted after their objects were committed (or that needed nothing).
    pub deleted: usize,
    /// Messages left for redelivery.
    pub failed: usize,
    /// Ingest rounds (each is one commit per touched table).
    pub rounds: usize,
    /// Rows written.
    pub rows_written: usize,
    /// The latest version committed per table (what refine notices name).
    #[serde(skip)]
    pub versions: std::collections::BTreeMap<String, u64>,
    /// True when it stopped because the queue was empty.
    pub queue_empty: bool,
}

/// Drain the queue. `remaining` tells how much invocation time is left.
pub async fn drain(
    ingestor: &AccessLogIngestor,
    source: &impl ObjectSource,
    queue: &impl Queue,
    settings: &DrainSettings,
    remaining: impl Fn() -> Duration,
) -> Result<DrainReport> {
    let mut report = DrainReport::default();
    let mut pending: Vec<QueueMessage> = Vec::new();
    let reserve = settings.reserve_for(remaining());
    loop {
        if remaining() < reserve + settings.wait {
            break;
        }
        let got = queue.receive(10, settings.wait).await?;
        let empty = got.is_empty();
        report.received += got.len();
        pending.extend(got);
        if empty || pending.len() >= settings.messages_per_round {
            round(ingestor, source, queue, &mut pending, &mut report).await?;
        }
        if empty {
            report.queue_empty = true;
            break;
        }
    }
    round(ingestor, source, queue, &mut pending, &mut report).await?;
    Ok(report)
}

async fn round(
    ingestor: &AccessLogIngestor,
    source: &impl ObjectSource,
    queue: &impl Queue,
    pending: &mut Vec<QueueMessage>,
    report: &mut DrainReport,
) -> Result<()> {
    if pending.is_empty() {
        return Ok(());
    }
    let r = process_messages(ingestor, source, pending).await;
    report.rounds += 1;
    report.rows_written += r.objects.rows_written;
    for (t, v) in &r.objects.versions {
        let e = report.versions.entry(t.clone()).or_insert(*v);
        *e = (*e).max(*v);
    }
    let done: Vec<&QueueMessage> = pending
        .iter()
        .filter(|m| !r.failed.contains(&m.id))
        .collect();
    for chunk in done.chunks(10) {
        queue.delete(chunk).await?;
    }
    report.deleted += done.len();
    report.failed += r.failed.len();
    tracing::info!(
        round = report.rounds,
        messages = pending.len(),
        deleted = done.len(),
        failed = r.failed.len(),
        "drain round committed"
    );
    pending.clear();
    Ok(())
}

/// aws-sdk-sqs implementation.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsQueue {
    /// A queue by URL, with a client built once in `main`.
    pub fn new(client: aws_sdk_sqs::Client, url: String) -> Self {
        Self { client, url }
    }
}

impl Queue for SqsQueue {
    async fn receive(&self, max: i32, wait: Duration) -> Result<Vec<QueueMessage>> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max.clamp(1, 10))
            .wait_time_seconds(wait.as_secs().min(20) as i32)
            .send()
            .await
            .map_err(|e| Error::Queue {
                operation: "ReceiveMessage",
                queue: self.url.clone(),
                message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
            })?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| QueueMessage {
                id: m.message_id.unwrap_or_default(),
                receipt: m.receipt_handle.unwrap_or_default(),
                body: m.body.unwrap_or_default(),
            })
            .collect())
    }

    async fn delete(&self, messages: &[&QueueMessage]) -> Result<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let entries = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(&m.receipt)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Queue {
                operation: "DeleteMessageBatch",
                queue: self.url.clone(),
                message: format!("building the request: {e}"),
            })?;
        let out = self
            .client
            .delete_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| Error::Queue {
                operation: "DeleteMessageBatch",
                queue: self.url.clone(),
                message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
            })?;
        if !out.failed.is_empty() {
            // Not deleted means redelivered later: harmless (ingestion is idempotent), logged.
            tracing::warn!(
                failed = out.failed.len(),
                "some messages could not be deleted; they will be redelivered and skipped"
            );
        }
        Ok(())
    }
}
