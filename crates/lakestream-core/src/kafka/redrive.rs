//! Re-driving a Kafka batch Lambda gave up on (the event source mapping's on-failure
//! destination keeps it) into the lake, exactly once.
//!
//! The partition moved on without the batch: its `txn` version is usually past the failed
//! offsets already (a later batch landed), so the normal path would drop them as committed; and
//! the batch may even have landed before its invocation failed (a commit that timed out on the
//! way back). So a redrive trusts the table, not the watermark: each record is looked up in its
//! table by `kafka_topic` / `kafka_partition` / `kafka_offset` (the topic too when several
//! topics write the table; files pruned by their offset statistics), and the
//! ones not found are written under the redrive's own appIds
//! `<pipeline>/redrive/<id>/<topic>/<partition>`. Re-driving the same batch again finds its
//! records in the table; two redrives of it at once meet on those appIds (the second commit sees
//! the first's `txn` and re-plans to nothing). The partition's own `txn` is left alone, so a
//! batch of the live stream committing at the same moment loses nothing either.
//!
//! A CDC family's bronze table (a Debezium topic of a `[[cdc]]` family) is looked up the same
//! way by its lineage columns `__topic` / `__partition` / `__offset`.
//!
//! A table without those two columns cannot be checked: its records are refused unless the
//! caller accepts duplicates. Dead letters keep the pipeline's per-record keys, so a record the
//! failed invocation already dead-lettered is not dead-lettered twice. One window stays open: a
//! redriven offset above every batch the mapping committed for its partition would be written
//! again if Kafka re-delivered it (a consumer-group reset) before the partition's next batch
//! lands; the next batch closes it (its `txn` version covers the offset).

use super::ingestor::KafkaIngestor;
use super::report::IngestReport;
use crate::cdc::debezium::tombstone_follows_its_delete;
use crate::error::{Error, Result};
use crate::schema::TableLayout;
use crate::table::TableHandle;
use deltalake::arrow::array::{Array, ArrayRef, AsArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int64Type};
use lakestream_formats::config::KafkaMetadataColumn;
use lakestream_formats::record::{RecordValue, SourceRecord};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A failed batch to put back into the lake.
#[derive(Debug, Clone, Copy)]
pub struct Redrive<'a> {
    /// The batch's records.
    pub records: &'a [SourceRecord],
    /// Unique per failed batch (the failed invocation's request id); names the redrive's `txn`
    /// appIds. Letters, digits, `.`, `_` and `-` only.
    pub id: &'a str,
    /// Write records whose table cannot be checked (no `kafka_partition`/`kafka_offset` columns)
    /// anyway, accepting a duplicate where the batch had landed before it failed.
    pub allow_duplicates: bool,
}

/// What a redrive did. `received = written + dead_lettered + duplicates + tombstones_skipped`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RedriveReport {
    /// The redrive id (its appIds are `<pipeline>/redrive/<id>/<topic>/<partition>`).
    pub id: String,
    /// Records in the batch.
    pub received: usize,
    /// Rows appended (both paths).
    pub written: usize,
    /// Records dead-lettered now (bad records the failed invocation had not dead-lettered).
    pub dead_lettered: usize,
    /// CDC tombstones skipped (they carry no change).
    pub tombstones_skipped: usize,
    /// Records already in the lake: found in their table, committed by a concurrent redrive of
    /// the same batch, or already in the dead-letter table.
    pub duplicates: usize,
    /// Records found in their table (landed before the batch failed, or an earlier redrive).
    pub found_in_table: usize,
    /// The records not found, written under the redrive's appIds (or dead-lettered).
    pub redriven: IngestReport,
}

impl KafkaIngestor {
    /// Put a failed batch back into the lake exactly once (see the module docs).
    pub async fn redrive(&self, batch: Redrive<'_>) -> Result<RedriveReport> {
        let id = batch.id;
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(Error::Config(format!(
                "redrive id `{id}`: use letters, digits, `.`, `_` and `-` (the failed invocation's request id)"
            )));
        }
        let mut by_table: BTreeMap<&str, (&TableLayout, Vec<&SourceRecord>)> = BTreeMap::new();
        let mut bronze: BTreeMap<String, Vec<&SourceRecord>> = BTreeMap::new();
        let mut missing: Vec<SourceRecord> = Vec::new();
        for r in batch.records {
            let family_table = || {
                let (family, t) = self.config.cdc_topic(&r.topic)?;
                family.bronze_table(&t).ok()
            };
            match self.layouts.get(&r.topic) {
                Some(l) => by_table
                    .entry(l.table.as_str())
                    .or_insert((l, vec![]))
                    .1
                    .push(r),
                None => match family_table() {
                    Some(table) => bronze.entry(table).or_default().push(r),
                    // Dead-lettered by the write below (idempotently, per record).
                    None => missing.push(r.clone()),
                },
            }
        }
        // Refuse before anything is written.
        for (table, (layout, records)) in &by_table {
            if let (Err(why), false) = (self.checkable(layout), batch.allow_duplicates) {
                return Err(Error::Config(format!(
                    "table `{table}`: {why}, so a redrive cannot tell which of the batch's {} \
                     record(s) landed before it failed. Add kafka_metadata = [\"partition\", \
                     \"offset\"] to the topic for future batches; for this one, check the \
                     table and re-run with --allow-duplicates if the records are missing",
                    records.len()
                )));
            }
        }
        let mut found = 0;
        for (table, (layout, records)) in by_table {
            if self.checkable(layout).is_err() {
                missing.extend(records.into_iter().cloned());
                continue;
            }
            let one_topic = self.topics_of(layout) == 1;
            let landed = self.landed(table, &records, one_topic, TOPIC_TABLE).await?;
            for r in records {
                if landed.contains(&record_id(r)) {
                    found += 1;
                } else {
                    missing.push(r.clone());
                }
            }
        }
        // A tombstone just after its delete carries nothing more once the delete landed.
        let mut tombstones = 0;
        for (table, records) in &bronze {
            let landed = self.landed(table, records, false, CDC_BRONZE).await?;
            let mut previous: HashMap<(&str, i32), &SourceRecord> = HashMap::new();
            for r in records {
                let before = previous.insert((r.topic.as_str(), r.partition), r);
                if landed.contains(&record_id(r)) {
                    found += 1;
                } else if r.value == RecordValue::Null
                    && before.is_some_and(|p| {
                        tombstone_follows_its_delete(r, p) && landed.contains(&record_id(p))
                    })
                {
                    tombstones += 1;
                } else {
                    missing.push((*r).clone());
                }
            }
        }
        let mut report = RedriveReport {
            id: id.to_string(),
            received: batch.records.len(),
            found_in_table: found,
            ..Default::default()
        };
        if !missing.is_empty() {
            let prefix = format!("{}/redrive/{id}", self.config.pipeline);
            report.redriven = self.ingest_under(&missing, &prefix).await?;
        }
        report.written = report.redriven.written;
        report.dead_lettered = report.redriven.dead_lettered;
        report.tombstones_skipped = report.redriven.tombstones_skipped + tombstones;
        report.duplicates = report.redriven.duplicates + found;
        Ok(report)
    }

    /// The records of `records` that `table` holds (none when it does not exist yet).
    async fn landed(
        &self,
        table: &str,
        records: &[&SourceRecord],
        one_topic: bool,
        columns: Lineage,
    ) -> Result<HashSet<RecordId>> {
        let mut handle = self.handles.take(&self.lake, table).await?;
        let landed = async {
            if !handle.refresh().await? {
                return Ok(HashSet::new());
            }
            landed_records(&handle, records, one_topic, columns).await
        }
        .await;
        self.handles.put(handle);
        landed
    }

    /// How many configured topics write the table of `layout`.
    fn topics_of(&self, layout: &TableLayout) -> usize {
        self.layouts
            .values()
            .filter(|l| l.table == layout.table)
            .count()
    }

    /// Whether a table's rows say which Kafka record they came from; `Err` says what is missing.
    fn checkable(&self, layout: &TableLayout) -> std::result::Result<(), String> {
        let has = |c| layout.kafka_metadata.contains(&c);
        if !has(KafkaMetadataColumn::Partition) || !has(KafkaMetadataColumn::Offset) {
            return Err("the table has no kafka_partition/kafka_offset columns".into());
        }
        let topics = self.topics_of(layout);
        if topics > 1 && !has(KafkaMetadataColumn::Topic) {
            return Err(format!(
                "{topics} topics write to it and it has no kafka_topic column"
            ));
        }
        Ok(())
    }
}

/// A record as the table identifies it: topic, partition, offset.
type RecordId = (String, i64, i64);

/// The columns that say which Kafka record a row came from: topic, partition, offset.
type Lineage = [&'static str; 3];

/// A topic table's (`kafka_metadata`).
const TOPIC_TABLE: Lineage = ["kafka_topic", "kafka_partition", "kafka_offset"];

/// A CDC family bronze table's.
const CDC_BRONZE: Lineage = [
    lakestream_formats::config::bronze::TOPIC,
    lakestream_formats::config::bronze::PARTITION,
    lakestream_formats::config::bronze::OFFSET,
];

fn record_id(r: &SourceRecord) -> RecordId {
    (r.topic.clone(), i64::from(r.partition), r.offset)
}

/// The records of `records` present in the table, by topic, partition and offset. A row with
/// no topic (no `kafka_topic` column, or null in files written before it was added) is taken
/// for a record of any topic only when `one_topic` writes the table. Reads only files whose
/// offset statistics overlap. Metadata columns of other types than ours (another writer's) are
/// compared as numbers and text; a type that cannot be is a clear [`Error::Schema`].
async fn landed_records(
    handle: &TableHandle,
    records: &[&SourceRecord],
    one_topic: bool,
    [topic_col, partition_col, offset_col]: Lineage,
) -> Result<HashSet<RecordId>> {
    let table = handle.name();
    handle.refuse_deletion_vectors()?;
    let wanted: HashSet<RecordId> = records.iter().map(|r| record_id(r)).collect();
    let any_topic: HashSet<(i64, i64)> = if one_topic {
        wanted.iter().map(|(_, p, o)| (*p, *o)).collect()
    } else {
        HashSet::new()
    };
    let lo = records.iter().map(|r| r.offset).min().unwrap_or(0);
    let hi = records.iter().map(|r| r.offset).max().unwrap_or(-1);
    let schema = handle.arrow_schema()?;
    let mut landed = HashSet::new();
    for file in handle.live_files()? {
        if !may_hold(file.stats_json().as_deref(), offset_col, lo, hi) {
            continue;
        }
        for batch in handle.read_file(&file.data_file(), &schema).await? {
            let (Some(p), Some(o)) = (
                batch.column_by_name(partition_col),
                batch.column_by_name(offset_col),
            ) else {
                continue;
            };
            let (p, o) = (
                metadata_column(p, partition_col, &DataType::Int64, table)?,
                metadata_column(o, offset_col, &DataType::Int64, table)?,
            );
            let (p, o) = (p.as_primitive::<Int64Type>(), o.as_primitive::<Int64Type>());
            let topic = batch
                .column_by_name(topic_col)
                .map(|c| metadata_column(c, topic_col, &DataType::Utf8, table))
                .transpose()?;
            let topic = topic.as_ref().map(|c| c.as_string::<i32>());
            for i in 0..batch.num_rows() {
                if p.is_null(i) || o.is_null(i) {
                    continue;
                }
                let (p, o) = (p.value(i), o.value(i));
                match topic.filter(|t| t.is_valid(i)) {
                    Some(t) => {
                        let id = (t.value(i).to_string(), p, o);
                        if wanted.contains(&id) {
                            landed.insert(id);
                        }
                    }
                    // A row without a topic: any topic's record at that place, if one topic
                    // writes the table.
                    None if any_topic.contains(&(p, o)) => landed.extend(
                        wanted
                            .iter()
                            .filter(|(_, wp, wo)| (*wp, *wo) == (p, o))
                            .cloned(),
                    ),
                    None => {}
                }
            }
        }
    }
    Ok(landed)
}

/// A Kafka metadata column cast to `to` (integers of any width to Int64, any string type to
/// Utf8); another type is an error naming the column, never a panic.
fn metadata_column(column: &ArrayRef, name: &str, to: &DataType, table: &str) -> Result<ArrayRef> {
    let from = column.data_type();
    let fits = match to {
        DataType::Int64 => from.is_integer(),
        _ => {
            matches!(
                from,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) || matches!(from, DataType::Dictionary(_, v) if matches!(**v, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View))
        }
    };
    let kind = if *to == DataType::Int64 {
        "an integer"
    } else {
        "a string"
    };
    if !fits {
        return Err(Error::Schema {
            table: table.to_string(),
            reason: format!(
                "column `{name}` is {from}, not {kind}, so a redrive cannot tell which Kafka                  records the table holds; re-create the column as {kind} or re-run with                  --allow-duplicates if the records are known to be missing"
            ),
        });
    }
    cast(column, to).map_err(|e| Error::Schema {
        table: table.to_string(),
        reason: format!("column `{name}` ({from}) cannot be read as {to}: {e}"),
    })
}

/// False only when the file's statistics prove it holds no `offset_col` in `lo..=hi`.
fn may_hold(stats: Option<&str>, offset_col: &str, lo: i64, hi: i64) -> bool {
    let Some(stats) = stats.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()) else {
        return true;
    };
    let min = stats["minValues"][offset_col].as_i64();
    let max = stats["maxValues"][offset_col].as_i64();
    match (min, max) {
        (Some(min), Some(max)) => min <= hi && lo <= max,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::may_hold;

    #[test]
    fn statistics_prune_only_files_that_cannot_hold_the_offsets() {
        let s =
            r#"{"numRecords":3,"minValues":{"kafka_offset":10},"maxValues":{"kafka_offset":20}}"#;
        assert!(may_hold(Some(s), "kafka_offset", 20, 30));
        assert!(may_hold(Some(s), "kafka_offset", 0, 10));
        assert!(may_hold(Some(s), "kafka_offset", 12, 13));
        assert!(!may_hold(Some(s), "kafka_offset", 21, 30));
        assert!(!may_hold(Some(s), "kafka_offset", 0, 9));
        assert!(
            may_hold(None, "kafka_offset", 0, 1),
            "no statistics: read the file"
        );
        assert!(may_hold(Some(r#"{"numRecords":3}"#), "kafka_offset", 0, 1));
        assert!(may_hold(Some("not json"), "kafka_offset", 0, 1));
    }
}
