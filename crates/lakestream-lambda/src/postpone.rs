//! Postponed refine notices: a notice whose job is not due yet (its oldest unapplied change is
//! younger than the job's hold, see `Freshness`) goes back to the queue *invisible until the
//! job is due*. The refine function reports it in its partial batch response and sets its
//! visibility timeout to the time left; meanwhile its FIFO message group (the job) holds the
//! notices that follow, which then arrive with it and coalesce into one run.
//!
//! Best effort like every notice: when the visibility cannot be changed (no queue configured,
//! the call failed), the notice comes back after the queue's own visibility timeout, and the
//! refine schedule stays the safety net. Nothing is lost either way: the outputs' `txn`s say
//! what a job consumed.

/// SQS's largest visibility timeout (12 hours).
pub const MAX_VISIBILITY_SECONDS: u32 = 43_200;

/// One notice to make visible again after `seconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Postponed {
    /// The message's receipt handle (from the SQS event).
    pub receipt_handle: String,
    /// Seconds until it is visible again (1 ..= [`MAX_VISIBILITY_SECONDS`]).
    pub seconds: u32,
}

/// Where postponements go.
#[allow(async_fn_in_trait)]
pub trait Postpone {
    /// Make each message visible again after its seconds; the error says which could not be.
    async fn postpone(&self, messages: &[Postponed]) -> Result<(), String>;
}

/// No queue to talk to (local runs): notices come back after the queue's visibility timeout.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPostponer;

impl Postpone for NoPostponer {
    async fn postpone(&self, _: &[Postponed]) -> Result<(), String> {
        Ok(())
    }
}

/// The refine notices queue (`LAKESTREAM_REFINE_QUEUE_URL`), client built once in `main`.
#[derive(Debug, Clone)]
pub struct SqsPostponer {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsPostponer {
    /// Postpone on `queue_url` with `client`.
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
        Self { client, queue_url }
    }
}

impl Postpone for SqsPostponer {
    async fn postpone(&self, messages: &[Postponed]) -> Result<(), String> {
        let mut failed = Vec::new();
        for chunk in messages.chunks(10) {
            let mut batch = self
                .client
                .change_message_visibility_batch()
                .queue_url(&self.queue_url);
            for (i, m) in chunk.iter().enumerate() {
                let entry = aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(&m.receipt_handle)
                    .visibility_timeout(m.seconds.clamp(1, MAX_VISIBILITY_SECONDS) as i32)
                    .build()
                    .map_err(|e| e.to_string())?;
                batch = batch.entries(entry);
            }
            match batch.send().await {
                Ok(out) => failed.extend(
                    out.failed
                        .into_iter()
                        .map(|f| f.message.unwrap_or(f.code)),
                ),
                Err(e) => failed.push(format!(
                    "{} notice(s): {}",
                    chunk.len(),
                    aws_sdk_sqs::error::DisplayErrorContext(&e)
                )),
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join("; "))
        }
    }
}

/// Postpone `messages`, never failing the invocation: what could not be postponed comes back
/// after the queue's visibility timeout (logged).
pub async fn postpone_notices(postponer: &impl Postpone, messages: &[Postponed]) {
    if messages.is_empty() {
        return;
    }
    if let Err(e) = postponer.postpone(messages).await {
        tracing::warn!(error = %e, notices = messages.len(), "refine notices not postponed; they come back after the queue's visibility timeout");
    }
}
