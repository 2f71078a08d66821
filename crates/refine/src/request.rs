//! The refine function's input, by trigger: a schedule tick (an EventBridge Scheduler `Input`
//! such as `{"jobs":["curated"]}`, `{}` or a classic scheduled event: which jobs, how many runs)
//! or a batch of refine notices from the FIFO queue the ingest functions send to after their
//! commits (an SQS event). Parsed once per invocation; the CLI builds a [`Request`] from its
//! arguments.

use aws_lambda_events::sqs::SqsEvent;
use lakestream_lambda::FunctionError;
use lakestream_lambda::notify::RefineNotice;
use serde::Deserialize;
use serde_json::Value;

/// The schedule's input.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Jobs to run; every configured job when absent.
    #[serde(default)]
    pub jobs: Vec<String>,
    /// Committed runs per job per invocation (each bounded by the job's chunk limits).
    #[serde(default = "default_max_runs")]
    pub max_runs: usize,
}

/// Committed runs per job when the input does not say: the next tick continues.
pub const DEFAULT_MAX_RUNS: usize = 20;

fn default_max_runs() -> usize {
    DEFAULT_MAX_RUNS
}

impl Request {
    /// Parse a schedule payload: a ScheduleV2 `Input`, `{}` or a classic scheduled event
    /// (both run every job). Anything else is [`FunctionError::BadInput`] saying what to send.
    pub fn from_event(v: &Value) -> Result<Self, FunctionError> {
        if v.get("detail-type").and_then(|d| d.as_str()) == Some("Scheduled Event") {
            return Ok(Self {
                max_runs: default_max_runs(),
                ..Default::default()
            });
        }
        serde_json::from_value(v.clone()).map_err(|e| {
            FunctionError::BadInput(format!(
                "bad refine input ({e}); expected {{\"jobs\":[\"curated\"],\"max_runs\":20}}"
            ))
        })
    }
}

/// Refine notices from one SQS batch.
#[derive(Debug, Clone, Default)]
pub struct Notices {
    /// `(message id, notice)` in delivery order.
    pub notices: Vec<(String, RefineNotice)>,
    /// `(message id, why)` of bodies that are not a notice: failed back to the queue, whose
    /// redrive policy moves them to its dead-letter queue with their bytes.
    pub malformed: Vec<(String, String)>,
    /// Message id -> receipt handle (to postpone a notice whose job is not due yet).
    pub receipts: std::collections::HashMap<String, String>,
}

/// What started the invocation.
#[derive(Debug, Clone)]
pub enum Trigger {
    /// A schedule tick (or the CLI).
    Schedule(Request),
    /// Notices that tables advanced.
    Notices(Notices),
}

impl Trigger {
    /// Parse the payload: an SQS event (records from `aws:sqs`) is a batch of notices, anything
    /// else a schedule input ([`Request::from_event`]).
    pub fn from_event(v: &Value) -> Result<Self, FunctionError> {
        let from_sqs = v
            .get("Records")
            .and_then(Value::as_array)
            .and_then(|r| r.first())
            .and_then(|m| m.get("eventSource"))
            .and_then(Value::as_str)
            == Some("aws:sqs");
        if !from_sqs {
            return Request::from_event(v).map(Self::Schedule);
        }
        let event: SqsEvent = serde_json::from_value(v.clone())
            .map_err(|e| FunctionError::MalformedEvent(e.to_string()))?;
        let mut out = Notices::default();
        for m in event.records {
            let id = m.message_id.unwrap_or_default();
            if let Some(r) = m.receipt_handle {
                out.receipts.insert(id.clone(), r);
            }
            match serde_json::from_str::<RefineNotice>(m.body.as_deref().unwrap_or("")) {
                Ok(n) => out.notices.push((id, n)),
                Err(e) => out.malformed.push((
                    id,
                    format!(
                        "not a refine notice ({e}); expected {{\"job\":\"curated\",\"table\":\"raw/order\",\"version\":3,\"committed_ms\":0}}"
                    ),
                )),
            }
        }
        Ok(Self::Notices(out))
    }
}
