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

/// The longest postponement: SQS allows 12 hours from the receive, less the invocation (the
/// refine function's timeout is at most 15 minutes). A longer hold is postponed again when the
/// notice comes back.
pub const MAX_VISIBILITY_SECONDS: u32 = 43_200 - 900;

/// One notice to make visible again when its job is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Postponed {
    /// The message's receipt handle (from the SQS event).
    pub receipt_handle: String,
    /// When its job is due (epoch ms).
    pub due_at_ms: i64,
}

impl Postponed {
    /// The visibility timeout that makes it visible at `due_at_ms`, counted from `now_ms` (the
    /// moment of the call: SQS counts from there), rounded up, 1 s to
    /// [`MAX_VISIBILITY_SECONDS`].
    pub fn visibility_seconds(&self, now_ms: i64) -> u32 {
        let left_ms = self.due_at_ms.saturating_sub(now_ms).max(1000);
        let secs = left_ms.saturating_add(999) / 1000;
        u32::try_from(secs)
            .unwrap_or(MAX_VISIBILITY_SECONDS)
            .min(MAX_VISIBILITY_SECONDS)
    }
}

/// Where postponements go.
#[allow(async_fn_in_trait)]
pub trait Postpone {
    /// Make each message visible again when its job is due (counted from `now_ms`); the error
    /// says which could not be.
    async fn postpone(&self, messages: &[Postponed], now_ms: i64) -> Result<(), String>;
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
    async fn postpone(&self, messages: &[Postponed], now_ms: i64) -> Result<(), String> {
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
                    .visibility_timeout(
                        i32::try_from(m.visibility_seconds(now_ms)).unwrap_or(i32::MAX),
                    )
                    .build()
                    .map_err(|e| e.to_string())?;
                batch = batch.entries(entry);
            }
            match batch.send().await {
                Ok(out) => {
                    failed.extend(out.failed.into_iter().map(|f| f.message.unwrap_or(f.code)))
                }
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

/// Postpone `messages` (counted from now), never failing the invocation: what could not be
/// postponed comes back after the queue's visibility timeout (logged).
pub async fn postpone_notices(postponer: &impl Postpone, messages: &[Postponed]) {
    if messages.is_empty() {
        return;
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .unwrap_or_default();
    if let Err(e) = postponer.postpone(messages, now_ms).await {
        tracing::warn!(error = %e, notices = messages.len(), "refine notices not postponed; they come back after the queue's visibility timeout");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_is_counted_from_the_call_and_bounded() {
        let p = |due_at_ms| Postponed {
            receipt_handle: "r".into(),
            due_at_ms,
        };
        assert_eq!(p(10_000).visibility_seconds(0), 10);
        assert_eq!(p(10_001).visibility_seconds(0), 11, "rounded up");
        // A job that became due while other jobs ran: back at once (1 s, SQS's least).
        assert_eq!(p(10_000).visibility_seconds(250_000), 1);
        assert_eq!(
            p(i64::MAX).visibility_seconds(i64::MIN),
            MAX_VISIBILITY_SECONDS
        );
        assert_eq!(p(i64::MIN).visibility_seconds(i64::MAX), 1);
    }
}
