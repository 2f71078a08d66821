//! Debezium change events (Kafka, JSON converter) -> bronze rows (ARCHITECTURE.md "CDC
//! lakehouse"): one row per change with `__op`, `__seq`, `__source_ts`, `__key`, the Kafka
//! lineage and `__ingested_at`, then the row image's columns, typed per [`types`].
//!
//! - The JSON converter's `{schema, payload}` wrapper (`schemas.enable=true`) is detected and
//!   taken off the key and the value; with it the column types come from the schema, without it
//!   from the family's declared `columns`, else from the JSON values.
//! - `c`/`u`/`r` write the `after` image, `d` the `before` image (PostgreSQL sends only the key
//!   columns unless `REPLICA IDENTITY FULL`), `t` (truncate) a row with no row columns at all.
//! - A tombstone (a null value after a delete) whose delete event is just before it in the
//!   batch is counted and skipped by the ingestor ([`tombstone_follows_its_delete`]); any other
//!   (its delete in an earlier batch, or removed by log compaction) is a delete with an empty
//!   `__seq`, its row the key's fields: the apply places it ([`envelope::tombstone`]).
//! - Per record: a value that cannot be decoded, or a column that does not fit the table's type,
//!   is a reject with the reason (dead-lettered by the caller); new columns are added nullable.

mod columns;
mod envelope;
mod guard;
#[cfg(test)]
mod tests;
mod types;

use crate::error::Result;
use crate::schema::{timestamp_type, unwritable_name};
use chrono::{DateTime, Utc};
use columns::{array, convert};
use deltalake::arrow::array::{
    ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray, new_null_array,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::arrow::record_batch::RecordBatch;
use guard::TableGuard;
use lakestream_formats::config::{CdcColumn, CdcFamily, CdcLimits, FamilyTable, bronze};
use lakestream_formats::record::{RecordValue, SourceRecord};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use types::Cell;

/// The bronze metadata columns, in table order ([`bronze::ALL`]) with their types: `__op`,
/// `__seq` and `__ingested_at` are not null.
pub fn bronze_fields() -> Vec<Field> {
    bronze::ALL
        .iter()
        .map(|&name| {
            let dt = match name {
                bronze::SOURCE_TS | bronze::INGESTED_AT => timestamp_type(),
                bronze::PARTITION => DataType::Int32,
                bronze::OFFSET | bronze::ROW => DataType::Int64,
                _ => DataType::Utf8,
            };
            let required = matches!(name, bronze::OP | bronze::SEQ | bronze::INGESTED_AT);
            Field::new(name, dt, !required)
        })
        .collect()
}

/// Whether tombstone `tombstone` (a null value) follows its own delete: `previous`, the record
/// just before it in its partition within the batch, has the same key and is a delete event.
/// Such a tombstone carries nothing more and is skipped.
pub fn tombstone_follows_its_delete(tombstone: &SourceRecord, previous: &SourceRecord) -> bool {
    match (&tombstone.key, &previous.key, &previous.value) {
        (RecordValue::Bytes(k), RecordValue::Bytes(pk), RecordValue::Bytes(v)) => {
            k == pk && envelope::is_delete(v)
        }
        _ => false,
    }
}

/// One source table of a Debezium family, as its bronze table is written.
#[derive(Debug, Clone)]
pub struct BronzeTarget {
    /// The family's name.
    pub family: String,
    /// The source table.
    pub table: FamilyTable,
    /// The family's declared columns of the table (they type schemaless values).
    pub declared: Vec<CdcColumn>,
    /// The family's declared keys of the table (they win over the record key's fields).
    pub declared_keys: Option<Vec<String>>,
    /// (columns the table may have, columns one record may add): `[cdc_limits]`.
    pub width: (usize, usize),
}

impl BronzeTarget {
    /// The target of `table` in `family`; `Err` when its declared columns do not parse.
    pub fn new(family: &CdcFamily, table: FamilyTable, limits: &CdcLimits) -> Result<Self> {
        Ok(Self {
            width: limits.width(),
            family: family.family.clone(),
            declared: family.declared_columns(&table)?,
            declared_keys: family.declared_keys(&table).map(<[String]>::to_vec),
            table,
        })
    }

    /// The bronze table properties set when the table is created; `keys` are the record
    /// key's fields and where they came from (the declared keys win; no key property when
    /// neither is known), `positions` the kind of position its changes are ordered by.
    pub fn properties(
        &self,
        (keys, keys_from): (&[String], &str),
        positions: Option<&str>,
    ) -> Vec<(String, String)> {
        let mut p = vec![
            (bronze::FAMILY_PROPERTY.to_string(), self.family.clone()),
            (bronze::TABLE_PROPERTY.to_string(), self.table.qualified()),
        ];
        let (keys, from) = match self.declared_keys.as_deref() {
            Some(k) => (k, bronze::KEYS_FROM_CONFIG),
            None => (keys, keys_from),
        };
        if !keys.is_empty() {
            p.push((bronze::KEYS_PROPERTY.to_string(), keys.join(",")));
            p.push((bronze::KEYS_FROM_PROPERTY.to_string(), from.to_string()));
        }
        if let Some(k) = positions {
            p.push((bronze::POSITIONS_PROPERTY.to_string(), k.to_string()));
        }
        p
    }
}

/// What [`decode`] made of a set of records.
#[derive(Debug)]
pub struct DecodedBronze {
    /// One row per good record: the bronze metadata columns, then the row columns (the
    /// table's and the new ones).
    pub batch: RecordBatch,
    /// Input index of each row of `batch`.
    pub rows: Vec<usize>,
    /// Input index and reason of each rejected record.
    pub rejects: Vec<(usize, String)>,
    /// Row columns the table does not have yet (nullable), in `batch`.
    pub new_fields: Vec<Field>,
    /// The record key's field names (of the first record with a key).
    pub keys: Vec<String>,
    /// Where `keys` came from (`envelope::KEYS_FROM_*`; empty without keys).
    pub keys_from: &'static str,
    /// The kind of position the table's changes are ordered by (`lsn`, `file`, ...), if known.
    pub position_kind: Option<String>,
    /// Source columns whose type changed (a value that does not fit the column's type, in a
    /// well-formed change): `<column>: <bronze type> -> <what came>`, no values. Their
    /// records are in `rejects`; the bronze commit records the first in
    /// [`bronze::TYPE_CHANGE_PROPERTY`] and the table's apply job stops on it.
    pub type_changes: Vec<String>,
}

/// The key bytes of a record (`Err`: a key that could not even be unwrapped).
fn key_bytes(r: &SourceRecord) -> std::result::Result<Option<&[u8]>, String> {
    match &r.key {
        RecordValue::Bytes(b) => Ok(Some(b)),
        RecordValue::Null => Ok(None),
        RecordValue::Invalid { reason, .. } => Err(reason.clone()),
    }
}

/// One decoded record: its input index, the record, its change and its row cells placed by
/// column index (the table's columns, then the new ones).
type Good<'a> = (
    usize,
    &'a SourceRecord,
    envelope::Change,
    Vec<(usize, Cell)>,
);

/// Decode `records` (of one source table) against `table`, the bronze table's schema (the
/// bronze columns for a new table) and `table_keys`, its key property (`None` for a new
/// table); `ingested_at` fills `__ingested_at`.
///
/// Keys are fixed when the table is created: the declared keys, else the first record key's
/// fields. Without declared keys, a record whose key names other fields is a reject: one
/// record must not re-key the table (a first key `{"country"}` would merge every person of a
/// country into one silver row).
pub fn decode(
    target: &BronzeTarget,
    records: &[&SourceRecord],
    table: &Schema,
    (table_keys, table_positions): (Option<&[String]>, Option<&str>),
    ingested_at: DateTime<Utc>,
) -> Result<DecodedBronze> {
    let mut guard = TableGuard::new(target, (table_keys, table_positions), ingested_at);
    let meta: HashSet<String> = bronze::ALL.iter().map(|c| c.to_lowercase()).collect();
    let mut cols: Vec<(String, DataType)> = table
        .fields()
        .iter()
        .filter(|f| !meta.contains(&f.name().to_lowercase()))
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    let existing = cols.len();
    let mut index: HashMap<String, usize> = cols
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.to_lowercase(), i))
        .collect();
    let mut rejects = Vec::new();
    let mut type_changes: Vec<String> = Vec::new();
    let mut good: Vec<Good<'_>> = Vec::with_capacity(records.len());
    for (j, r) in records.iter().enumerate() {
        let parsed = match (&r.value, &key_bytes(r)) {
            (RecordValue::Bytes(v), Ok(k)) => envelope::parse(*k, v, r.offset, &target.declared),
            (RecordValue::Invalid { reason, .. }, _) | (_, Err(reason)) => Err(reason.clone()),
            (RecordValue::Null, Ok(Some(k))) => {
                envelope::tombstone(k, r.timestamp_ms, &target.declared)
            }
            (RecordValue::Null, Ok(None)) => Err("a tombstone (null value) without a key".into()),
        };
        let mut change = match parsed {
            Ok(c) => c,
            Err(why) => {
                rejects.push((j, why));
                continue;
            }
        };
        if let Some(why) = guard.refuse(&change) {
            rejects.push((j, why));
            continue;
        }
        let row = std::mem::take(&mut change.row);
        let (placed, new) = match place_row(row, &meta, &cols, &index, target.width) {
            Ok(p) => p,
            Err(Refusal::Record(why)) => {
                rejects.push((j, why));
                continue;
            }
            Err(Refusal::TypeChange { summary, why }) => {
                rejects.push((
                    j,
                    format!(
                        "{why}: the source column changed type ({summary}); the table's apply \
                         job stops until its bronze and silver are rebuilt (README \"CDC: \
                         schema changes\")"
                    ),
                ));
                if !type_changes.contains(&summary) {
                    type_changes.push(summary);
                }
                continue;
            }
        };
        for (name, dt) in new {
            index.insert(name.to_lowercase(), cols.len());
            cols.push((name, dt));
        }
        // Only a record that lands fixes what its table did not know yet.
        guard.accept(&change);
        good.push((j, *r, change, placed));
    }
    let batch = bronze_batch(&mut good, &cols, ingested_at)?;
    let (keys, keys_from) = good
        .iter()
        .map(|g| (&g.2.key_fields, g.2.keys_from))
        .find(|k| !k.0.is_empty())
        .map(|(k, from)| (k.clone(), from))
        .unwrap_or_default();
    Ok(DecodedBronze {
        batch,
        rows: good.iter().map(|g| g.0).collect(),
        rejects,
        new_fields: cols
            .iter()
            .skip(existing)
            .map(|(n, dt)| Field::new(n, dt.clone(), true))
            .collect(),
        keys,
        keys_from,
        position_kind: guard.positions,
        type_changes,
    })
}

/// Why a record's row cannot be placed.
enum Refusal {
    /// The record itself is bad (dead-lettered; the table goes on).
    Record(String),
    /// A well-formed change whose value does not fit its column's type: the source column
    /// changed type (`summary` names the column and both types, never the value).
    TypeChange { summary: String, why: String },
}

/// One record's cells by column index, and the columns it adds (name, type).
type Placed = (Vec<(usize, Cell)>, Vec<(String, DataType)>);

/// Place one record's row cells by column index (`cols`, found by lower-cased name in
/// `index`), converted to the column's type; a column the table does not have yet is returned
/// as new (its index follows `cols`). `Err`: why the record is rejected.
fn place_row(
    row: Vec<(String, types::Typed)>,
    meta: &HashSet<String>,
    cols: &[(String, DataType)],
    index: &HashMap<String, usize>,
    (max_table, max_new): (usize, usize),
) -> std::result::Result<Placed, Refusal> {
    let mut new: Vec<(String, DataType)> = vec![];
    // New columns by lower-cased name: a record adding many stays linear.
    let mut new_index: HashMap<String, usize> = HashMap::new();
    let mut placed: Vec<(usize, Cell)> = vec![];
    let mut seen: HashMap<String, String> = HashMap::with_capacity(row.len());
    for (name, (natural, cell)) in row {
        let lower = name.to_lowercase();
        if let Some(first) = seen.insert(lower.clone(), name.clone()) {
            return Err(Refusal::Record(format!(
                "the row has columns `{first}` and `{name}`, which differ only in case: Delta \
                 column names are case-insensitive, so one would overwrite the other; rename \
                 one at the source (or with a Debezium column rename SMT)"
            )));
        }
        if meta.contains(&lower) {
            return Err(Refusal::Record(format!(
                "column `{name}` has the name of a bronze column; rename it in the source \
                 (or with a Debezium column rename SMT)"
            )));
        }
        let col = match index.get(&lower) {
            Some(&c) => c,
            None => match new_index.get(&lower) {
                Some(&k) => cols.len() + k,
                // A null without a known type: nothing to write, no column to add yet.
                None => match natural {
                    None => continue,
                    Some(dt) => {
                        if let Some(w) = unwritable_name(&name) {
                            return Err(Refusal::Record(w));
                        }
                        // A table's first record brings all its columns; after that one
                        // record may add at most `max_new` (a source adds columns one by one).
                        let per_record = !cols.is_empty() && new.len() >= max_new;
                        if per_record || cols.len() + new.len() >= max_table {
                            return Err(Refusal::Record(format!(
                                "the record adds more columns than `[cdc_limits]` allows (at \
                                 most {max_new} new in one record, {max_table} in the table, \
                                 which has {}); raise `max_new_columns` / `max_table_columns` \
                                 if the source table is that wide",
                                cols.len()
                            )));
                        }
                        new_index.insert(lower.clone(), new.len());
                        new.push((name.clone(), dt));
                        cols.len() + new.len() - 1
                    }
                },
            },
        };
        let Some(dt) = cols
            .get(col)
            .or_else(|| new.get(col - cols.len()))
            .map(|c| &c.1)
        else {
            continue;
        };
        let came = columns::kind(&cell);
        match convert(cell, dt) {
            Ok(c) => placed.push((col, c)),
            Err(e) => {
                return Err(Refusal::TypeChange {
                    summary: format!("column `{name}`: {dt} -> {came}"),
                    why: format!("column `{name}`: {e}"),
                });
            }
        }
    }
    Ok((placed, new))
}

/// The batch of the `good` records: the bronze metadata columns, then the row columns `cols`
/// (their placed cells taken out of `good`).
fn bronze_batch(
    good: &mut [Good<'_>],
    cols: &[(String, DataType)],
    ingested_at: DateTime<Utc>,
) -> Result<RecordBatch> {
    let n = good.len();
    let mut fields: Vec<Field> = bronze_fields()
        .into_iter()
        .map(|f| f.with_nullable(true))
        .collect();
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(fields.len() + cols.len());
    arrays.extend(bronze_arrays(good, ingested_at));
    let mut by_col: Vec<Vec<Cell>> = vec![vec![Cell::Null; n]; cols.len()];
    for (row, g) in good.iter_mut().enumerate() {
        for (col, cell) in std::mem::take(&mut g.3) {
            if let Some(slot) = by_col.get_mut(col).and_then(|c| c.get_mut(row)) {
                *slot = cell;
            }
        }
    }
    for ((name, dt), cells) in cols.iter().zip(by_col) {
        fields.push(Field::new(name, dt.clone(), true));
        arrays.push(array(dt, cells)?);
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// The bronze metadata columns of the `good` records, in [`bronze::ALL`] order.
fn bronze_arrays(good: &[Good<'_>], ingested_at: DateTime<Utc>) -> Vec<ArrayRef> {
    let n = good.len();
    let text = |f: &dyn Fn(&envelope::Change) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from_iter(good.iter().map(|g| f(&g.2))))
    };
    let utc = |v: Vec<Option<i64>>| -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC"))
    };
    bronze::ALL
        .iter()
        .map(|&name| match name {
            bronze::OP => text(&|c| Some(c.op.to_string())),
            bronze::SEQ => text(&|c| Some(c.seq.clone())),
            bronze::SOURCE_TS => utc(good.iter().map(|g| g.2.source_ts).collect()),
            bronze::KEY => text(&|c| c.key.clone()),
            bronze::TOPIC => Arc::new(StringArray::from_iter_values(
                good.iter().map(|g| g.1.topic.as_str()),
            )),
            bronze::PARTITION => Arc::new(Int32Array::from_iter_values(
                good.iter().map(|g| g.1.partition),
            )),
            bronze::OFFSET => Arc::new(Int64Array::from_iter_values(
                good.iter().map(|g| g.1.offset),
            )),
            bronze::INGESTED_AT => utc(vec![Some(ingested_at.timestamp_micros()); n]),
            other => {
                let dt = if other == bronze::ROW {
                    DataType::Int64
                } else {
                    DataType::Utf8
                };
                new_null_array(&dt, n)
            }
        })
        .collect()
}
