//! The keyed-upsert kind of refine job (`[refine.upsert]`): one source, its key and ordering
//! columns, and the CDC operation column with its tombstone retention. Its own rules are checked
//! here so a new kind of job never touches them.

use super::duration;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::time::Duration;

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

impl UpsertConfig {
    /// Check the upsert's rules for a job writing `output` partitioned by `partition_by`; `key`
    /// is the job's config path (e.g. `refine[0]`).
    pub(crate) fn validate(&self, key: &str, output: &str, partition_by: &[String]) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.source == output {
            return bad(format!("`{key}.upsert.source` is the job's output"));
        }
        if self.key.is_empty() || self.key.iter().any(String::is_empty) {
            return bad(format!("`{key}.upsert.key` must name at least one column"));
        }
        if self.order_by.is_empty()
            || self
                .order_by
                .iter()
                .any(|c| c.is_empty() || self.key.contains(c))
        {
            return bad(format!(
                "`{key}.upsert.order_by` must name at least one column that is not a key column"
            ));
        }
        if let Some(op) = &self.op
            && (op.column.is_empty() || op.delete.is_empty())
        {
            return bad(format!(
                "`{key}.upsert.op` needs a `column` and at least one `delete` value"
            ));
        }
        if let Some(p) = partition_by.iter().find(|p| !self.key.contains(p)) {
            return bad(format!(
                "`{key}.partition_by`: \"{p}\" is not a key column (an upsert's output may only be partitioned by key columns, so a key never moves between partitions)"
            ));
        }
        Ok(())
    }
}
