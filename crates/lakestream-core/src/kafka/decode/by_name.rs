//! The slow path: values one record at a time, matched to columns by name. Taken only when
//! the one strict decoder of the fast path fails, it finds exactly which records are bad, counts
//! unknown fields, infers new columns (merge mode) and maps a key that differs from a column
//! only in case to that column.

use super::reader::{clean_arrow_message, decode_all, decoder, decoder_schema};
use super::timestamps::convert_timestamps;
use crate::error::Result;
use crate::schema::unwritable_name;
use deltalake::arrow::array::UInt32Array;
use deltalake::arrow::compute::{concat_batches, take_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use lakestream_formats::config::SchemaMode;
use serde::de::IgnoredAny;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// What the slow path decoded, before rows that failed timestamp conversion are dropped.
pub(super) struct Isolated {
    /// Decoded rows, in input order, timestamps converted.
    pub(super) batch: RecordBatch,
    /// Input index of each row of `batch`.
    pub(super) rows: Vec<usize>,
    /// Rows of `batch` (by input index) whose timestamps could not be converted.
    pub(super) bad: Vec<(usize, String)>,
    /// Input index and reason of each value rejected before decoding.
    pub(super) rejects: Vec<(usize, String)>,
    /// Unknown top-level fields ignored.
    pub(super) unknown_fields_ignored: u64,
    /// Columns added (merge mode), already part of `batch`'s schema.
    pub(super) new_fields: Vec<Field>,
}

/// How one record's keys map to columns: `(column, key as spelled in the record)` for each key
/// that names a column in another case. Records with the same renames decode together.
type Renames = Vec<(String, String)>;

/// One record at a time: find bad ones, count unknown fields, infer new columns, and map a key
/// that differs from a column only in case to that column (Delta column names are
/// case-insensitive: `Membership` *is* the column `membership`).
pub(super) fn slow_path(
    candidates: Vec<(usize, &[u8])>,
    value_schema: &SchemaRef,
    mode: SchemaMode,
    reserved: &HashSet<String>,
    mut rejects: Vec<(usize, String)>,
) -> Result<Isolated> {
    let Grouped {
        groups,
        ignored,
        new_types,
    } = group_by_spelling(candidates, value_schema, mode, reserved, &mut rejects);
    let new_fields: Vec<Field> = new_types
        .into_iter()
        .map(|(name, t)| Field::new(name, t, true))
        .collect();
    let schema = with_new_fields(value_schema, &new_fields);
    let dschema = decoder_schema(&schema);
    let (batches, rows) = decode_groups(groups, &schema, &dschema, &mut rejects)?;
    let batch = concat_batches(&dschema, &batches)?;
    let (batch, rows) = in_input_order(batch, rows)?;
    let (batch, bad_rows) = convert_timestamps(batch, &schema)?;
    let bad = bad_rows
        .into_iter()
        .map(|(r, reason)| (rows[r], reason))
        .collect();
    Ok(Isolated {
        batch,
        rows,
        bad,
        rejects,
        unknown_fields_ignored: ignored,
        new_fields,
    })
}

/// The records the slow path can decode, grouped by how their keys map to columns.
struct Grouped<'a> {
    /// Records (input index, bytes) by their renames: each group decodes under one spelling.
    groups: BTreeMap<Renames, Vec<(usize, &'a [u8])>>,
    /// Unknown top-level fields ignored.
    ignored: u64,
    /// New columns (merge mode) and their widened types.
    new_types: BTreeMap<String, DataType>,
}

/// Map each candidate's keys to columns ([`record_names`]), in input order; a record that is
/// not JSON or names one column twice (or an unwritable one) goes to `rejects`.
fn group_by_spelling<'a>(
    candidates: Vec<(usize, &'a [u8])>,
    value_schema: &SchemaRef,
    mode: SchemaMode,
    reserved: &HashSet<String>,
    rejects: &mut Vec<(usize, String)>,
) -> Grouped<'a> {
    let mut ignored = 0u64;
    let mut new_types: BTreeMap<String, DataType> = BTreeMap::new();
    // Lower-cased name -> the column's spelling: the table's value columns, then new columns in
    // the spelling first seen (input order), so `Tier` and `tier` in one batch are one column.
    let columns: HashMap<String, String> = value_schema
        .fields()
        .iter()
        .map(|f| (f.name().to_lowercase(), f.name().clone()))
        .collect();
    let mut new_names: HashMap<String, String> = HashMap::new();
    let mut groups: BTreeMap<Renames, Vec<(usize, &[u8])>> = BTreeMap::new();
    for (i, bytes) in candidates {
        let keys: BTreeMap<String, IgnoredAny> = match serde_json::from_slice(bytes) {
            Ok(k) => k,
            Err(e) => {
                rejects.push((i, format!("invalid JSON: {e}")));
                continue;
            }
        };
        let ctx = Columns {
            value_schema,
            columns: &columns,
            new_names: &new_names,
            mode,
            reserved,
        };
        let mut record = record_names(&ctx, bytes, &keys);
        if let Some(reason) = record.reject {
            rejects.push((i, reason));
            continue;
        }
        ignored += record.ignored;
        for (lower, column, t) in record.new {
            widen(&mut new_types, &column, t);
            new_names.entry(lower).or_insert(column);
        }
        record.renames.sort();
        groups.entry(record.renames).or_default().push((i, bytes));
    }
    Grouped {
        groups,
        ignored,
        new_types,
    }
}

/// What a record's keys are matched against: the table's columns and the new ones seen so far.
struct Columns<'a> {
    value_schema: &'a SchemaRef,
    /// Lower-cased name -> the table's column spelling.
    columns: &'a HashMap<String, String>,
    /// Lower-cased name -> the spelling of a new column first seen in an earlier record.
    new_names: &'a HashMap<String, String>,
    mode: SchemaMode,
    reserved: &'a HashSet<String>,
}

/// The column each of one record's keys names (its own, another case's, a new one or none).
fn record_names(
    ctx: &Columns<'_>,
    bytes: &[u8],
    keys: &BTreeMap<String, IgnoredAny>,
) -> RecordNames {
    let Columns {
        value_schema,
        columns,
        new_names,
        mode,
        reserved,
    } = ctx;
    let mut obj: Option<serde_json::Map<String, serde_json::Value>> = None;
    let mut record = RecordNames::default();
    for k in keys.keys() {
        let lower = k.to_lowercase();
        let column = if value_schema.field_with_name(k).is_ok() {
            Some(k.clone())
        } else if let Some(c) = columns.get(&lower) {
            Some(c.clone())
        } else if *mode == SchemaMode::Enforce || reserved.contains(&lower) {
            // Enforce mode, or a column Lakestream fills itself (Kafka metadata,
            // processing time): ignored and counted, never a second column.
            record.ignored += 1;
            None
        } else {
            let obj = obj.get_or_insert_with(|| serde_json::from_slice(bytes).unwrap_or_default());
            match obj.get(k.as_str()).and_then(infer_type) {
                Some(t) => {
                    let c = new_names
                        .get(&lower)
                        .or_else(|| record.new.iter().find(|n| n.0 == lower).map(|n| &n.1))
                        .cloned()
                        .unwrap_or_else(|| k.clone());
                    if let Some(reason) = unwritable_name(&c) {
                        record.reject.get_or_insert(reason);
                    }
                    record.new.push((lower, c.clone(), t));
                    Some(c)
                }
                None if obj.get(k.as_str()).is_some_and(|v| !v.is_null()) => {
                    record.ignored += 1;
                    None
                }
                None => None, // null: nothing to infer from yet
            }
        };
        let Some(column) = column else { continue };
        if let Some(first) = record.keys.insert(column.clone(), k.clone()) {
            record.reject.get_or_insert(format!(
                "fields `{first}` and `{k}` differ only in case and name the same column \
                 `{column}` (Delta column names are case-insensitive); send one of them"
            ));
        }
        if column != *k {
            record.renames.push((column, k.clone()));
        }
    }
    record
}

/// The table's value schema with the new columns (merge mode) appended.
fn with_new_fields(value_schema: &SchemaRef, new_fields: &[Field]) -> SchemaRef {
    if new_fields.is_empty() {
        value_schema.clone()
    } else {
        let mut f: Vec<Field> = value_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        f.extend(new_fields.iter().cloned());
        Arc::new(Schema::new(f))
    }
}

/// Decode each group under its records' spelling into `dschema`'s names: the whole group at
/// once, else record by record (a record that fails goes to `rejects`). Returns the batches
/// and the input index of each of their rows (grouped, not in input order).
fn decode_groups(
    groups: BTreeMap<Renames, Vec<(usize, &[u8])>>,
    schema: &SchemaRef,
    dschema: &SchemaRef,
    rejects: &mut Vec<(usize, String)>,
) -> Result<(Vec<RecordBatch>, Vec<usize>)> {
    let mut batches = Vec::with_capacity(groups.len());
    let mut rows: Vec<usize> = Vec::new();
    for (renames, group) in groups {
        // Decoded under the record's spelling, then named as the table's columns.
        let spelled = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| match renames.iter().find(|r| &r.0 == f.name()) {
                    Some((_, key)) => f.as_ref().clone().with_name(key),
                    None => f.as_ref().clone(),
                })
                .collect::<Vec<_>>(),
        ));
        let named = |b: RecordBatch| RecordBatch::try_new(dschema.clone(), b.columns().to_vec());
        // Usually the only problem was unknown fields: one non-strict decoder takes them all.
        let mut all = decoder(&spelled, false, group.len())?;
        let inputs: Vec<&[u8]> = group.iter().map(|p| p.1).collect();
        if let Ok(Some(batch)) = decode_all(&mut all, &inputs)
            && batch.num_rows() == group.len()
        {
            batches.push(named(batch)?);
            rows.extend(group.iter().map(|p| p.0));
            continue;
        }
        for (i, bytes) in group {
            let mut d = decoder(&spelled, false, 1)?;
            match decode_all(&mut d, &[bytes]) {
                Ok(Some(b)) if b.num_rows() == 1 => {
                    batches.push(named(b)?);
                    rows.push(i);
                }
                Ok(_) => rejects.push((i, "value decoded to no row".into())),
                Err(e) => rejects.push((i, clean_arrow_message(&e))),
            }
        }
    }
    Ok((batches, rows))
}

/// `batch` with its rows (input index `rows`) back in input order.
fn in_input_order(batch: RecordBatch, rows: Vec<usize>) -> Result<(RecordBatch, Vec<usize>)> {
    if rows.is_sorted() {
        Ok((batch, rows))
    } else {
        let mut order: Vec<u32> = (0..rows.len() as u32).collect();
        order.sort_by_key(|&r| rows[r as usize]);
        let batch = take_record_batch(&batch, &UInt32Array::from(order.clone()))?;
        Ok((batch, order.iter().map(|&r| rows[r as usize]).collect()))
    }
}

/// What the slow path learned about one record's keys.
#[derive(Default)]
struct RecordNames {
    /// Column -> the key that named it (a second key for one column rejects the record).
    keys: HashMap<String, String>,
    renames: Renames,
    /// New columns this record would add: (lower-cased name, column name, inferred type).
    new: Vec<(String, String, DataType)>,
    ignored: u64,
    reject: Option<String>,
}

fn infer_type(v: &serde_json::Value) -> Option<DataType> {
    match v {
        serde_json::Value::String(_) => Some(DataType::Utf8),
        serde_json::Value::Bool(_) => Some(DataType::Boolean),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(DataType::Int64),
        serde_json::Value::Number(_) => Some(DataType::Float64),
        _ => None,
    }
}

/// Int64 + Float64 -> Float64; anything else mixed -> Utf8 (text of the value).
fn widen(types: &mut BTreeMap<String, DataType>, key: &str, t: DataType) {
    let merged = match types.get(key) {
        None => t,
        Some(old) if *old == t => t,
        Some(DataType::Int64) if t == DataType::Float64 => DataType::Float64,
        Some(DataType::Float64) if t == DataType::Int64 => DataType::Float64,
        Some(_) => DataType::Utf8,
    };
    types.insert(key.to_string(), merged);
}
