//! The CDC-apply kind of refine job (`[refine.cdc]`, or one per table of a `[[cdc]]` family):
//! a bronze table of changes (`__op`, `__seq`, lineage, row columns) applied per key into a
//! silver table, SCD type 1 or 2, with Delta's change data feed. Families expand into these
//! jobs at run time ([`CdcFamily::apply_job`]); a single table may be declared by hand.

use super::{RefineJob, duration};
use crate::config::{CdcFamily, FamilyTable, ScdType};
use crate::error::{Error, Result};
use serde::Deserialize;
use std::time::Duration;

/// Apply a bronze table's changes per key into the output.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CdcApply {
    /// The bronze table (append-only changes with `__op` and `__seq`).
    pub source: String,
    /// Key columns; empty: the bronze table's `lakestream.cdc.keys` property.
    #[serde(default)]
    pub keys: Vec<String>,
    /// `1` or `2`.
    #[serde(default)]
    pub scd: ScdType,
    /// How long a delete's tombstone (SCD1) or a stored delete that closed no version (SCD2)
    /// is kept (processing time).
    #[serde(default = "default_tombstone_retention", deserialize_with = "duration")]
    pub tombstone_retention: Duration,
    /// The TOAST placeholder of a Debezium source (`unavailable.value.placeholder`): a cell
    /// holding it takes the key's previous value. A family job: its Debezium family's
    /// `toast_placeholder`; none for DMS / files; by hand: this key (none by default).
    #[serde(default)]
    pub toast_placeholder: Option<String>,
    /// The times (µs since the epoch, ascending) at which the source's positions started
    /// again (a MySQL `RESET MASTER` or a fail-over to a server with its own binlog): a change
    /// whose `__source_ts` is at or after the k-th ranks after every change before it
    /// (ARCHITECTURE.md "Position resets"). A family job: its family's `position_resets`;
    /// by hand: this key (RFC 3339 texts).
    #[serde(default, deserialize_with = "position_resets")]
    pub position_resets: Vec<i64>,
    /// The family the job was expanded from (none when declared by hand).
    #[serde(skip)]
    pub family: Option<String>,
}

/// `position_resets` written as RFC 3339 texts, ascending.
fn position_resets<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<i64>, D::Error> {
    let texts = Vec::<String>::deserialize(d)?;
    parse_position_resets(&texts).map_err(serde::de::Error::custom)
}

/// RFC 3339 times (`"2026-12-04T10:00:00Z"`) -> µs since the epoch, strictly ascending; at
/// most [`MAX_POSITION_RESETS`].
pub fn parse_position_resets(texts: &[String]) -> std::result::Result<Vec<i64>, String> {
    if texts.len() > MAX_POSITION_RESETS {
        return Err(format!(
            "`position_resets` lists {} times; at most {MAX_POSITION_RESETS}",
            texts.len()
        ));
    }
    let mut out: Vec<i64> = Vec::with_capacity(texts.len());
    for t in texts {
        let at = chrono::DateTime::parse_from_rfc3339(t.trim()).map_err(|e| {
            format!(
                "`position_resets`: {t:?} is not an RFC 3339 time ({e}); write e.g. \"2026-12-04T10:00:00Z\""
            )
        })?;
        let us = at.timestamp_micros();
        if out.last().is_some_and(|prev| *prev >= us) {
            return Err(format!(
                "`position_resets` must be in ascending order without repeats ({t:?} is not after the time before it)"
            ));
        }
        out.push(us);
    }
    Ok(out)
}

/// The most position resets a family may list (each adds a prefix rank to `__seq`).
pub const MAX_POSITION_RESETS: usize = 9999;

fn default_tombstone_retention() -> Duration {
    Duration::from_secs(30 * 86_400)
}

impl CdcApply {
    /// Check the kind's rules for a job writing `output`.
    pub(crate) fn validate(&self, key: &str, output: &str, partition_by: &[String]) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.source == output {
            return bad(format!("`{key}.cdc.source` is the job's output"));
        }
        if self.keys.iter().any(String::is_empty) {
            return bad(format!("`{key}.cdc.keys` has an empty column name"));
        }
        if self.toast_placeholder.as_deref() == Some("") {
            return bad(format!("`{key}.cdc.toast_placeholder` must not be empty"));
        }
        if !partition_by.is_empty() {
            return bad(format!(
                "`{key}.partition_by`: a CDC apply output is not partitioned"
            ));
        }
        Ok(())
    }
}

impl CdcFamily {
    /// The apply job of table `t` of the family (bronze -> silver).
    pub fn apply_job(&self, t: &FamilyTable) -> Result<RefineJob> {
        Ok(RefineJob {
            job: self.job_name(t),
            output: self.silver_table(t)?,
            partition_by: vec![],
            max_files_per_run: self.max_files_per_run,
            max_mib_per_run: self.max_mib_per_run,
            snapshot_max_mib: self.snapshot_max_mib,
            ignore_changes: false,
            freshness: Some(self.freshness_of(t)),
            kind: super::JobKind::Cdc(CdcApply {
                source: self.bronze_table(t)?,
                keys: self
                    .declared_keys(t)
                    .map(<[String]>::to_vec)
                    .unwrap_or_default(),
                scd: self.scd,
                tombstone_retention: self.tombstone_retention,
                toast_placeholder: self.source.toast_placeholder().map(str::to_string),
                position_resets: self.source.position_resets().to_vec(),
                family: Some(self.family.clone()),
            }),
        })
    }
}
