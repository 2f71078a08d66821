//! CDC topics in the Kafka ingestor: a topic without a `[[topics]]` entry that a Debezium
//! family's patterns match goes to the family's bronze table of its source table
//! ([`KafkaIngestor::destination`]); its records are decoded by [`crate::cdc::debezium`]
//! ([`decode_bronze`]) and committed like a topic table's (one `txn` per partition in the same
//! commit, dead letters first). The bronze table is created on first sight with the family's
//! properties.

use super::decode::Decoded;
use super::ingestor::KafkaIngestor;
use crate::cdc::debezium::{BronzeTarget, bronze_fields, decode};
use crate::error::Result;
use crate::schema::TableLayout;
use chrono::{DateTime, Utc};
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use lakestream_formats::config::SchemaMode;
use lakestream_formats::record::SourceRecord;
use std::sync::Arc;

/// A CDC topic's bronze table.
#[derive(Debug)]
pub(super) struct CdcDestination {
    /// The bronze table's name.
    pub table: String,
    /// Its layout: the bronze columns, no partitions, merge mode.
    pub layout: TableLayout,
    /// Its source table.
    pub target: Arc<BronzeTarget>,
}

/// Where a topic's records go.
#[derive(Debug, Clone)]
pub(super) enum Destination<'a> {
    /// A configured topic's table.
    Topic(&'a TableLayout),
    /// A Debezium family's bronze table.
    Cdc(Arc<CdcDestination>),
    /// A family's topic whose schema or table cannot name a table: every record is
    /// dead-lettered with this reason (tombstones are still skipped).
    BadCdc(String),
    /// No table is configured for the topic.
    Unknown,
}

impl KafkaIngestor {
    /// Where records of `topic` go.
    pub(super) fn destination(&self, topic: &str) -> Destination<'_> {
        if let Some(layout) = self.layouts.get(topic) {
            return Destination::Topic(layout);
        }
        let Some((family, t)) = self.config.cdc_topic(topic) else {
            return Destination::Unknown;
        };
        let made = family
            .bronze_table(&t)
            .map_err(crate::Error::from)
            .and_then(|table| {
                Ok(CdcDestination {
                    layout: bronze_layout(&table),
                    target: Arc::new(BronzeTarget::new(family, t, &self.config.cdc_limits)?),
                    table,
                })
            });
        match made {
            Ok(d) => Destination::Cdc(Arc::new(d)),
            Err(e) => Destination::BadCdc(format!(
                "topic `{topic}` of CDC family `{}`: {e}",
                family.family
            )),
        }
    }

    /// The table records of `topic` go to, if any.
    pub(super) fn table_of(&self, topic: &str) -> Option<String> {
        match self.destination(topic) {
            Destination::Topic(l) => Some(l.table.clone()),
            Destination::Cdc(d) => Some(d.table.clone()),
            Destination::BadCdc(_) | Destination::Unknown => None,
        }
    }
}

/// The layout of bronze table `table`: the bronze columns, unpartitioned, merge mode (every
/// column's values come from the decoded batch).
pub(super) fn bronze_layout(table: &str) -> TableLayout {
    TableLayout {
        table: table.to_string(),
        config_schema: Arc::new(Schema::new(bronze_fields())),
        partition_columns: vec![],
        schema_mode: SchemaMode::Merge,
        kafka_metadata: vec![],
    }
}

/// Table properties as (key, value) pairs.
pub(super) type Properties = Vec<(String, String)>;

/// Decode the records `todo` (indexes into `records`) for bronze table `schema`: the decoded
/// rows (indexes into `todo`, like JSON decoding), the properties of a new table, and the
/// first source column whose type changed (`lakestream.cdc.type_change`).
pub(super) fn decode_bronze(
    target: &BronzeTarget,
    records: &[SourceRecord],
    todo: &[usize],
    schema: &SchemaRef,
    table: (Option<&[String]>, Option<&str>),
    now: DateTime<Utc>,
) -> Result<(Decoded, Properties, Option<String>)> {
    let recs: Vec<&SourceRecord> = todo.iter().filter_map(|&i| records.get(i)).collect();
    let d = decode(target, &recs, schema, table, now)?;
    let properties = target.properties((&d.keys, d.keys_from), d.position_kind.as_deref());
    let type_change = d.type_changes.first().cloned();
    Ok((
        Decoded {
            batch: d.batch,
            rows: d.rows,
            rejects: d.rejects,
            unknown_fields_ignored: 0,
            new_fields: d.new_fields,
        },
        properties,
        type_change,
    ))
}
