//! The refine function's input: which jobs, and how many runs each may commit. Parsed from
//! the schedule's `Input` (or a classic scheduled event) once per invocation; the CLI builds one
//! from its arguments.

use lakestream_lambda::FunctionError;
use serde::Deserialize;

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
    /// Parse the invocation payload: a ScheduleV2 `Input`, `{}` or a classic scheduled event
    /// (both run every job). Anything else is [`FunctionError::BadInput`] saying what to send.
    pub fn from_event(v: &serde_json::Value) -> Result<Self, FunctionError> {
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
