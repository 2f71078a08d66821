//! Refine notices: after its commit, an ingest function tells the refine function which jobs
//! read the tables it advanced, so they run within seconds instead of at the next tick. One
//! message per job and table version on an SQS FIFO queue (the refine function's trigger):
//! the message group is the job, so at most one batch of a job is in flight and the notices
//! that pile up meanwhile arrive together and coalesce into one run; the deduplication id is
//! the job, table and version, so a retried send is one message.
//!
//! A notice is a hint, never the record of work: the output's `txn`s say what a job consumed,
//! so a notice delivered twice runs nothing twice, and a lost one (the send failed, the queue
//! was down) only waits for the refine schedule, the safety net. Sending therefore never fails
//! the ingest that committed: [`notify_refine`] logs and counts what it could not send.

use lakestream_formats::config::PipelineConfig;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One table version a refine job should read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefineNotice {
    /// The job that reads the table.
    pub job: String,
    /// The table that advanced.
    pub table: String,
    /// Its new version.
    pub version: u64,
    /// When the version was committed (epoch milliseconds): where the job's lag starts.
    pub committed_ms: i64,
}

/// SQS's limit on group and deduplication ids.
const MAX_ID: usize = 128;

impl RefineNotice {
    /// The notices for the tables `advanced` to these versions: one per job reading each table
    /// ([`PipelineConfig::jobs_reading`]); none for a table no job reads.
    pub fn for_commits(
        config: &PipelineConfig,
        advanced: &[(String, u64)],
        committed_ms: i64,
    ) -> Vec<Self> {
        let mut out = Vec::new();
        for (table, version) in advanced {
            for job in config.jobs_reading(table) {
                out.push(Self {
                    job: job.job,
                    table: table.clone(),
                    version: *version,
                    committed_ms,
                });
            }
        }
        out
    }

    /// The FIFO message group: the job (hashed when longer than SQS allows).
    pub fn group_id(&self) -> String {
        sqs_id(&self.job)
    }

    /// The FIFO deduplication id: job, table and version.
    pub fn deduplication_id(&self) -> String {
        sqs_id(&format!("{}@{}@{}", self.job, self.table, self.version))
    }
}

fn sqs_id(s: &str) -> String {
    if s.len() <= MAX_ID && s.is_ascii() {
        return s.to_string();
    }
    let digest = Sha256::digest(s.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where notices go.
#[allow(async_fn_in_trait)]
pub trait Notify {
    /// Send `notices`; the error says which could not be sent and why.
    async fn send(&self, notices: &[RefineNotice]) -> Result<(), String>;
}

/// The refine function's FIFO queue (`LAKESTREAM_REFINE_QUEUE_URL`), client built once in
/// `main`.
#[derive(Debug, Clone)]
pub struct SqsNotifier {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsNotifier {
    /// Send to `queue_url` with `client`.
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
        Self { client, queue_url }
    }
}

impl Notify for SqsNotifier {
    async fn send(&self, notices: &[RefineNotice]) -> Result<(), String> {
        let mut failed = Vec::new();
        for chunk in notices.chunks(10) {
            let mut batch = self.client.send_message_batch().queue_url(&self.queue_url);
            for (i, n) in chunk.iter().enumerate() {
                let body = serde_json::to_string(n).map_err(|e| e.to_string())?;
                let entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body)
                    .message_group_id(n.group_id())
                    .message_deduplication_id(n.deduplication_id())
                    .build()
                    .map_err(|e| e.to_string())?;
                batch = batch.entries(entry);
            }
            match batch.send().await {
                Ok(out) => failed.extend(out.failed.into_iter().map(|f| {
                    format!(
                        "{}: {}",
                        chunk
                            .get(f.id.parse::<usize>().unwrap_or(usize::MAX))
                            .map_or("?", |n| n.job.as_str()),
                        f.message.unwrap_or(f.code)
                    )
                })),
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

/// What [`notify_refine`] did, for the EMF line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NotifyOutcome {
    /// Notices sent.
    pub sent: usize,
    /// Notices that could not be sent (the schedule runs their jobs).
    pub failed: usize,
}

/// Tell the refine function about the tables `advanced` (table, committed version). Never
/// fails: a notice that cannot be sent is logged and counted, and the refine schedule runs its
/// job at the next tick.
pub async fn notify_refine(
    notifier: &impl Notify,
    config: &PipelineConfig,
    advanced: &[(String, u64)],
    committed_ms: i64,
) -> NotifyOutcome {
    let notices = RefineNotice::for_commits(config, advanced, committed_ms);
    if notices.is_empty() {
        return NotifyOutcome::default();
    }
    match notifier.send(&notices).await {
        Ok(()) => NotifyOutcome {
            sent: notices.len(),
            failed: 0,
        },
        Err(e) => {
            tracing::warn!(error = %e, notices = notices.len(), "refine notices not sent; the refine schedule will run their jobs");
            NotifyOutcome {
                sent: 0,
                failed: notices.len(),
            }
        }
    }
}
