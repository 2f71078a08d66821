//! The maintenance function's input: which job with its own options, on which tables. Parsed
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

/// The schedule's input: the job with its own options, on which tables.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawRequest")]
pub struct Request {
    /// The job and its options.
    pub job: JobSpec,
    /// Tables; all configured tables when absent.
    pub tables: Option<Vec<String>>,
    /// Only report what would happen; every job writes nothing.
    pub dry_run: bool,
}

/// A job with the options only it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobSpec {
    /// Compact small files.
    Optimize(OptimizeOptions),
    /// Delete unreferenced files past retention.
    Vacuum,
    /// Write a checkpoint when due, clean expired logs.
    Checkpoint,
    /// Regenerate changed symlink manifests.
    Manifest,
}

/// The optimize job's options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptimizeOptions {
    /// Only partitions changed within this many hours.
    pub changed_within_hours: Option<i64>,
    /// Stop after rewriting this many MiB; the rest is picked up next run.
    pub max_mib: Option<u64>,
    /// Minimum small files in a partition before it is compacted (default 4).
    pub min_files: Option<usize>,
}

impl JobSpec {
    /// The job.
    pub fn kind(&self) -> Job {
        match self {
            JobSpec::Optimize(_) => Job::Optimize,
            JobSpec::Vacuum => Job::Vacuum,
            JobSpec::Checkpoint => Job::Checkpoint,
            JobSpec::Manifest => Job::Manifest,
        }
    }
}

impl PartialEq<Job> for JobSpec {
    fn eq(&self, other: &Job) -> bool {
        self.kind() == *other
    }
}

/// The input as sent: every option flat beside `job` (`{"job":"optimize","min_files":2}`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    job: Job,
    #[serde(default)]
    tables: Option<Vec<String>>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    changed_within_hours: Option<i64>,
    #[serde(default)]
    max_mib: Option<u64>,
    #[serde(default)]
    min_files: Option<usize>,
}

impl TryFrom<RawRequest> for Request {
    type Error = String;

    /// Refuses an option the job does not read, naming it and the job.
    fn try_from(raw: RawRequest) -> Result<Self, String> {
        let optimize = OptimizeOptions {
            changed_within_hours: raw.changed_within_hours,
            max_mib: raw.max_mib,
            min_files: raw.min_files,
        };
        let given = [
            (
                "changed_within_hours",
                optimize.changed_within_hours.is_some(),
            ),
            ("max_mib", optimize.max_mib.is_some()),
            ("min_files", optimize.min_files.is_some()),
        ];
        let job = match raw.job {
            Job::Optimize => JobSpec::Optimize(optimize),
            Job::Vacuum => JobSpec::Vacuum,
            Job::Checkpoint => JobSpec::Checkpoint,
            Job::Manifest => JobSpec::Manifest,
        };
        if job != Job::Optimize
            && let Some((option, _)) = given.iter().find(|(_, set)| *set)
        {
            return Err(format!(
                "`{option}` is an optimize option; the {} job does not read it: remove it",
                raw.job.name()
            ));
        }
        Ok(Self {
            job,
            tables: raw.tables,
            dry_run: raw.dry_run,
        })
    }
}

impl Request {
    /// The job (without its options).
    pub fn kind(&self) -> Job {
        self.job.kind()
    }

    /// Parse the invocation payload: a ScheduleV2 `Input`; a classic scheduled event without
    /// input is refused with what to do ([`FunctionError::BadInput`]).
    pub fn from_event(v: &serde_json::Value) -> Result<Self, FunctionError> {
        if v.get("detail-type").and_then(|d| d.as_str()) == Some("Scheduled Event") {
            return Err(FunctionError::BadInput("a scheduled event without input: give the schedule an Input such as {\"job\":\"optimize\"}".into()));
        }
        serde_json::from_value(v.clone()).map_err(|e| FunctionError::BadInput(format!("bad maintenance input ({e}); expected {{\"job\":\"optimize|vacuum|checkpoint|manifest\",\"tables\":[...]}}")))
    }
}
