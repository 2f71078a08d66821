//! Table layouts: the Arrow schema a topic's table gets from the config (declared columns,
//! Kafka metadata columns, derived partition columns) and how an existing table's schema is
//! reconciled with it.

use crate::error::{Error, Result};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use lakestream_formats::config::{
    ColumnType, KafkaMetadataColumn, PROCESSING_TIME_COLUMNS, Partitioning, SchemaMode, TopicConfig,
};
use std::collections::HashMap;
use std::sync::Arc;

/// The Arrow type of a configured column type.
pub fn arrow_type(t: ColumnType) -> DataType {
    match t {
        ColumnType::String => DataType::Utf8,
        ColumnType::Int32 => DataType::Int32,
        ColumnType::Int64 => DataType::Int64,
        ColumnType::Float64 => DataType::Float64,
        ColumnType::Boolean => DataType::Boolean,
        ColumnType::Timestamp => timestamp_type(),
        ColumnType::Date => DataType::Date32,
    }
}

/// Timestamp type used for every timestamp column: microseconds, UTC.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// Where a column's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnSource {
    /// A field of the JSON value.
    Value,
    /// Kafka metadata.
    Kafka(KafkaMetadataColumn),
    /// A processing-time partition part (index into year, month, day, hour).
    ProcessingTime(usize),
}

/// How one topic's records become rows of its table.
#[derive(Debug, Clone)]
pub struct TableLayout {
    /// Table name relative to the lake root.
    pub table: String,
    /// Schema from the config alone (what a new table is created with).
    pub config_schema: SchemaRef,
    /// Partition columns.
    pub partition_columns: Vec<String>,
    /// Schema evolution mode.
    pub schema_mode: SchemaMode,
    /// Kafka metadata columns.
    pub kafka_metadata: Vec<KafkaMetadataColumn>,
}

impl TableLayout {
    /// Layout of a configured topic.
    pub fn for_topic(t: &TopicConfig) -> Self {
        let mut fields: Vec<Field> = t
            .columns
            .iter()
            .map(|c| Field::new(&c.name, arrow_type(c.data_type), c.nullable))
            .collect();
        for m in &t.kafka_metadata {
            let dt = match m {
                KafkaMetadataColumn::Topic => DataType::Utf8,
                KafkaMetadataColumn::Partition => DataType::Int32,
                KafkaMetadataColumn::Offset => DataType::Int64,
                KafkaMetadataColumn::Timestamp => timestamp_type(),
            };
            fields.push(Field::new(
                m.column_name(),
                dt,
                *m == KafkaMetadataColumn::Timestamp,
            ));
        }
        let partition_columns = match &t.partition_by {
            Partitioning::None => vec![],
            Partitioning::ProcessingTime => {
                for name in PROCESSING_TIME_COLUMNS {
                    fields.push(Field::new(name, DataType::Utf8, false));
                }
                PROCESSING_TIME_COLUMNS
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            }
            Partitioning::Columns(cols) => cols.clone(),
        };
        Self {
            table: t.table.clone(),
            config_schema: Arc::new(Schema::new(fields)),
            partition_columns,
            schema_mode: t.schema_mode,
            kafka_metadata: t.kafka_metadata.clone(),
        }
    }

    /// Where the values of column `name` come from.
    pub fn source_of(&self, name: &str) -> ColumnSource {
        if let Some(m) = self.kafka_metadata.iter().find(|m| m.column_name() == name) {
            return ColumnSource::Kafka(*m);
        }
        if self.is_processing_time()
            && let Some(i) = PROCESSING_TIME_COLUMNS.iter().position(|c| *c == name)
        {
            return ColumnSource::ProcessingTime(i);
        }
        ColumnSource::Value
    }

    /// True when partitioned by processing time.
    pub fn is_processing_time(&self) -> bool {
        self.partition_columns
            .iter()
            .map(String::as_str)
            .eq(PROCESSING_TIME_COLUMNS.iter().copied())
    }

    /// The schema to write with, given the table's current schema (if it exists): the table's
    /// columns (they win, including columns other writers added), plus declared columns the
    /// table lacks (added nullable: adding a column to the config is an explicit evolution).
    /// Returns the schema and whether it differs from the table's.
    pub fn reconcile(&self, existing: Option<&Schema>) -> (SchemaRef, bool) {
        let Some(existing) = existing else {
            return (self.config_schema.clone(), true);
        };
        let mut fields: Vec<Field> = existing
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut changed = false;
        for f in self.config_schema.fields() {
            // Delta column names are case-insensitive: `Membership` declared in the config is
            // the table's `membership`, not a second column.
            if !existing
                .fields()
                .iter()
                .any(|e| e.name().to_lowercase() == f.name().to_lowercase())
            {
                fields.push(f.as_ref().clone().with_nullable(true));
                changed = true;
            }
        }
        (Arc::new(Schema::new(fields)), changed)
    }
}

/// Characters Spark cannot write in a column name without column mapping (its Parquet writer
/// refuses the characters of ` ,;{}()=`, newline and tab); a new column is never created with
/// one.
pub const UNWRITABLE_NAME_CHARS: &[char] = &[' ', ',', ';', '{', '}', '(', ')', '\n', '\t', '='];

/// Why `name` cannot be a new column (`None`: it can).
pub fn unwritable_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("an empty name cannot be a column".into());
    }
    let bad: String = name
        .chars()
        .filter(|c| UNWRITABLE_NAME_CHARS.contains(c))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "field `{}` cannot become a new column: its name contains {bad:?}, one of \
             \" ,;{{}}()\\n\\t=\", which Spark cannot write without column mapping; rename the field \
             in the producer",
            name.escape_debug()
        )
    })
}

/// Check a schema about to be committed to `table` (`existing`: the table's current schema)
/// the way a Delta reader will: no two columns whose names differ only in case, and no new
/// column whose name Spark cannot write without column mapping. A violation is
/// [`Error::Schema`] (permanent): retrying the same records cannot help.
pub fn validate_schema(table: &str, schema: &Schema, existing: Option<&Schema>) -> Result<()> {
    let mut seen: HashMap<String, &str> = HashMap::new();
    for f in schema.fields() {
        if let Some(first) = seen.insert(f.name().to_lowercase(), f.name()) {
            return Err(Error::Schema {
                table: table.to_string(),
                reason: format!(
                    "columns `{first}` and `{}` differ only in case (Delta column names are \
                     case-insensitive)",
                    f.name()
                ),
            });
        }
        let is_new = existing.is_none_or(|e| e.field_with_name(f.name()).is_err());
        if is_new && let Some(reason) = unwritable_name(f.name()) {
            return Err(Error::Schema {
                table: table.to_string(),
                reason,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lakestream_formats::config::PipelineConfig;

    #[test]
    fn seed_layouts() -> anyhow::Result<()> {
        let cfg = PipelineConfig::from_toml(include_str!("../../../lakestream.toml"))?;
        let orders = TableLayout::for_topic(&cfg.topics[0]);
        let names: Vec<_> = orders
            .config_schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "order_id",
                "order_owner",
                "order_value",
                "timestamp",
                "kafka_partition",
                "kafka_offset",
                "year",
                "month",
                "day",
                "hour"
            ]
        );
        assert_eq!(orders.source_of("hour"), ColumnSource::ProcessingTime(3));
        assert_eq!(
            orders.source_of("kafka_offset"),
            ColumnSource::Kafka(KafkaMetadataColumn::Offset)
        );
        assert_eq!(orders.source_of("order_id"), ColumnSource::Value);
        let members = TableLayout::for_topic(&cfg.topics[1]);
        assert_eq!(members.partition_columns, ["order_owner"]);
        assert_eq!(members.source_of("order_owner"), ColumnSource::Value);
        Ok(())
    }

    #[test]
    fn reconcile_keeps_table_columns_and_adds_declared_ones() {
        let layout = TableLayout {
            table: "t".into(),
            config_schema: Arc::new(Schema::new(vec![
                Field::new("a", DataType::Int32, false),
                Field::new("b", DataType::Utf8, false),
            ])),
            partition_columns: vec![],
            schema_mode: SchemaMode::Merge,
            kafka_metadata: vec![],
        };
        let existing = Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("evolved", DataType::Int64, true),
        ]);
        let (schema, changed) = layout.reconcile(Some(&existing));
        assert!(changed);
        let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["a", "evolved", "b"]);
        assert!(schema.field(2).is_nullable());
        let (same, changed) = layout.reconcile(Some(&schema));
        assert!(!changed);
        assert_eq!(same.fields().len(), 3);
        // A declared `B` is the table's `b` (Delta names are case-insensitive).
        let upper = Schema::new(vec![
            Field::new("A", DataType::Int32, false),
            Field::new("evolved", DataType::Int64, true),
            Field::new("B", DataType::Utf8, true),
        ]);
        let (same, changed) = layout.reconcile(Some(&upper));
        assert!(!changed);
        assert_eq!(same.fields().len(), 3);
    }

    #[test]
    fn validate_refuses_case_twins_and_unwritable_new_names() {
        let existing = Schema::new(vec![Field::new("membership", DataType::Utf8, true)]);
        let twin = Schema::new(vec![
            Field::new("membership", DataType::Utf8, true),
            Field::new("Membership", DataType::Utf8, true),
        ]);
        let e = validate_schema("raw/member", &twin, Some(&existing));
        assert!(
            matches!(&e, Err(Error::Schema { reason, .. }) if reason.contains("differ only in case")),
            "{e:?}"
        );
        assert!(e.is_err_and(|e| !e.is_retryable()));
        let spaced = Schema::new(vec![
            Field::new("membership", DataType::Utf8, true),
            Field::new("a b", DataType::Utf8, true),
        ]);
        let e = validate_schema("raw/member", &spaced, Some(&existing));
        assert!(
            matches!(&e, Err(Error::Schema { reason, .. }) if reason.contains("column mapping")),
            "{e:?}"
        );
        assert!(validate_schema("raw/member", &existing, Some(&existing)).is_ok());
    }
}
