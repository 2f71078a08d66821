//! A family's feed (`source = "debezium" | "dms" | "files"`) and the settings that belong to
//! it, as one enum: a Debezium family holds topic patterns, a DMS / files family an S3 location
//! and how its CSV files read. The TOML stays flat (every key beside `source`); [`RawFamily`]
//! reads it and refuses a key that does not belong to the family's source, naming both.

use super::{CdcFamily, ScdType};
use crate::config::Freshness;
use crate::refine::duration;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The feed's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CdcSource {
    /// Debezium change events on Kafka (MSK Connect), one topic per table.
    Debezium,
    /// AWS DMS files on S3 (full load `LOAD*.csv|parquet`, then CDC files with an `Op` column).
    Dms,
    /// Plain CSV / JSON lines / Parquet files delivered into a landing prefix (every row an
    /// upsert).
    Files,
}

impl CdcSource {
    /// The `source` value in the config.
    pub fn name(self) -> &'static str {
        match self {
            Self::Debezium => "debezium",
            Self::Dms => "dms",
            Self::Files => "files",
        }
    }
}

/// A family's feed with the settings of that feed only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSettings {
    /// `source = "debezium"`.
    Debezium(TopicSource),
    /// `source = "dms"`.
    Dms(ObjectSource),
    /// `source = "files"`.
    Files(ObjectSource),
}

/// The settings of a Debezium family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSource {
    /// Topic patterns `<prefix>.<schema>.<table>`; `*` matches one or more characters other
    /// than `.` (e.g. `crm.public.*`, `crm.*.*`).
    pub topics: Vec<String>,
    /// The connector's `unavailable.value.placeholder` (PostgreSQL: an unchanged TOASTed
    /// column of an UPDATE): a cell holding it (as text, its UTF-8 bytes, or their base64)
    /// takes the key's previous value in the apply. Default [`DEFAULT_TOAST_PLACEHOLDER`].
    pub toast_placeholder: String,
    /// When the source's positions started again (µs since the epoch, ascending): see
    /// [`CdcApply::position_resets`](crate::refine::cdc::CdcApply::position_resets).
    pub position_resets: Vec<i64>,
}

/// Debezium's default `unavailable.value.placeholder`.
pub const DEFAULT_TOAST_PLACEHOLDER: &str = "__debezium_unavailable_value";

/// The settings of a DMS / files family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSource {
    /// `s3://<bucket>/<prefix>/`; objects at `<prefix>/<schema>/<table>/...`. Locally
    /// (`lakestream invoke s3-logs --objects DIR`) the bucket is a directory of `DIR`.
    pub location: String,
    /// CSV files: the first line names the columns (DMS `AddColumnName=true`). Default: false
    /// for DMS, true for plain files.
    pub csv_header: bool,
    /// CSV field delimiter (one ASCII character; default `,`).
    pub csv_delimiter: u8,
    /// The commit-time column (DMS `TimestampColumnName`): it orders changes before the file
    /// order, and fills `__source_ts`.
    pub timestamp_column: Option<String>,
}

impl SourceSettings {
    /// The source kind.
    pub fn kind(&self) -> CdcSource {
        match self {
            Self::Debezium(_) => CdcSource::Debezium,
            Self::Dms(_) => CdcSource::Dms,
            Self::Files(_) => CdcSource::Files,
        }
    }

    /// Debezium: the topic patterns; empty for the other sources.
    pub fn topics(&self) -> &[String] {
        match self {
            Self::Debezium(t) => &t.topics,
            Self::Dms(_) | Self::Files(_) => &[],
        }
    }

    /// Debezium: the TOAST placeholder; `None` for the other sources (they send none).
    pub fn toast_placeholder(&self) -> Option<&str> {
        match self {
            Self::Debezium(t) => Some(&t.toast_placeholder),
            Self::Dms(_) | Self::Files(_) => None,
        }
    }

    /// Debezium: the position resets; empty for the other sources (their `__seq` is not a
    /// source position).
    pub fn position_resets(&self) -> &[i64] {
        match self {
            Self::Debezium(t) => &t.position_resets,
            Self::Dms(_) | Self::Files(_) => &[],
        }
    }

    /// DMS / files: the object settings; `None` for Debezium.
    pub fn objects(&self) -> Option<&ObjectSource> {
        match self {
            Self::Debezium(_) => None,
            Self::Dms(o) | Self::Files(o) => Some(o),
        }
    }
}

impl PartialEq<CdcSource> for SourceSettings {
    fn eq(&self, other: &CdcSource) -> bool {
        self.kind() == *other
    }
}

/// A `[[cdc]]` block as written: every key flat beside `source`. Converted into [`CdcFamily`]
/// (see [`TryFrom`]); the field documentation is on [`CdcFamily`] and README.md.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFamily {
    family: String,
    source: CdcSource,
    #[serde(default)]
    topics: Option<Vec<String>>,
    #[serde(default)]
    location: Option<String>,
    #[serde(default)]
    bronze: Option<String>,
    #[serde(default)]
    silver: Option<String>,
    #[serde(default)]
    scd: ScdType,
    #[serde(default)]
    keys: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    columns: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    tables: Option<Vec<String>>,
    #[serde(default)]
    csv_header: Option<bool>,
    #[serde(default)]
    csv_delimiter: Option<String>,
    #[serde(default)]
    timestamp_column: Option<String>,
    #[serde(default)]
    toast_placeholder: Option<String>,
    #[serde(default)]
    position_resets: Option<Vec<String>>,
    #[serde(default = "default_tombstone_retention", deserialize_with = "duration")]
    tombstone_retention: Duration,
    #[serde(default = "default_max_files")]
    max_files_per_run: usize,
    #[serde(default = "default_max_mib")]
    max_mib_per_run: u64,
    #[serde(default)]
    freshness: Option<RawFreshness>,
}

/// `freshness = "15m"` (the whole family) or `freshness = { "*" = "15m", "public.orders" =
/// "60s" }` (per table).
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a freshness target such as \"15m\", or one per table: { \"*\" = \"15m\", \"public.orders\" = \"60s\" }"
)]
enum RawFreshness {
    Family(String),
    PerTable(BTreeMap<String, String>),
}

impl RawFreshness {
    /// The targets by table key; a key must be `*` or `<schema>.<table>`, and one of the
    /// family's `tables` when it lists them (a misspelt key would silently not apply).
    fn parse(self, tables: Option<&[String]>) -> Result<BTreeMap<String, Freshness>, String> {
        let entries = match self {
            Self::Family(t) => vec![(super::EVERY_TABLE.to_string(), t)],
            Self::PerTable(m) => m.into_iter().collect(),
        };
        entries
            .into_iter()
            .map(|(table, t)| {
                let known = table == super::EVERY_TABLE
                    || (table.split('.').count() == 2
                        && tables.is_none_or(|list| list.contains(&table)));
                if !known {
                    return Err(format!(
                        "`freshness` names `{table}`: use \"*\" or a table of the family as \"<schema>.<table>\" (one of `tables` when given)"
                    ));
                }
                Freshness::parse(&t)
                    .map(|f| (table.clone(), f))
                    .map_err(|e| format!("`freshness` of `{table}`: {e}"))
            })
            .collect()
    }
}

fn default_tombstone_retention() -> Duration {
    Duration::from_secs(30 * 86_400)
}
fn default_max_files() -> usize {
    1000
}
fn default_max_mib() -> u64 {
    64
}

impl RawFamily {
    /// The source's own settings; a key of another source is refused, naming it.
    fn settings(&mut self) -> Result<SourceSettings, String> {
        Ok(match self.source {
            CdcSource::Debezium => SourceSettings::Debezium(self.topic_source()?),
            CdcSource::Dms => SourceSettings::Dms(self.object_source()?),
            CdcSource::Files => SourceSettings::Files(self.object_source()?),
        })
    }

    fn foreign(&self, key: &str, owner: &str) -> String {
        format!(
            "`{key}` does not belong to a {} family (it is a {owner} setting): remove it, or check `source`",
            self.source.name()
        )
    }

    fn topic_source(&mut self) -> Result<TopicSource, String> {
        for (key, set) in [
            ("location", self.location.is_some()),
            ("csv_header", self.csv_header.is_some()),
            ("csv_delimiter", self.csv_delimiter.is_some()),
            ("timestamp_column", self.timestamp_column.is_some()),
        ] {
            if set {
                return Err(self.foreign(key, "dms / files"));
            }
        }
        let toast_placeholder = self
            .toast_placeholder
            .take()
            .unwrap_or_else(|| DEFAULT_TOAST_PLACEHOLDER.to_string());
        if toast_placeholder.is_empty() {
            return Err("`toast_placeholder` must not be empty (Debezium's default is \"__debezium_unavailable_value\")".into());
        }
        let position_resets = crate::refine::cdc::parse_position_resets(
            &self.position_resets.take().unwrap_or_default(),
        )?;
        Ok(TopicSource {
            topics: self.topics.take().unwrap_or_default(),
            toast_placeholder,
            position_resets,
        })
    }

    fn object_source(&mut self) -> Result<ObjectSource, String> {
        for (key, set) in [
            ("topics", self.topics.is_some()),
            ("toast_placeholder", self.toast_placeholder.is_some()),
            ("position_resets", self.position_resets.is_some()),
        ] {
            if set {
                return Err(self.foreign(key, "debezium"));
            }
        }
        let Some(location) = self.location.take() else {
            return Err(format!(
                "a {} family needs `location` = \"s3://<bucket>/<prefix>/\" (objects at <prefix>/<schema>/<table>/<file>)",
                self.source.name()
            ));
        };
        let csv_delimiter = match self.csv_delimiter.as_deref().unwrap_or(",").as_bytes() {
            [b] if b.is_ascii() => *b,
            _ => return Err("`csv_delimiter` must be one ASCII character".into()),
        };
        Ok(ObjectSource {
            location,
            csv_header: self.csv_header.unwrap_or(self.source == CdcSource::Files),
            csv_delimiter,
            timestamp_column: self.timestamp_column.take(),
        })
    }
}

impl TryFrom<RawFamily> for CdcFamily {
    type Error = String;

    fn try_from(mut raw: RawFamily) -> Result<Self, String> {
        let source = raw.settings()?;
        let freshness = raw
            .freshness
            .take()
            .map(|f| f.parse(raw.tables.as_deref()))
            .transpose()?;
        Ok(Self {
            freshness: freshness.unwrap_or_default(),
            family: raw.family,
            source,
            bronze: raw.bronze,
            silver: raw.silver,
            scd: raw.scd,
            keys: raw.keys,
            columns: raw.columns,
            tables: raw.tables,
            tombstone_retention: raw.tombstone_retention,
            max_files_per_run: raw.max_files_per_run,
            max_mib_per_run: raw.max_mib_per_run,
            snapshot_max_mib: None,
        })
    }
}
