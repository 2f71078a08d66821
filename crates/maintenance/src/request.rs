//! The maintenance function's input: which job, on which tables, with which limits. Parsed
//! from the schedule's `Input` once per invocation; a classic scheduled event without input is
//! refused with what to send.

use lakestream_lambda::FunctionError;
use serde::Deserialize;

/// A maintenance job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Job {
    /// Compact small files.
    Optimize,
    /// Delete unreferenced files past retention.
    Vacuum,
    /// Write a checkpoint when due, clean expired logs.
    Checkpoint,
    /// Regenerate changed symlink manifests.
    Manifest,
}

impl Job {
    /// The job's name as the input spells it (`optimize`, ...): the EMF `Job` dimension.
    pub fn name(self) -> &'static str {
        match self {
            Job::Optimize => "optimize",
            Job::Vacuum => "vacuum",
            Job::Checkpoint => "checkpoint",
            Job::Manifest => "manifest",
        }
    }
}

/// The schedule's input.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The job.
    pub job: Job,
    /// Tables; all configured tables when absent.
    #[serde(default)]
    pub tables: Option<Vec<String>>,
    /// Only report what would happen; every job writes nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Only partitions changed within this many hours (optimize).
    #[serde(default)]
    pub changed_within_hours: Option<i64>,
    /// Stop after rewriting this many MiB (optimize); the rest is picked up next run.
    #[serde(default)]
    pub max_mib: Option<u64>,
    /// Minimum small files in a partition before it is compacted (optimize; default 4).
    #[serde(default)]
    pub min_files: Option<usize>,
}

impl Request {
    /// Parse the invocation payload: a ScheduleV2 `Input`; a classic scheduled event without
    /// input is refused with what to do ([`FunctionError::BadInput`]).
    pub fn from_event(v: &serde_json::Value) -> Result<Self, FunctionError> {
        if v.get("detail-type").and_then(|d| d.as_str()) == Some("Scheduled Event") {
            return Err(FunctionError::BadInput("a scheduled event without input: give the schedule an Input such as {\"job\":\"optimize\"}".into()));
        }
        serde_json::from_value(v.clone()).map_err(|e| FunctionError::BadInput(format!("bad maintenance input ({e}); expected {{\"job\":\"optimize|vacuum|checkpoint|manifest\",\"tables\":[...]}}")))
    }
}
