//! The `[[topics]]` section: which Kafka topic lands in which table, with which declared
//! columns, partitioning, schema mode and Kafka metadata columns, and the rules a topic's own
//! settings must follow (the cross-table rules are in [`tables`](crate::tables)).

use super::Freshness;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::HashSet;

/// One Kafka topic and the table it lands in.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicConfig {
    /// Kafka topic name (may contain `-` and `.`).
    pub topic: String,
    /// Target table, relative to the lake root (e.g. `raw/order`).
    pub table: String,
    /// Declared columns of the JSON value.
    pub columns: Vec<ColumnConfig>,
    /// Partitioning of the table.
    #[serde(default)]
    pub partition_by: Partitioning,
    /// `enforce` (unknown fields ignored and counted) or `merge` (unknown fields add columns).
    #[serde(default)]
    pub schema_mode: SchemaMode,
    /// Kafka metadata to store as columns: any of `topic`, `partition`, `offset`, `timestamp`.
    #[serde(default)]
    pub kafka_metadata: Vec<KafkaMetadataColumn>,
    /// Freshness target of the table (default `60s`): its MSK batching window follows from it
    /// ([`Freshness::batching_window`]).
    #[serde(default)]
    pub freshness: Freshness,
}

/// One declared column.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnConfig {
    /// Column name, equal to the JSON field name.
    pub name: String,
    /// Column type.
    #[serde(rename = "type")]
    pub data_type: ColumnType,
    /// Whether the field may be null or missing (default true).
    #[serde(default = "yes")]
    pub nullable: bool,
}

fn yes() -> bool {
    true
}

/// Supported column types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// UTF-8 text.
    String,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// 64-bit float.
    Float64,
    /// true/false.
    Boolean,
    /// Instant, UTC, microsecond precision. JSON: ISO-8601 string or epoch milliseconds.
    Timestamp,
    /// Calendar date. JSON: `YYYY-MM-DD`.
    Date,
}

/// How a table is partitioned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Partitioning {
    /// Not partitioned.
    #[default]
    None,
    /// `year`,`month`,`day`,`hour` of the processing time, two-digit strings (year `22`).
    ProcessingTime,
    /// By the listed declared columns.
    Columns(Vec<String>),
}

impl<'de> Deserialize<'de> for Partitioning {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            List(Vec<String>),
        }
        match Raw::deserialize(d)? {
            Raw::Word(w) if w == "processing_time" => Ok(Partitioning::ProcessingTime),
            Raw::Word(w) if w == "none" => Ok(Partitioning::None),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "partition_by must be \"processing_time\", \"none\" or a list of columns, got \"{w}\""
            ))),
            Raw::List(cols) if cols.is_empty() => Ok(Partitioning::None),
            Raw::List(cols) => Ok(Partitioning::Columns(cols)),
        }
    }
}

/// What to do with JSON fields that are not declared columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchemaMode {
    /// Ignore (and count) unknown fields.
    #[default]
    Enforce,
    /// Add a nullable column for each new top-level field, in the same commit as the data.
    Merge,
}

/// Kafka metadata that can be stored next to the value's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KafkaMetadataColumn {
    /// `kafka_topic` (string).
    Topic,
    /// `kafka_partition` (int32).
    Partition,
    /// `kafka_offset` (int64).
    Offset,
    /// `kafka_timestamp` (timestamp, null when Kafka sent `-1`).
    Timestamp,
}

impl KafkaMetadataColumn {
    /// The column name used in the table.
    pub fn column_name(self) -> &'static str {
        match self {
            Self::Topic => "kafka_topic",
            Self::Partition => "kafka_partition",
            Self::Offset => "kafka_offset",
            Self::Timestamp => "kafka_timestamp",
        }
    }
}

/// Names of the processing-time partition columns.
pub const PROCESSING_TIME_COLUMNS: [&str; 4] = ["year", "month", "day", "hour"];

impl TopicConfig {
    /// Check the topic's own rules (columns, generated columns, partitioning); `key` is its
    /// config path (e.g. `topics[0]`).
    pub(crate) fn validate(&self, key: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.columns.is_empty() {
            return bad(format!("`{key}.columns` must list at least one column"));
        }
        let mut names = HashSet::new();
        let mut lower = HashSet::new();
        for (j, c) in self.columns.iter().enumerate() {
            if c.name.is_empty()
                || !names.insert(c.name.as_str())
                || !lower.insert(c.name.to_lowercase())
            {
                return bad(format!(
                    "`{key}.columns[{j}].name` (\"{}\") is empty or repeated (Delta column \
                     names are case-insensitive)",
                    c.name
                ));
            }
            if c.name
                .contains([' ', ',', ';', '{', '}', '(', ')', '\n', '\t', '='])
            {
                return bad(format!(
                    "`{key}.columns[{j}].name` (\"{}\") contains one of \" ,;{{}}()=\", a \
                     newline or a tab, which Spark cannot write without column mapping",
                    c.name.escape_debug()
                ));
            }
        }
        let derived: Vec<&str> = match &self.partition_by {
            Partitioning::ProcessingTime => PROCESSING_TIME_COLUMNS.to_vec(),
            _ => vec![],
        };
        for name in derived
            .iter()
            .copied()
            .chain(self.kafka_metadata.iter().map(|m| m.column_name()))
        {
            if lower.contains(name) {
                return bad(format!(
                    "`{key}.columns`: \"{name}\" clashes with a generated column"
                ));
            }
        }
        if let Partitioning::Columns(cols) = &self.partition_by {
            for c in cols {
                if !names.contains(c.as_str()) {
                    return bad(format!(
                        "`{key}.partition_by`: \"{c}\" is not a declared column"
                    ));
                }
            }
        }
        Ok(())
    }
}
