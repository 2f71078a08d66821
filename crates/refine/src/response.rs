//! What one invocation did: a result per job (ran, had nothing new, deferred by the time
//! budget, failed), and what the trigger gets back: the list of results for a schedule tick,
//! the partial batch response (the notices to deliver again) for a batch of notices.

use crate::report;
use crate::request::Trigger;
use lakestream_core::refine::JobReport;
use lakestream_formats::refine::RefineJob;
use lakestream_lambda::FunctionError;
use serde::ser::{SerializeMap, SerializeSeq};
use std::time::{Duration, Instant};

/// One job's outcome.
#[derive(Debug, serde::Serialize)]
pub struct JobResult {
    /// The job.
    pub job: String,
    /// Its report, or the error.
    pub outcome: Result<JobReport, String>,
    /// The error can go away by itself (storage, contention): the invocation fails and is
    /// retried; otherwise a human must act (the message says what to do).
    pub retryable: bool,
    /// The job had something new (or was not seen before) and ran; `false`: nothing new since
    /// what the process saw, nothing was loaded.
    pub due: bool,
    /// The time budget ran out before the job started: the next notice or tick runs it.
    pub deferred: bool,
    /// The job's output table.
    #[serde(skip)]
    pub output: String,
    /// How long the job ran.
    #[serde(skip)]
    pub took: Duration,
    /// When it finished (processing time, epoch milliseconds): the EMF timestamp.
    #[serde(skip)]
    pub finished_at_ms: i64,
    /// Commit time of the oldest source version known to be new (epoch ms).
    #[serde(skip)]
    pub oldest_ms: Option<i64>,
    /// The freshness target it is judged against.
    #[serde(skip)]
    pub target: Duration,
}

impl JobResult {
    /// A result for `job`, nothing done yet.
    pub(crate) fn new(job: &RefineJob, target: Duration) -> Self {
        Self {
            job: job.job.clone(),
            outcome: Ok(JobReport {
                job: job.job.clone(),
                ..Default::default()
            }),
            retryable: false,
            due: false,
            deferred: false,
            output: job.output.clone(),
            took: Duration::ZERO,
            finished_at_ms: 0,
            oldest_ms: None,
            target,
        }
    }

    pub(crate) fn finish(mut self, started: Instant, now: chrono::DateTime<chrono::Utc>) -> Self {
        self.took = started.elapsed();
        self.finished_at_ms = now.timestamp_millis();
        self
    }

    /// The job read everything it knew of (ran to the end, or had nothing new).
    pub fn caught_up(&self) -> bool {
        !self.deferred && self.outcome.as_ref().is_ok_and(|r| !r.more)
    }

    /// How long the oldest new source version known waited: until it was in the output (a job
    /// that caught up), or so far (still behind). `None` when no such version's time is known
    /// (nothing new, or the first run of a process found it by loading).
    pub fn lag_seconds(&self) -> Option<f64> {
        let oldest = self.oldest_ms?;
        Some((self.finished_at_ms - oldest).max(0) as f64 / 1000.0)
    }

    /// The lag is over the freshness target.
    pub fn behind_target(&self) -> bool {
        self.lag_seconds()
            .is_some_and(|l| l > self.target.as_secs_f64())
    }
}

/// What the function returns: one result per job, in the order they ran; for notices also the
/// message ids to deliver again (serialized as SQS's partial batch response).
#[derive(Debug)]
pub struct RefineResponse {
    /// The jobs' results.
    pub jobs: Vec<JobResult>,
    /// Notices only: the messages to deliver again (malformed, or whose job was deferred or
    /// failed retryably). A job that failed for good is not retried by its notices: the error
    /// is in the logs and metrics, and the schedule runs it again.
    pub batch_item_failures: Option<Vec<String>>,
    /// Which per-job values are metrics.
    pub job_metrics: report::JobMetrics,
}

impl serde::Serialize for RefineResponse {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.batch_item_failures {
            None => {
                let mut seq = s.serialize_seq(Some(self.jobs.len()))?;
                for j in &self.jobs {
                    seq.serialize_element(j)?;
                }
                seq.end()
            }
            Some(ids) => {
                #[derive(serde::Serialize)]
                struct Item<'a> {
                    #[serde(rename = "itemIdentifier")]
                    item_identifier: &'a str,
                }
                let items: Vec<Item> = ids.iter().map(|i| Item { item_identifier: i }).collect();
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("batchItemFailures", &items)?;
                map.serialize_entry("jobs", &self.jobs)?;
                map.end()
            }
        }
    }
}

impl RefineResponse {
    pub(crate) fn of(
        trigger: &Trigger,
        jobs: Vec<JobResult>,
        job_metrics: report::JobMetrics,
    ) -> Self {
        let batch_item_failures = match trigger {
            Trigger::Schedule(_) => None,
            Trigger::Notices(batch) => {
                let again = |job: &str| {
                    jobs.iter().any(|r| {
                        r.job == job && (r.deferred || (r.outcome.is_err() && r.retryable))
                    })
                };
                let mut ids: Vec<String> =
                    batch.malformed.iter().map(|(id, _)| id.clone()).collect();
                for (id, why) in &batch.malformed {
                    tracing::error!(message = %id, reason = %why, "malformed refine notice; it goes to the queue's dead-letter queue after its retries");
                }
                ids.extend(
                    batch
                        .notices
                        .iter()
                        .filter(|(_, n)| again(&n.job))
                        .map(|(id, _)| id.clone()),
                );
                Some(ids)
            }
        };
        Self {
            jobs,
            batch_item_failures,
            job_metrics,
        }
    }

    /// The CloudWatch EMF lines: one per job that ran (dimensions `Function`, `Job`), then one
    /// for the invocation (dimension `Function`: jobs run, not due, deferred, failed, behind
    /// their freshness target, and the largest lag), `\n`-separated.
    pub fn metrics_line(&self) -> String {
        let mut lines: Vec<String> = self
            .jobs
            .iter()
            .filter(|j| j.due)
            .filter_map(|j| {
                let r = j.outcome.as_ref().ok()?;
                Some(report::metrics_line(
                    r,
                    j.took.as_secs_f64() * 1000.0,
                    j.finished_at_ms,
                    j.lag_seconds(),
                    j.behind_target(),
                    self.job_metrics,
                ))
            })
            .collect();
        lines.push(report::invocation_line(self));
        lines.join("\n")
    }

    /// The failed jobs as one error (`job: error; ...`), or `None` when every job succeeded.
    pub fn failure(&self) -> Option<FunctionError> {
        let failed: Vec<String> = self
            .jobs
            .iter()
            .filter_map(|r| r.outcome.as_ref().err().map(|e| format!("{}: {e}", r.job)))
            .collect();
        (!failed.is_empty()).then(|| FunctionError::JobsFailed {
            message: failed.join("; "),
            retryable: self.jobs.iter().all(|r| r.outcome.is_ok() || r.retryable),
        })
    }

    /// The invocation's result. A schedule tick fails when a job failed (the error type tells
    /// alarms whether a human is needed; the next tick retries anyway). A batch of notices
    /// succeeds with its partial batch response: only the notices to deliver again go back.
    pub fn into_result(self) -> Result<Self, FunctionError> {
        if self.batch_item_failures.is_some() {
            return Ok(self);
        }
        match self.failure() {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }
}
