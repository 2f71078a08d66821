//! What one invocation did: a result per job (ran, had nothing new, deferred by the time
//! budget, failed), and what the trigger gets back: the list of results for a schedule tick,
//! the partial batch response (the notices to deliver again) for a batch of notices.

use crate::report;
use crate::request::Trigger;
use lakestream_core::refine::JobReport;
use lakestream_formats::refine::RefineJob;
use lakestream_lambda::FunctionError;
use lakestream_lambda::postpone::Postponed;
use serde::ser::{SerializeMap, SerializeSeq, SerializeStruct};
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// One job's outcome: its state, and when and how long it ran.
#[derive(Debug)]
pub struct JobResult {
    /// The job.
    pub job: String,
    /// What became of it.
    pub state: JobState,
    /// The job's output table.
    pub output: String,
    /// How long the job ran.
    pub took: Duration,
    /// When it finished (processing time, epoch milliseconds): the EMF timestamp.
    pub finished_at_ms: i64,
    /// The freshness target it is judged against.
    pub target: Duration,
}

/// What became of a job in an invocation.
#[derive(Debug)]
pub enum JobState {
    /// Nothing new since what the process saw: nothing was loaded.
    NotDue,
    /// Something new, but its oldest change is younger than the job's hold (its freshness
    /// target leaves room to wait): not run, so the changes that arrive meanwhile coalesce.
    /// Its notices come back when it is due ([`RefineResponse::postponed`]).
    Holding {
        /// When the job is due (epoch ms).
        due_at_ms: i64,
        /// Commit time of the oldest source version known to be new (epoch ms).
        oldest_ms: i64,
    },
    /// The time budget ran out before the job started: the next notice or tick runs it.
    Deferred,
    /// Not run: a job it reads from failed in this invocation (retryable: it runs once that
    /// one succeeds).
    UpstreamFailed,
    /// It had something new (or was not seen before) and ran.
    Ran {
        /// What it did.
        report: JobReport,
        /// Commit time of the oldest source version known to be new (epoch ms).
        oldest_ms: Option<i64>,
    },
    /// It had something new (or was not seen before), ran and failed.
    Failed {
        /// The error (redacted).
        error: String,
        /// The error can go away by itself (storage, contention): the invocation fails and is
        /// retried; otherwise a human must act (the message says what to do).
        retryable: bool,
        /// Commit time of the oldest source version known to be new (epoch ms).
        oldest_ms: Option<i64>,
    },
}

/// The error of [`JobState::UpstreamFailed`].
const UPSTREAM_FAILED: &str = "skipped: a job it reads from failed";

/// The response's JSON of a job (unchanged since `JobResult` had a field per flag):
/// `{"job", "outcome": {"Ok": report} | {"Err": message}, "retryable", "due", "deferred"}`; a
/// job that did not run has its empty report.
impl serde::Serialize for JobResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("JobResult", 5)?;
        st.serialize_field("job", &self.job)?;
        st.serialize_field("outcome", &self.outcome())?;
        st.serialize_field("retryable", &self.retryable())?;
        st.serialize_field("due", &self.due())?;
        st.serialize_field("deferred", &self.deferred())?;
        st.end()
    }
}

impl JobResult {
    /// A result for `job` in `state`, finished now (started at `started`).
    pub(crate) fn finished(
        job: &RefineJob,
        target: Duration,
        state: JobState,
        started: Instant,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Self {
        Self {
            job: job.job.clone(),
            state,
            output: job.output.clone(),
            took: started.elapsed(),
            finished_at_ms: now.timestamp_millis(),
            target,
        }
    }

    /// Its report (empty for a job that did not run), or its error.
    pub fn outcome(&self) -> Result<Cow<'_, JobReport>, &str> {
        match &self.state {
            JobState::Ran { report, .. } => Ok(Cow::Borrowed(report)),
            JobState::NotDue | JobState::Deferred | JobState::Holding { .. } => {
                Ok(Cow::Owned(JobReport {
                    job: self.job.clone(),
                    ..Default::default()
                }))
            }
            JobState::UpstreamFailed => Err(UPSTREAM_FAILED),
            JobState::Failed { error, .. } => Err(error),
        }
    }

    /// The job had something new (or was not seen before) and ran; `false`: nothing new since
    /// what the process saw (nothing was loaded), deferred, or a job it reads from failed.
    pub fn due(&self) -> bool {
        matches!(self.state, JobState::Ran { .. } | JobState::Failed { .. })
    }

    /// The time budget ran out before the job started: the next notice or tick runs it.
    pub fn deferred(&self) -> bool {
        matches!(self.state, JobState::Deferred)
    }

    /// It failed (or a job it reads from did) and the error can go away by itself.
    pub fn retryable(&self) -> bool {
        match self.state {
            JobState::UpstreamFailed => true,
            JobState::Failed { retryable, .. } => retryable,
            _ => false,
        }
    }

    /// The job holds its changes for its freshness target until this time (epoch ms).
    pub fn holding_until_ms(&self) -> Option<i64> {
        match self.state {
            JobState::Holding { due_at_ms, .. } => Some(due_at_ms),
            _ => None,
        }
    }

    /// Commit time of the oldest source version known to be new (epoch ms).
    fn oldest_ms(&self) -> Option<i64> {
        match self.state {
            JobState::Ran { oldest_ms, .. } | JobState::Failed { oldest_ms, .. } => oldest_ms,
            JobState::Holding { oldest_ms, .. } => Some(oldest_ms),
            _ => None,
        }
    }

    /// The job read everything it knew of (ran to the end, or had nothing new).
    pub fn caught_up(&self) -> bool {
        !self.deferred() && self.outcome().is_ok_and(|r| !r.more)
    }

    /// How long the oldest source version the run read (or, for a job holding or failed, the
    /// oldest named as new: in a process that has not run the job yet, it may be one already
    /// applied) waited: until it was in the output (a job that caught up), or so
    /// far (still behind). `None` when no such version's time is known (nothing new read, a
    /// version named again after it was applied, or the first run of a process found it by
    /// loading).
    pub fn lag_seconds(&self) -> Option<f64> {
        let oldest = self.oldest_ms()?;
        Some(self.finished_at_ms.saturating_sub(oldest).max(0) as f64 / 1000.0)
    }

    /// The lag is over the freshness target.
    pub fn behind_target(&self) -> bool {
        self.lag_seconds()
            .is_some_and(|l| l > self.target.as_secs_f64())
    }
}

/// The notices of `batch` whose job is holding, each to come back when the job is due.
fn postponements(batch: &crate::request::Notices, jobs: &[JobResult]) -> Vec<Postponed> {
    let mut out = Vec::new();
    for (id, n) in &batch.notices {
        let Some(r) = jobs.iter().find(|r| r.job == n.job) else {
            continue;
        };
        let (Some(due_at_ms), Some(receipt)) = (r.holding_until_ms(), batch.receipts.get(id))
        else {
            continue;
        };
        out.push(Postponed {
            receipt_handle: receipt.clone(),
            due_at_ms,
        });
    }
    out
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
    /// Notices only: those of jobs holding for their freshness target, each to come back when
    /// its job is due (they are among `batch_item_failures`).
    pub postponed: Vec<Postponed>,
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
        let mut postponed = Vec::new();
        let batch_item_failures = match trigger {
            Trigger::Schedule(_) => None,
            Trigger::Notices(batch) => {
                let again = |job: &str| {
                    jobs.iter().any(|r| {
                        r.job == job
                            && (r.deferred()
                                || r.holding_until_ms().is_some()
                                || (r.outcome().is_err() && r.retryable()))
                    })
                };
                postponed = postponements(batch, &jobs);
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
            postponed,
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
            .filter_map(|j| {
                let JobState::Ran { report, .. } = &j.state else {
                    return None;
                };
                Some(report::metrics_line(
                    report,
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
            .filter_map(|r| r.outcome().err().map(|e| format!("{}: {e}", r.job)))
            .collect();
        (!failed.is_empty()).then(|| FunctionError::JobsFailed {
            message: failed.join("; "),
            retryable: self
                .jobs
                .iter()
                .all(|r| r.outcome().is_ok() || r.retryable()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn result(state: JobState) -> JobResult {
        JobResult {
            job: "j".into(),
            state,
            output: "out".into(),
            took: Duration::ZERO,
            finished_at_ms: 0,
            target: Duration::ZERO,
        }
    }

    /// The JSON of each state is the one of the four flat fields before `JobState`.
    #[test]
    fn each_state_serializes_as_the_flat_fields_did() -> Result<(), serde_json::Error> {
        let empty = serde_json::to_value(JobReport {
            job: "j".into(),
            ..Default::default()
        })?;
        let flat = |outcome: serde_json::Value, retryable: bool, due: bool, deferred: bool| {
            serde_json::json!({"job": "j", "outcome": outcome, "retryable": retryable,
                "due": due, "deferred": deferred})
        };
        let cases = [
            (
                JobState::NotDue,
                flat(serde_json::json!({"Ok": empty}), false, false, false),
            ),
            (
                JobState::Deferred,
                flat(serde_json::json!({"Ok": empty}), false, false, true),
            ),
            (
                JobState::UpstreamFailed,
                flat(
                    serde_json::json!({"Err": UPSTREAM_FAILED}),
                    true,
                    false,
                    false,
                ),
            ),
            (
                JobState::Ran {
                    report: JobReport {
                        job: "j".into(),
                        more: true,
                        ..Default::default()
                    },
                    oldest_ms: Some(1),
                },
                flat(
                    serde_json::json!({"Ok": serde_json::to_value(JobReport {
                        job: "j".into(),
                        more: true,
                        ..Default::default()
                    })?}),
                    false,
                    true,
                    false,
                ),
            ),
            (
                JobState::Failed {
                    error: "boom".into(),
                    retryable: true,
                    oldest_ms: None,
                },
                flat(serde_json::json!({"Err": "boom"}), true, true, false),
            ),
        ];
        for (state, want) in cases {
            let r = result(state);
            let text = serde_json::to_string(&r)?;
            assert!(text.starts_with(r#"{"job":"j","outcome":"#), "{text}");
            assert_eq!(serde_json::to_value(&r)?, want, "{r:?}");
        }
        Ok(())
    }
}
