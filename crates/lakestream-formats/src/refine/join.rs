//! The interval-join kind of refine job (`[refine.join]`): which two tables, which key and event
//! time on each side, the interval and the lateness bounds. Its own rules are checked here so a
//! new kind of job never touches them.

use super::duration;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::time::Duration;

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

/// One side of an interval join: the source table and the columns the join reads. Passed whole
/// wherever the table, its key and its time column travel together.
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

impl IntervalJoinConfig {
    /// The output column names (left side first).
    pub fn output_columns(&self) -> Vec<String> {
        self.left
            .column_pairs()
            .into_iter()
            .chain(self.right.column_pairs())
            .map(|(_, out)| out)
            .collect()
    }

    /// Check the join's rules for a job writing `output` partitioned by `partition_by`; `key`
    /// is the job's config path (e.g. `refine[0]`).
    pub(crate) fn validate(&self, key: &str, output: &str, partition_by: &[String]) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.lower > self.upper {
            return bad(format!(
                "`{key}.join.lower` must not be above `{key}.join.upper`"
            ));
        }
        if self.left.table == self.right.table {
            return bad(format!(
                "`{key}.join`: left and right are the same table; a self-join is not supported"
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (side, s) in [("left", &self.left), ("right", &self.right)] {
            if s.table == output {
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
        for p in partition_by {
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
