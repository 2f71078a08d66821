//! The `[[cdc]]` section: table families of a change-data-capture feed. One block declares
//! every table of a source database — a Debezium topic pattern (`crm.public.*`) or an S3
//! prefix of DMS / plain file deliveries — with name templates for the bronze table (every
//! change, append-only, with its lineage) and the silver table (changes applied per key, SCD
//! type 1 or 2). A table that appears in the feed later gets its tables without a redeploy.
//! Every key is documented in README.md ("CDC table families").

use crate::config::Freshness;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

mod column;
mod layout;
mod source;
mod template;

pub use column::{CdcColumn, CdcType};
pub use layout::{bronze, silver};
pub use source::{CdcSource, DEFAULT_TOAST_PLACEHOLDER, ObjectSource, SourceSettings, TopicSource};
pub use template::topic_matches;
use template::{check_template, fill, fixed_prefix, unfill};

/// The `keys` / `columns` entry that applies to every table of a family without its own entry.
pub const EVERY_TABLE: &str = "*";

/// One family of CDC tables. Read from the flat `[[cdc]]` block (see [`SourceSettings`]: a key
/// of another source is refused).
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "source::RawFamily")]
pub struct CdcFamily {
    /// Family name (`[A-Za-z0-9_-]`): part of the apply jobs' names (`cdc-<family>/<schema>.<table>`).
    pub family: String,
    /// The feed (`source`) with its own settings (`topics`; `location`, `csv_*`,
    /// `timestamp_column`).
    pub source: SourceSettings,
    /// Bronze table name template (`{schema}` and `{table}` as whole segments).
    pub bronze: Option<String>,
    /// Silver table name template (`{schema}` and `{table}` as whole segments).
    pub silver: Option<String>,
    /// `1` (latest row per key) or `2` (history rows with `__START_AT` / `__END_AT`).
    pub scd: ScdType,
    /// Key columns per table (`"<schema>.<table>" = ["id"]`; `"*"`: every table without its
    /// own entry). Debezium default: the record key's fields; DMS / files: required for every
    /// applied table.
    pub keys: BTreeMap<String, Vec<String>>,
    /// Declared columns per table (`"<schema>.<table>" = ["id int64", "amount decimal(10,2)"]`;
    /// `"*"`: every table without its own entry), in the source table's order: required for CSV without a header row; elsewhere they fix
    /// the type of the named columns (e.g. Debezium without `schemas.enable`).
    pub columns: BTreeMap<String, Vec<String>>,
    /// Only these tables (`"<schema>.<table>"`; default: every table of the feed).
    pub tables: Option<Vec<String>>,
    /// How long a delete's tombstone is kept (SCD1): a late older change for the key within
    /// this time is not brought back.
    pub tombstone_retention: Duration,
    /// An apply run reads at most this many new bronze data files (whole versions).
    pub max_files_per_run: usize,
    /// An apply run reads at most this many MiB of new bronze data files (whole versions).
    pub max_mib_per_run: u64,
    /// The most MiB of Parquet a run that reads bronze's whole snapshot (a CDC apply's first
    /// run, `--rebuild`) may read, else it fails saying how to proceed: set by the refine
    /// function from its memory (`refine::memory`); `None` (the config, the CLI): no limit.
    pub snapshot_max_mib: Option<u64>,
    /// Freshness target per table (`"<schema>.<table>"`, `"*"`: every table without its own
    /// entry; written `freshness = "15m"` for the whole family). Default `60s`.
    pub freshness: BTreeMap<String, Freshness>,
}

/// Slowly changing dimension type of the silver tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScdType {
    /// One row per key: the latest change wins; deletes remove the row.
    #[default]
    One,
    /// Every change a row: `__START_AT` / `__END_AT` (open row: null); deletes close the row.
    Two,
}

impl<'de> Deserialize<'de> for ScdType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match u8::deserialize(d)? {
            1 => Ok(Self::One),
            2 => Ok(Self::Two),
            n => Err(serde::de::Error::custom(format!(
                "scd must be 1 or 2, got {n}"
            ))),
        }
    }
}

/// One table of a family, as named by the feed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FamilyTable {
    /// Source schema (PostgreSQL schema, MySQL database).
    pub schema: String,
    /// Source table.
    pub table: String,
}

impl FamilyTable {
    /// `<schema>.<table>`, the key of the per-table settings.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

impl CdcFamily {
    /// The bronze template (default `bronze/<family>/{schema}/{table}`).
    pub fn bronze_template(&self) -> String {
        self.bronze
            .clone()
            .unwrap_or_else(|| format!("bronze/{}/{{schema}}/{{table}}", self.family))
    }

    /// The silver template (default `silver/<family>/{schema}/{table}`).
    pub fn silver_template(&self) -> String {
        self.silver
            .clone()
            .unwrap_or_else(|| format!("silver/{}/{{schema}}/{{table}}", self.family))
    }

    /// The directory holding every bronze table of the family (the template's fixed leading
    /// segments): listed to find the family's tables.
    pub fn bronze_directory(&self) -> String {
        fixed_prefix(&self.bronze_template())
    }

    /// The directory holding every silver table of the family.
    pub fn silver_directory(&self) -> String {
        fixed_prefix(&self.silver_template())
    }

    /// The bronze table of `t`; refused when a name segment is not a valid table segment.
    pub fn bronze_table(&self, t: &FamilyTable) -> Result<String> {
        fill(&self.bronze_template(), t)
    }

    /// The silver table of `t`.
    pub fn silver_table(&self, t: &FamilyTable) -> Result<String> {
        fill(&self.silver_template(), t)
    }

    /// The freshness target of table `t`: its own entry, else the family's (`"*"`), else the
    /// default (`60s`).
    pub fn freshness_of(&self, t: &FamilyTable) -> Freshness {
        self.freshness
            .get(&t.qualified())
            .or_else(|| self.freshness.get(EVERY_TABLE))
            .copied()
            .unwrap_or_default()
    }

    /// The apply job's name for `t` (`cdc-<family>/<schema>.<table>`).
    pub fn job_name(&self, t: &FamilyTable) -> String {
        format!("cdc-{}/{}", self.family, t.qualified())
    }

    /// The bronze table named `name` back to its source table (a listing of
    /// [`bronze_directory`](Self::bronze_directory)); `None` when it does not fit the template.
    pub fn table_of_bronze(&self, name: &str) -> Option<FamilyTable> {
        unfill(&self.bronze_template(), name)
    }

    /// The silver table named `name` back to its source table; `None` when it does not fit.
    pub fn table_of_silver(&self, name: &str) -> Option<FamilyTable> {
        unfill(&self.silver_template(), name)
    }

    /// Whether the family applies `t` (its `tables` list, when given).
    pub fn includes(&self, t: &FamilyTable) -> bool {
        self.tables
            .as_ref()
            .is_none_or(|list| list.iter().any(|q| *q == t.qualified()))
    }

    /// Debezium: the table of `topic` (`<prefix>.<schema>.<table>`) when a pattern matches.
    pub fn table_of_topic(&self, topic: &str) -> Option<FamilyTable> {
        if !self.source.topics().iter().any(|p| topic_matches(p, topic)) {
            return None;
        }
        let mut parts = topic.rsplitn(3, '.');
        let table = parts.next()?;
        let schema = parts.next()?;
        let t = FamilyTable {
            schema: schema.to_string(),
            table: table.to_string(),
        };
        self.includes(&t).then_some(t)
    }

    /// Every source table of the family is in one schema: a Debezium family whose topic
    /// patterns all name the same schema segment, without `*`.
    fn one_schema(&self) -> bool {
        let schemas: Vec<Option<&str>> = self
            .source
            .topics()
            .iter()
            .map(|p| p.rsplit('.').nth(1).filter(|s| !s.contains('*')))
            .collect();
        schemas
            .first()
            .is_some_and(|first| first.is_some() && schemas.iter().all(|s| s == first))
    }

    /// DMS / files: `(bucket, prefix)` of [`location`](ObjectSource::location), the prefix
    /// ending in `/` (or empty).
    pub fn bucket_and_prefix(&self) -> Option<(String, String)> {
        let rest = self.source.objects()?.location.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = if prefix.is_empty() || prefix.ends_with('/') {
            prefix.to_string()
        } else {
            format!("{prefix}/")
        };
        Some((bucket.to_string(), prefix))
    }

    /// DMS / files: the table of object `key` in `bucket` (`<prefix><schema>/<table>/<...>`).
    pub fn table_of_object(&self, bucket: &str, key: &str) -> Option<FamilyTable> {
        let (b, prefix) = self.bucket_and_prefix()?;
        if b != bucket {
            return None;
        }
        let rest = key.strip_prefix(prefix.as_str())?;
        let mut parts = rest.splitn(3, '/');
        let (schema, table, file) = (parts.next()?, parts.next()?, parts.next()?);
        if schema.is_empty() || table.is_empty() || file.is_empty() || file.ends_with('/') {
            return None;
        }
        let t = FamilyTable {
            schema: schema.to_string(),
            table: table.to_string(),
        };
        self.includes(&t).then_some(t)
    }

    /// Declared key columns of `t`, if any: its own entry, else the family-wide `"*"` entry.
    pub fn declared_keys(&self, t: &FamilyTable) -> Option<&[String]> {
        self.keys
            .get(&t.qualified())
            .or_else(|| self.keys.get(EVERY_TABLE))
            .map(Vec::as_slice)
    }

    /// Declared columns of `t` (parsed), in order: its own entry, else the family-wide `"*"`
    /// entry; empty when neither is declared.
    pub fn declared_columns(&self, t: &FamilyTable) -> Result<Vec<CdcColumn>> {
        let Some((name, list)) = self
            .columns
            .get_key_value(&t.qualified())
            .or_else(|| self.columns.get_key_value(EVERY_TABLE))
        else {
            return Ok(vec![]);
        };
        list.iter()
            .map(|c| CdcColumn::parse(c))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Config(format!("`cdc.{}.columns.\"{name}\"`: {e}", self.family)))
    }

    /// CSV files have a header row (DMS / files; default false for DMS, true for files).
    pub fn has_csv_header(&self) -> bool {
        self.source.objects().is_some_and(|o| o.csv_header)
    }

    /// The CSV field delimiter (DMS / files; default `,`).
    pub fn csv_delimiter(&self) -> u8 {
        self.source.objects().map_or(b',', |o| o.csv_delimiter)
    }

    /// DMS / files: the commit-time column, if declared.
    pub fn timestamp_column(&self) -> Option<&str> {
        self.source.objects()?.timestamp_column.as_deref()
    }

    /// Check the block's rules; `key` is its config path (e.g. `cdc[0]`).
    pub fn validate(&self, key: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.family.is_empty()
            || !self
                .family
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return bad(format!(
                "`{key}.family` = \"{}\": use [A-Za-z0-9_-], e.g. crm",
                self.family
            ));
        }
        match &self.source {
            SourceSettings::Debezium(TopicSource { topics, .. }) => {
                if topics.is_empty() {
                    return bad(format!(
                        "`{key}`: a debezium family names `topics` (e.g. [\"crm.public.*\"])"
                    ));
                }
                for p in topics {
                    if p.split('.').count() < 3 || p.split('.').any(str::is_empty) {
                        return bad(format!(
                            "`{key}.topics`: \"{p}\" is not `<prefix>.<schema>.<table>` (`*` for any segment)"
                        ));
                    }
                }
            }
            SourceSettings::Dms(_) | SourceSettings::Files(_) => match self.bucket_and_prefix() {
                Some((b, _)) if crate::names::check_bucket_name(&b).is_ok() => {}
                _ => {
                    return bad(format!(
                        "`{key}.location` must be s3://<bucket>/<prefix>/ (objects at <prefix>/<schema>/<table>/<file>)"
                    ));
                }
            },
        }
        for (name, template) in [
            ("bronze", self.bronze_template()),
            ("silver", self.silver_template()),
        ] {
            check_template(&format!("{key}.{name}"), &template)?;
            if !template.split('/').any(|seg| seg == "{schema}") && !self.one_schema() {
                return bad(format!(
                    "`{key}.{name}` = \"{template}\" has no `{{schema}}`: two source tables of \
                     one name in different schemas would share one table; add `{{schema}}` (a \
                     Debezium family whose topics all name one schema may leave it out)"
                ));
            }
        }
        let (b, s) = (self.bronze_directory(), self.silver_directory());
        if b.eq_ignore_ascii_case(&s) {
            return bad(format!(
                "`{key}.bronze` and `{key}.silver` share the directory \"{b}\": give silver its own (e.g. silver/{{schema}}/{{table}})"
            ));
        }
        if self.max_files_per_run == 0 || self.max_mib_per_run == 0 {
            return bad(format!(
                "`{key}.max_files_per_run` and `{key}.max_mib_per_run` must be >= 1"
            ));
        }
        for (table, cols) in &self.keys {
            if cols.is_empty() || cols.iter().any(String::is_empty) {
                return bad(format!(
                    "`{key}.keys.\"{table}\"` must name at least one column"
                ));
            }
        }
        for (table, cols) in &self.columns {
            for c in cols {
                if let Err(e) = CdcColumn::parse(c) {
                    return bad(format!("`{key}.columns.\"{table}\"`: {e}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
