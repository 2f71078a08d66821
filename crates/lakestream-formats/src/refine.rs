//! The refine-jobs section of the pipeline config (`[[refine]]` in `lakestream.toml`): jobs that
//! read what Delta tables gained and write derived tables (the seed's curated job is an interval
//! join of orders with memberships). Every key is documented in README.md ("Refine jobs").

use crate::error::{Error, Result};
use serde::Deserialize;
use std::time::Duration;

/// One refine job.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefineJobConfig {
    /// Job name; part of every `txn` appId (`<pipeline>/<job>/<source table>`).
    pub job: String,
    /// Output table, relative to the lake root.
    pub output: String,
    /// Partition columns of the output table (output column names), set when it is created.
    #[serde(default)]
    pub partition_by: Vec<String>,
    /// A run reads at most this many new data files per source (whole versions; at least one
    /// version); the rest is read by the next run.
    #[serde(default = "default_max_files")]
    pub max_files_per_run: usize,
    /// A run reads at most this many MiB of new data files per source (whole versions).
    #[serde(default = "default_max_mib")]
    pub max_mib_per_run: u64,
    /// Read only new files of commits that also remove data (`dataChange=true` removes:
    /// deletes, updates, overwrites) instead of failing. Removed rows stay in the output.
    #[serde(default)]
    pub ignore_changes: bool,
    /// An interval join (the seed's curated job). Exactly one of `join` and `upsert`.
    #[serde(default)]
    pub join: Option<IntervalJoinConfig>,
    /// A keyed latest-wins upsert (the seed's processed job).
    #[serde(default)]
    pub upsert: Option<UpsertConfig>,
}

/// What a job does.
#[derive(Debug, Clone, Copy)]
pub enum RefineKind<'a> {
    /// Interval join of two sources.
    Join(&'a IntervalJoinConfig),
    /// Keyed upsert of one source.
    Upsert(&'a UpsertConfig),
}

/// A keyed, latest-wins upsert of what a source gained into the output (copy-on-write).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpsertConfig {
    /// Source table.
    pub source: String,
    /// Key columns (one output row per key).
    pub key: Vec<String>,
    /// Ordering columns, most significant first: the row with the greatest values wins (ties:
    /// the greater row as canonical JSON text). An older row never replaces a newer one.
    pub order_by: Vec<String>,
    /// CDC: the operation column and its delete values (rows with other values upsert).
    #[serde(default)]
    pub op: Option<OpConfig>,
    /// How long a delete's tombstone is kept (processing time): a row for the key older than
    /// the delete and arriving within this time is not brought back.
    #[serde(default = "default_tombstone_retention", deserialize_with = "duration")]
    pub tombstone_retention: Duration,
}

fn default_tombstone_retention() -> Duration {
    Duration::from_secs(30 * 86_400)
}

/// The CDC operation column.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpConfig {
    /// Column holding the operation, e.g. `op`.
    pub column: String,
    /// Values that mean delete, e.g. `["D"]`.
    #[serde(default = "default_delete_values")]
    pub delete: Vec<String>,
    /// Keep the operation column in the output (default: dropped).
    #[serde(default)]
    pub keep: bool,
}

fn default_delete_values() -> Vec<String> {
    vec!["D".into()]
}

fn default_max_files() -> usize {
    1000
}
fn default_max_mib() -> u64 {
    64
}

/// An inner join on equal keys with a time interval:
/// `left.key = right.key AND right.time + lower <= left.time <= right.time + upper`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalJoinConfig {
    /// The left (driving) side, e.g. orders.
    pub left: JoinSideConfig,
    /// The right side, e.g. memberships.
    pub right: JoinSideConfig,
    /// Lower bound of `left.time - right.time` (inclusive), e.g. `"0s"`.
    #[serde(default = "zero", deserialize_with = "duration")]
    pub lower: Duration,
    /// Upper bound of `left.time - right.time` (inclusive), e.g. `"1h"`.
    #[serde(deserialize_with = "duration")]
    pub upper: Duration,
    /// How far ahead of processing time (the run's clock) an event time may be: a row beyond
    /// it is dead-lettered (`future: ...`), not joined, and never moves its side's watermark,
    /// so one wrong timestamp (an epoch in microseconds read as milliseconds, a producer clock
    /// a year off) cannot make every later row of its side late.
    #[serde(default = "default_max_future_skew", deserialize_with = "duration")]
    pub max_future_skew: Duration,
}

fn zero() -> Duration {
    Duration::ZERO
}

fn default_max_future_skew() -> Duration {
    Duration::from_secs(3600)
}

/// One side of an interval join.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinSideConfig {
    /// Source table.
    pub table: String,
    /// Join key column (compared as text, so an int key matches an int key).
    pub key: String,
    /// Event-time column (timestamp).
    pub time: String,
    /// How late a row may be: a row whose time is below (the largest time in the table's
    /// earlier versions) minus `delay` is late and goes to the dead-letter table.
    #[serde(deserialize_with = "duration")]
    pub delay: Duration,
    /// Output columns taken from this side: `"name"` or `"name as output_name"`.
    pub columns: Vec<String>,
}

impl JoinSideConfig {
    /// `(source column, output column)` pairs.
    pub fn column_pairs(&self) -> Vec<(String, String)> {
        self.columns
            .iter()
            .map(|c| {
                let lower = c.to_ascii_lowercase();
                match lower.find(" as ") {
                    Some(i) => (c[..i].trim().to_string(), c[i + 4..].trim().to_string()),
                    None => (c.trim().to_string(), c.trim().to_string()),
                }
            })
            .collect()
    }
}

fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(text.trim()).map_err(|e| {
        serde::de::Error::custom(format!(
            "\"{text}\" is not a duration ({e}); use e.g. \"0s\", \"90m\", \"3h\""
        ))
    })
}

impl RefineJobConfig {
    /// What the job does (validated: exactly one kind is configured).
    pub fn kind(&self) -> Result<RefineKind<'_>> {
        match (&self.join, &self.upsert) {
            (Some(j), None) => Ok(RefineKind::Join(j)),
            (None, Some(u)) => Ok(RefineKind::Upsert(u)),
            _ => Err(Error::Config(format!(
                "refine job `{}`: configure exactly one of `[refine.join]` and `[refine.upsert]`",
                self.job
            ))),
        }
    }

    /// The output column names of a join (left side first); empty for an upsert (the source's).
    pub fn output_columns(&self) -> Vec<String> {
        let Some(join) = &self.join else {
            return vec![];
        };
        join.left
            .column_pairs()
            .into_iter()
            .chain(join.right.column_pairs())
            .map(|(_, out)| out)
            .collect()
    }

    /// The source tables (a join's left first).
    pub fn sources(&self) -> Vec<&str> {
        match (&self.join, &self.upsert) {
            (Some(j), _) => vec![&j.left.table, &j.right.table],
            (None, Some(u)) => vec![&u.source],
            (None, None) => vec![],
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
        match self.kind()? {
            RefineKind::Join(join) => self.validate_join(key, join),
            RefineKind::Upsert(upsert) => self.validate_upsert(key, upsert),
        }
    }

    fn validate_upsert(&self, key: &str, u: &UpsertConfig) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if u.source == self.output {
            return bad(format!("`{key}.upsert.source` is the job's output"));
        }
        if u.key.is_empty() || u.key.iter().any(String::is_empty) {
            return bad(format!("`{key}.upsert.key` must name at least one column"));
        }
        if u.order_by.is_empty() || u.order_by.iter().any(|c| c.is_empty() || u.key.contains(c)) {
            return bad(format!(
                "`{key}.upsert.order_by` must name at least one column that is not a key column"
            ));
        }
        if let Some(op) = &u.op
            && (op.column.is_empty() || op.delete.is_empty())
        {
            return bad(format!(
                "`{key}.upsert.op` needs a `column` and at least one `delete` value"
            ));
        }
        if let Some(p) = self.partition_by.iter().find(|p| !u.key.contains(p)) {
            return bad(format!(
                "`{key}.partition_by`: \"{p}\" is not a key column (an upsert's output may only be partitioned by key columns, so a key never moves between partitions)"
            ));
        }
        Ok(())
    }

    fn validate_join(&self, key: &str, join: &IntervalJoinConfig) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if join.lower > join.upper {
            return bad(format!(
                "`{key}.join.lower` must not be above `{key}.join.upper`"
            ));
        }
        if join.left.table == join.right.table {
            return bad(format!(
                "`{key}.join`: left and right are the same table; a self-join is not supported"
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (side, s) in [("left", &join.left), ("right", &join.right)] {
            if s.table == self.output {
                return bad(format!("`{key}.join.{side}.table` is the job's output"));
            }
            for (src, out) in s.column_pairs() {
                if src.is_empty() || out.is_empty() || !seen.insert(out.clone()) {
                    return bad(format!(
                        "`{key}.join.{side}.columns`: \"{out}\" is empty or repeated in the output"
                    ));
                }
            }
        }
        for p in &self.partition_by {
            if !seen.contains(p) {
                return bad(format!(
                    "`{key}.partition_by`: \"{p}\" is not an output column"
                ));
            }
        }
        Ok(())
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
        let RefineKind::Join(join) = job.kind()? else {
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
        assert!(
            err_of(&both).contains("exactly one of"),
            "{}",
            err_of(&both)
        );
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

    #[test]
    fn columns_with_and_without_alias() {
        let side = JoinSideConfig {
            table: "raw/member".into(),
            key: "order_owner".into(),
            time: "timestamp".into(),
            delay: Duration::from_secs(7200),
            columns: vec![
                "membership".into(),
                "timestamp AS membership_timestamp".into(),
            ],
        };
        assert_eq!(
            side.column_pairs(),
            [
                ("membership".to_string(), "membership".to_string()),
                ("timestamp".to_string(), "membership_timestamp".to_string())
            ]
        );
    }
}
