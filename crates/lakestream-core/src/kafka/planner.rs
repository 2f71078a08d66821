//! Plans one table's append from its records: drop what the partition's `txn` already covers,
//! decode the rest against the table's current schema, and hand decode rejects back to the
//! invocation to dead-letter *before* any plan that advances the partition's `txn` is committed.
//! A CDC bronze table's records are decoded by [`super::bronze`] instead of as JSON rows.

use super::bronze::decode_bronze;
use super::decode::{Decoded, decode_values_reserving};
use super::report::RecordOutcome;
use crate::cdc::debezium::BronzeTarget;
use crate::commit::{Planned, Planner, TableState};
use crate::dead_letter::DeadLetter;
use crate::error::Result;
use crate::partition_path::{PartitionLimits, oversized_rows};
use crate::schema::{ColumnSource, TableLayout, validate_schema};
use chrono::{DateTime, Datelike, Timelike, Utc};
use deltalake::arrow::array::{
    ArrayRef, BooleanArray, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
    new_null_array,
};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Transaction;
use lakestream_formats::config::{KafkaMetadataColumn, bronze};
use lakestream_formats::record::{RecordValue, SourceRecord, app_id};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// A plan for one (schema, committed versions) state, with the records it holds and skips.
#[derive(Debug)]
struct Plan {
    fields: Vec<Field>,
    committed: HashMap<String, i64>,
    planned: Arc<Planned>,
    rows: Vec<usize>,
    already_committed: Vec<usize>,
}

/// Plans one table's append from the records routed to it.
pub(super) struct TopicPlanner<'a> {
    pub(super) layout: Cow<'a, TableLayout>,
    /// The CDC source table when this is a bronze table (Debezium records, not JSON rows).
    cdc: Option<Arc<BronzeTarget>>,
    /// Table properties of a new table (CDC bronze: family, table, keys).
    properties: Vec<(String, String)>,
    /// Table properties this commit sets (CDC bronze: a source column's type change).
    set_properties: Vec<(String, String)>,
    records: &'a [SourceRecord],
    /// Indexes (into `records`) of this table's records.
    pub(super) idx: Vec<usize>,
    processing_time: DateTime<Utc>,
    plan: Option<Plan>,
    /// Records already settled in the dead-letter table (never planned again).
    dead_lettered: HashSet<usize>,
    /// Decode rejects of the latest plan not yet dead-lettered.
    new_rejects: Vec<(usize, DeadLetter)>,
    /// Unknown top-level fields ignored by the latest plan.
    pub(super) unknown_ignored: u64,
    /// Columns the latest plan adds.
    pub(super) columns_added: Vec<String>,
    /// The distinct `txn` appIds of this table's records (formatted once, not per record).
    app_ids: Vec<String>,
    /// Each record's appId, as an index into `app_ids` (by index into `records`).
    app_of: Vec<usize>,
    /// How long the table's partition directories may be (records beyond are rejects).
    limits: PartitionLimits,
}

impl<'a> TopicPlanner<'a> {
    pub(super) fn new(
        pipeline: &str,
        layout: Cow<'a, TableLayout>,
        cdc: Option<Arc<BronzeTarget>>,
        records: &'a [SourceRecord],
        idx: Vec<usize>,
        now: DateTime<Utc>,
        limits: PartitionLimits,
    ) -> Self {
        let mut app_ids: Vec<String> = Vec::new();
        let mut app_of = vec![usize::MAX; records.len()];
        let mut known: HashMap<(&str, i32), usize, foldhash::fast::RandomState> =
            HashMap::default();
        for &i in &idx {
            let r = &records[i];
            app_of[i] = *known.entry((&r.topic, r.partition)).or_insert_with(|| {
                app_ids.push(app_id(pipeline, &r.topic, r.partition));
                app_ids.len() - 1
            });
        }
        Self {
            layout,
            cdc,
            properties: vec![],
            set_properties: vec![],
            records,
            idx,
            app_ids,
            app_of,
            limits,
            processing_time: now,
            plan: None,
            dead_lettered: HashSet::new(),
            new_rejects: vec![],
            unknown_ignored: 0,
            columns_added: vec![],
        }
    }

    /// Rejects found by the latest plan; the caller dead-letters them (they are never planned
    /// again, whatever the outcome of that commit: a failed dead-letter commit fails the
    /// invocation).
    pub(super) fn take_new_rejects(&mut self) -> Vec<(usize, DeadLetter)> {
        let out = std::mem::take(&mut self.new_rejects);
        self.dead_lettered.extend(out.iter().map(|r| r.0));
        out
    }

    /// Settle this table's records after its commit (`landed`: the latest plan is in the log).
    pub(super) fn settle(&self, landed: bool, outcomes: &mut [RecordOutcome]) {
        let Some(plan) = &self.plan else {
            return;
        };
        for &i in &plan.already_committed {
            if outcomes[i] == RecordOutcome::Pending {
                outcomes[i] = RecordOutcome::AlreadyCommitted;
            }
        }
        if landed {
            for &i in &plan.rows {
                outcomes[i] = RecordOutcome::Written;
            }
        }
    }

    /// The table's records still pending (for dead-lettering after a permanent failure).
    pub(super) fn pending(&self, outcomes: &[RecordOutcome]) -> Vec<usize> {
        self.idx
            .iter()
            .copied()
            .filter(|&i| outcomes[i] == RecordOutcome::Pending && !self.dead_lettered.contains(&i))
            .collect()
    }

    fn build(&mut self, state: &TableState) -> Result<Plan> {
        let existing = state.schema.as_deref();
        let (mut schema, _) = self.layout.reconcile(existing);
        // Records past the committed txn version of their partition.
        let mut already_committed = Vec::new();
        let mut todo = Vec::with_capacity(self.idx.len());
        let committed: Vec<Option<i64>> = self
            .app_ids
            .iter()
            .map(|id| state.committed.get(id).copied())
            .collect();
        for &i in &self.idx {
            let r = &self.records[i];
            if committed[self.app_of[i]].is_some_and(|c| r.offset <= c) {
                already_committed.push(i);
            } else if !self.dead_lettered.contains(&i) {
                todo.push(i);
            }
        }
        let mut decoded = match self.cdc.clone() {
            Some(target) => {
                let (keys, positions) = fixed_by_table(state);
                self.decode_cdc(&target, &schema, (keys.as_deref(), positions), &todo)?
            }
            None => self.decode_json(&schema, &todo)?,
        };
        self.unknown_ignored = decoded.unknown_fields_ignored;
        self.new_rejects = std::mem::take(&mut decoded.rejects)
            .into_iter()
            .map(|(j, reason)| {
                let i = todo[j];
                let l = DeadLetter::kafka(&self.records[i], Some(&self.layout.table), reason);
                (i, l)
            })
            .collect();
        if !decoded.new_fields.is_empty() {
            let mut f: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            f.extend(decoded.new_fields.iter().cloned());
            schema = Arc::new(Schema::new(f));
        }
        // Before anything is written: a schema the table would refuse is a permanent error,
        // never a batch retried until it expires.
        validate_schema(&self.layout.table, &schema, existing)?;
        self.columns_added = decoded
            .new_fields
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let mut rows: Vec<usize> = decoded.rows.iter().map(|&j| todo[j]).collect();
        let mut batch = self.assemble(&schema, &decoded.batch, &rows)?;
        // A partition value too long for a key or a directory name fails its record only.
        let oversized = oversized_rows(&batch, &self.layout.partition_columns, &self.limits)?;
        if !oversized.is_empty() {
            let mut keep = vec![true; rows.len()];
            for (k, reason) in oversized {
                keep[k] = false;
                let i = rows[k];
                let l = DeadLetter::kafka(&self.records[i], Some(&self.layout.table), reason);
                self.new_rejects.push((i, l));
            }
            batch = filter_record_batch(&batch, &BooleanArray::from(keep.clone()))?;
            let mut kept = keep.into_iter();
            rows.retain(|_| kept.next().unwrap_or(false));
        }
        let mut high: Vec<Option<i64>> = vec![None; self.app_ids.len()];
        for &i in &rows {
            let h = &mut high[self.app_of[i]];
            *h = Some(h.map_or(self.records[i].offset, |h| h.max(self.records[i].offset)));
        }
        let txns = self
            .app_ids
            .iter()
            .zip(high)
            .filter_map(|(id, v)| Some((id, v?)))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .map(|(id, v)| Transaction::new(id.clone(), v))
            .collect();
        let planned = Planned {
            batch,
            schema,
            partition_columns: self.layout.partition_columns.clone(),
            txns,
            // A type change is recorded even when every record of the batch was refused.
            commit_if_empty: !self.set_properties.is_empty(),
            set_properties: self.set_properties.clone(),
            table_properties: self.properties.clone(),
        };
        Ok(Plan {
            fields: state_fields(state),
            committed: state.committed.clone(),
            planned: Arc::new(planned),
            rows,
            already_committed,
        })
    }

    /// A CDC topic's records into bronze rows; the table properties of a new table and the
    /// type change they show, if any.
    fn decode_cdc(
        &mut self,
        target: &BronzeTarget,
        schema: &SchemaRef,
        table: (Option<&[String]>, Option<&str>),
        todo: &[usize],
    ) -> Result<Decoded> {
        let (decoded, properties, type_change) = decode_bronze(
            target,
            self.records,
            todo,
            schema,
            table,
            self.processing_time,
        )?;
        self.properties = properties;
        // Sticky across attempts: a later attempt skips the records already dead-lettered,
        // and with them the type change they showed.
        if let Some(t) = type_change {
            self.set_properties = vec![(bronze::TYPE_CHANGE_PROPERTY.to_string(), t)];
        }
        self.properties.extend(self.set_properties.iter().cloned());
        Ok(decoded)
    }

    /// JSON rows: decode the values against the table's value columns.
    fn decode_json(&self, schema: &SchemaRef, todo: &[usize]) -> Result<Decoded> {
        let value_fields: Vec<Field> = schema
            .fields()
            .iter()
            .filter(|f| self.layout.source_of(f.name()) == ColumnSource::Value)
            .map(|f| f.as_ref().clone())
            .collect();
        let value_schema = Arc::new(Schema::new(value_fields));
        let reserved: HashSet<String> = schema
            .fields()
            .iter()
            .filter(|f| self.layout.source_of(f.name()) != ColumnSource::Value)
            .map(|f| f.name().to_lowercase())
            .collect();
        let kafka_time = self
            .layout
            .kafka_metadata
            .contains(&KafkaMetadataColumn::Timestamp);
        let values: Vec<Option<&[u8]>> = todo
            .iter()
            .map(|&i| match &self.records[i].value {
                RecordValue::Bytes(b)
                    if !kafka_time || kafka_time_error(&self.records[i]).is_none() =>
                {
                    Some(b.as_slice())
                }
                _ => None,
            })
            .collect();
        let mut decoded =
            decode_values_reserving(&values, &value_schema, self.layout.schema_mode, &reserved)?;
        if kafka_time {
            for (j, &i) in todo.iter().enumerate() {
                if let Some(why) = kafka_time_error(&self.records[i]) {
                    decoded.rejects.push((j, why));
                }
            }
        }
        Ok(decoded)
    }

    /// Table-ordered columns: value columns from the decoded batch, the rest generated.
    fn assemble(
        &self,
        schema: &SchemaRef,
        values: &RecordBatch,
        rows: &[usize],
    ) -> Result<RecordBatch> {
        let n = rows.len();
        let pt = self.processing_time;
        let parts = [
            format!("{:02}", pt.year().rem_euclid(100)),
            format!("{:02}", pt.month()),
            format!("{:02}", pt.day()),
            format!("{:02}", pt.hour()),
        ];
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            let col: ArrayRef = match self.layout.source_of(f.name()) {
                ColumnSource::Value => match values.column_by_name(f.name()) {
                    Some(c) => c.clone(),
                    None => new_null_array(f.data_type(), n),
                },
                ColumnSource::ProcessingTime(k) => Arc::new(StringArray::from_iter_values(
                    std::iter::repeat_n(parts[k].as_str(), n),
                )),
                ColumnSource::Kafka(m) => {
                    let recs = rows.iter().map(|&i| &self.records[i]);
                    match m {
                        KafkaMetadataColumn::Topic => Arc::new(StringArray::from_iter_values(
                            recs.map(|r| r.topic.as_str()),
                        )),
                        KafkaMetadataColumn::Partition => {
                            Arc::new(Int32Array::from_iter_values(recs.map(|r| r.partition)))
                        }
                        KafkaMetadataColumn::Offset => {
                            Arc::new(Int64Array::from_iter_values(recs.map(|r| r.offset)))
                        }
                        KafkaMetadataColumn::Timestamp => Arc::new(
                            TimestampMicrosecondArray::from_iter(
                                recs.map(|r| r.timestamp_ms.and_then(|t| t.checked_mul(1000))),
                            )
                            .with_timezone("UTC"),
                        ),
                    }
                }
            };
            cols.push(col);
        }
        let relaxed = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        Ok(RecordBatch::try_new(relaxed, cols)?)
    }
}

/// Why a record's Kafka timestamp cannot be written to the `kafka_timestamp` column.
fn kafka_time_error(r: &SourceRecord) -> Option<String> {
    let ms = r.timestamp_ms?;
    let why = match ms.checked_mul(1000) {
        Some(us) => crate::timestamp::out_of_range(us, &ms.to_string())?,
        None => {
            format!("{ms} ms is outside the years 0001-9999 that Delta readers accept; not written")
        }
    };
    Some(format!("Kafka timestamp (column `kafka_timestamp`): {why}"))
}

fn state_fields(state: &TableState) -> Vec<Field> {
    state
        .schema
        .as_ref()
        .map(|s| s.fields().iter().map(|f| f.as_ref().clone()).collect())
        .unwrap_or_default()
}

impl Planner for TopicPlanner<'_> {
    fn app_ids(&self) -> Vec<String> {
        let ids: BTreeSet<&String> = self.app_ids.iter().collect();
        ids.into_iter().cloned().collect()
    }

    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        let fresh = match &self.plan {
            Some(p) => p.fields != state_fields(state) || p.committed != state.committed,
            None => true,
        };
        if fresh {
            self.plan = Some(self.build(state)?);
        }
        if !self.new_rejects.is_empty() {
            // Never advance a partition's txn version past records that are not yet in the
            // dead-letter table: the caller dead-letters them first, then plans again.
            return Ok(None);
        }
        Ok(self.plan.as_ref().map(|p| Planned::clone(&p.planned)))
    }
}

/// What a CDC bronze table's properties fix about its records: its keys and the kind of
/// position its changes are ordered by (`None` for a table that does not exist yet).
fn fixed_by_table(state: &TableState) -> (Option<Vec<String>>, Option<&str>) {
    let keys = state.properties.get(bronze::KEYS_PROPERTY).map(|k| {
        k.split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_string)
            .collect()
    });
    let positions = state
        .properties
        .get(bronze::POSITIONS_PROPERTY)
        .map(String::as_str);
    (keys, positions)
}
