//! The refine-jobs section of the pipeline config (`[[refine]]` in `lakestream.toml`): jobs that
//! read what Delta tables gained and write derived tables (the seed's curated job is an interval
//! join of orders with memberships, its processed job a keyed upsert). Every key is documented
//! in README.md ("Refine jobs").
//!
//! A job is its common settings plus exactly one kind ([`JobKind`]), decided when the TOML is
//! parsed: callers match on the kind and never re-check which one is set. Each kind's settings
//! and rules live in their own module ([`join`], [`upsert`], [`cdc`], [`aggregate`]); a new kind is a new module and a
//! new variant.

pub mod aggregate;
pub mod cadence;
pub mod cdc;
pub mod join;
pub mod readers;
pub mod upsert;

use crate::error::{Error, Result};
use aggregate::AggregateConfig;
use cdc::CdcApply;
use join::IntervalJoinConfig;
use serde::Deserialize;
use std::time::Duration;
use upsert::UpsertConfig;

/// One refine job.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawRefineJob")]
pub struct RefineJob {
    /// Job name; part of every `txn` appId (`<pipeline>/<job>/<source table>`).
    pub job: String,
    /// Output table, relative to the lake root.
    pub output: String,
    /// Partition columns of the output table (output column names), set when it is created.
    pub partition_by: Vec<String>,
    /// A run reads at most this many new data files per source (whole versions; at least one
    /// version); the rest is read by the next run.
    pub max_files_per_run: usize,
    /// A run reads at most this many MiB of new data files per source (whole versions).
    pub max_mib_per_run: u64,
    /// The most MiB of Parquet a run that reads a source's whole snapshot (a CDC apply's first
    /// run, `--rebuild`) may read, else it fails saying how to proceed: set by the refine
    /// function from its memory (`refine::memory`); `None` (the config, the CLI): no limit.
    pub snapshot_max_mib: Option<u64>,
    /// Read only new files of commits that also remove data (`dataChange=true` removes:
    /// deletes, updates, overwrites) instead of failing. Removed rows stay in the output.
    pub ignore_changes: bool,
    /// Freshness target of the output (`freshness`); `None`: the longest of its sources'
    /// targets, or the default `60s` ([`PipelineConfig::freshness_of_job`](crate::config::PipelineConfig::freshness_of_job)).
    pub freshness: Option<crate::config::Freshness>,
    /// What the job does.
    pub kind: JobKind,
}

/// What a job does: exactly one kind.
#[derive(Debug, Clone)]
pub enum JobKind {
    /// Interval join of two sources (`[refine.join]`, the seed's curated job).
    Join(IntervalJoinConfig),
    /// Keyed latest-wins upsert of one source (`[refine.upsert]`, the seed's processed job).
    Upsert(UpsertConfig),
    /// CDC changes applied per key, SCD1 or SCD2, with the change data feed (`[refine.cdc]`,
    /// or expanded from a `[[cdc]]` family).
    Cdc(CdcApply),
    /// Incremental aggregate of one source, one row per group (`[refine.aggregate]`, a gold
    /// table).
    Aggregate(AggregateConfig),
}

/// The TOML shape of a job: both kinds optional, so a job naming both or neither is refused
/// with a message that says so (not serde's "unknown variant").
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRefineJob {
    job: String,
    output: String,
    #[serde(default)]
    partition_by: Vec<String>,
    #[serde(default = "default_max_files")]
    max_files_per_run: usize,
    #[serde(default = "default_max_mib")]
    max_mib_per_run: u64,
    #[serde(default)]
    ignore_changes: bool,
    #[serde(default)]
    freshness: Option<crate::config::Freshness>,
    #[serde(default)]
    join: Option<IntervalJoinConfig>,
    #[serde(default)]
    upsert: Option<UpsertConfig>,
    #[serde(default)]
    cdc: Option<CdcApply>,
    #[serde(default)]
    aggregate: Option<AggregateConfig>,
}

/// serde's conversion hook: the message becomes a `config:` error with the key and line named
/// ([`PipelineConfig::from_toml`](crate::config::PipelineConfig::from_toml)).
impl TryFrom<RawRefineJob> for RefineJob {
    type Error = String;

    fn try_from(raw: RawRefineJob) -> std::result::Result<Self, String> {
        let kind = match (raw.join, raw.upsert, raw.cdc, raw.aggregate) {
            (Some(j), None, None, None) => JobKind::Join(j),
            (None, Some(u), None, None) => JobKind::Upsert(u),
            (None, None, Some(c), None) => JobKind::Cdc(c),
            (None, None, None, Some(a)) => JobKind::Aggregate(a),
            _ => {
                return Err(format!(
                    "refine job `{}`: configure exactly one of `[refine.join]`, `[refine.upsert]`, `[refine.cdc]` and `[refine.aggregate]`",
                    raw.job
                ));
            }
        };
        Ok(Self {
            job: raw.job,
            output: raw.output,
            partition_by: raw.partition_by,
            max_files_per_run: raw.max_files_per_run,
            max_mib_per_run: raw.max_mib_per_run,
            snapshot_max_mib: None,
            ignore_changes: raw.ignore_changes,
            freshness: raw.freshness,
            kind,
        })
    }
}

fn default_max_files() -> usize {
    1000
}
fn default_max_mib() -> u64 {
    64
}

/// A duration written as text (`"90m"`, `"3h"`), with an error that shows how to write one.
pub(crate) fn duration<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(text.trim()).map_err(|e| {
        serde::de::Error::custom(format!(
            "\"{text}\" is not a duration ({e}); use e.g. \"0s\", \"90m\", \"3h\""
        ))
    })
}

impl RefineJob {
    /// The output column names of a join (left side first); empty for an upsert (the source's).
    pub fn output_columns(&self) -> Vec<String> {
        match &self.kind {
            JobKind::Join(join) => join.output_columns(),
            JobKind::Aggregate(a) => a.output_columns(),
            JobKind::Upsert(_) | JobKind::Cdc(_) => vec![],
        }
    }

    /// The source tables (a join's left first).
    pub fn sources(&self) -> Vec<&str> {
        match &self.kind {
            JobKind::Join(j) => vec![&j.left.table, &j.right.table],
            JobKind::Upsert(u) => vec![&u.source],
            JobKind::Cdc(c) => vec![&c.source],
            JobKind::Aggregate(a) => vec![&a.source],
        }
    }

    /// Check the job's own rules; `key` is the job's config path (e.g. `refine[0]`).
    pub fn validate(&self, key: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.job.is_empty()
            || !self
                .job
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return bad(format!(
                "`{key}.job` = \"{}\": use [A-Za-z0-9_-], e.g. curated",
                self.job
            ));
        }
        if self.max_files_per_run == 0 || self.max_mib_per_run == 0 {
            return bad(format!(
                "`{key}.max_files_per_run` and `{key}.max_mib_per_run` must be >= 1"
            ));
        }
        match &self.kind {
            JobKind::Join(join) => join.validate(key, &self.output, &self.partition_by),
            JobKind::Upsert(upsert) => upsert.validate(key, &self.output, &self.partition_by),
            JobKind::Cdc(cdc) => cdc.validate(key, &self.output, &self.partition_by),
            JobKind::Aggregate(a) => a.validate(key, &self.output, &self.partition_by),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "pipeline = \"p\"\n[lake]\nroot = \"/tmp/l\"\n";
    const JOB: &str = r#"
[[refine]]
job = "curated"
output = "curated/order"
partition_by = ["hour"]
[refine.join]
upper = "1h"
left = { table = "raw/order", key = "k", time = "t", delay = "3h", columns = ["a", "hour"] }
right = { table = "raw/member", key = "k", time = "t", delay = "2h", columns = ["t as b"] }
"#;

    fn err_of(text: &str) -> String {
        match crate::config::PipelineConfig::from_toml(text) {
            Ok(_) => "parsed".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_job_parses_with_defaults() -> anyhow::Result<()> {
        let cfg = crate::config::PipelineConfig::from_toml(&format!("{BASE}{JOB}"))?;
        let job = cfg
            .refine_job("curated")
            .ok_or_else(|| anyhow::anyhow!("no job"))?;
        let JobKind::Join(join) = &job.kind else {
            anyhow::bail!("not a join");
        };
        assert_eq!(join.lower, Duration::ZERO);
        assert_eq!(join.upper, Duration::from_secs(3600));
        assert_eq!(join.left.delay, Duration::from_secs(3 * 3600));
        assert_eq!(join.max_future_skew, Duration::from_secs(3600));
        assert_eq!((job.max_files_per_run, job.max_mib_per_run), (1000, 64));
        assert_eq!(job.output_columns(), ["a", "hour", "b"]);
        Ok(())
    }

    #[test]
    fn bad_jobs_name_the_key() {
        let job = format!("{BASE}{JOB}");
        let e = err_of(&job.replace("delay = \"3h\"", "delay = \"3 parsecs\""));
        assert!(
            e.contains("refine[0].join.left.delay") && e.contains("duration"),
            "{e}"
        );
        let e = err_of(&job.replace("upper = \"1h\"", "upper = \"1h\"\nlower = \"2h\""));
        assert!(e.contains("refine[0].join.lower"), "{e}");
        let e = err_of(&job.replace("partition_by = [\"hour\"]", "partition_by = [\"day\"]"));
        assert!(e.contains("refine[0].partition_by"), "{e}");
        let e = err_of(&job.replace("columns = [\"t as b\"]", "columns = [\"a\"]"));
        assert!(e.contains("refine[0].join.right.columns"), "{e}");
        let e = err_of(&job.replace("output = \"curated/order\"", "output = \"dead_letters\""));
        assert!(e.contains("refine[0].output"), "{e}");
        let e = err_of(&format!("{job}{}", JOB));
        assert!(e.contains("listed twice"), "{e}");
        let both = job.replace(
            "[refine.join]",
            "[refine.upsert]\nsource = \"raw/x\"\nkey = [\"k\"]\norder_by = [\"t\"]\n[refine.join]",
        );
        let e = err_of(&both);
        assert!(
            e.contains("exactly one of") && e.contains("refine[0]"),
            "{e}"
        );
        let neither = format!("{BASE}[[refine]]\njob = \"x\"\noutput = \"out\"\n");
        let e = err_of(&neither);
        assert!(
            e.contains("refine job `x`: configure exactly one of"),
            "{e}"
        );
        let typo = job.replace("partition_by", "partition_bys");
        let e = err_of(&typo);
        assert!(e.contains("partition_bys"), "{e}");
    }

    #[test]
    fn upsert_jobs() {
        let upsert = |extra: &str| {
            format!(
                "{BASE}[[refine]]\njob = \"p\"\noutput = \"processed/order\"\n{extra}[refine.upsert]\nsource = \"curated/order\"\nkey = [\"order_id\"]\norder_by = [\"timestamp\"]\n"
            )
        };
        assert_eq!(err_of(&upsert("")), "parsed");
        let e = err_of(&upsert("partition_by = [\"day\"]\n"));
        assert!(e.contains("not a key column"), "{e}");
        let e =
            err_of(&upsert("").replace("order_by = [\"timestamp\"]", "order_by = [\"order_id\"]"));
        assert!(e.contains("refine[0].upsert.order_by"), "{e}");
        let e = err_of(
            &upsert("").replace("source = \"curated/order\"", "source = \"processed/order\""),
        );
        assert!(e.contains("refine[0].upsert.source"), "{e}");
    }
}
