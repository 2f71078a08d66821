//! JSON values -> Arrow record batches against a table schema, with per-record error isolation.
//!
//! Hot path: every record goes through one arrow-json `Decoder` in strict mode; no per-field
//! `serde_json::Value` is built. Only when that batch fails (a bad record, or an unknown field)
//! does the slow path take records one at a time to find exactly which ones are bad, count
//! unknown fields, and (in `merge` mode) infer new columns.
//!
//! Timestamps are decoded as text first (arrow-json would read a JSON number as microseconds;
//! we define numbers as epoch milliseconds) and then converted: integers are epoch ms, strings
//! are ISO-8601 with or without fraction and zone, or `YYYY-MM-DD HH:MM:SS` (UTC).

use crate::config::SchemaMode;
use crate::error::Result;
use arrow_json::ReaderBuilder;
use deltalake::arrow::array::{
    Array, ArrayRef, BooleanArray, StringArray, TimestampMicrosecondArray, UInt32Array,
};
use deltalake::arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use serde::de::IgnoredAny;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Result of decoding a set of JSON values.
#[derive(Debug)]
pub struct Decoded {
    /// Rows of the good values, in input order, with the value schema (see [`decode_values`]).
    pub batch: RecordBatch,
    /// Input index of each row of `batch`.
    pub rows: Vec<usize>,
    /// Input index and reason of each rejected value.
    pub rejects: Vec<(usize, String)>,
    /// Unknown top-level fields seen and ignored (enforce mode, or nested values in merge mode).
    pub unknown_fields_ignored: u64,
    /// Columns added by schema evolution (merge mode), already part of `batch`'s schema.
    pub new_fields: Vec<Field>,
}

/// Decode JSON object values against `value_schema` (the table's value columns).
///
/// `values[i]` is `None` for inputs that were already rejected upstream; they are skipped.
pub fn decode_values(
    values: &[Option<&[u8]>],
    value_schema: &SchemaRef,
    mode: SchemaMode,
) -> Result<Decoded> {
    decode_values_reserving(values, value_schema, mode, &HashSet::new())
}

/// [`decode_values`] for a table whose other columns (lower-cased names in `reserved`: Kafka
/// metadata, processing-time partitions) are filled by Lakestream: a field naming one of them,
/// in any case, is ignored and counted, never inferred as a second column.
pub fn decode_values_reserving(
    values: &[Option<&[u8]>],
    value_schema: &SchemaRef,
    mode: SchemaMode,
    reserved: &HashSet<String>,
) -> Result<Decoded> {
    let mut rejects = Vec::new();
    let mut candidates: Vec<(usize, &[u8])> = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let Some(bytes) = v else { continue };
        match precheck(bytes) {
            Ok(()) => candidates.push((i, bytes)),
            Err(reason) => rejects.push((i, reason)),
        }
    }
    if let Some(decoded) = fast_path(&candidates, value_schema)? {
        let (batch, bad) = decoded;
        return finish(
            batch,
            candidates.iter().map(|c| c.0).collect(),
            bad,
            rejects,
            0,
            vec![],
        );
    }
    slow_path(candidates, value_schema, mode, reserved, rejects)
}

/// Cheap checks that arrow-json would report badly: UTF-8 and "is it an object".
fn precheck(bytes: &[u8]) -> std::result::Result<(), String> {
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(format!("value is not valid UTF-8 ({e})"));
    }
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(()),
        Some(_) => Err("value is not a JSON object".to_string()),
        None => Err("value is empty".to_string()),
    }
}

/// The schema handed to arrow-json: timestamp columns are read as text.
fn decoder_schema(value_schema: &Schema) -> SchemaRef {
    let fields: Vec<Field> = value_schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Timestamp(_, _) => Field::new(f.name(), DataType::Utf8, f.is_nullable()),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

fn decoder(
    value_schema: &Schema,
    strict: bool,
    rows: usize,
) -> Result<arrow_json::reader::Decoder> {
    Ok(ReaderBuilder::new(decoder_schema(value_schema))
        .with_batch_size(rows.max(1))
        .with_strict_mode(strict)
        .with_coerce_primitive(true)
        .build_decoder()?)
}

/// Feed `bytes` fully and flush one batch.
fn decode_all(
    d: &mut arrow_json::reader::Decoder,
    inputs: &[&[u8]],
) -> std::result::Result<Option<RecordBatch>, String> {
    for bytes in inputs {
        let mut rest: &[u8] = bytes;
        while !rest.is_empty() {
            let n = d.decode(rest).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("decoder made no progress".into());
            }
            rest = &rest[n..];
        }
        // A separator so two objects never run together.
        d.decode(b"\n").map_err(|e| e.to_string())?;
    }
    d.flush().map_err(|e| e.to_string())
}

/// A converted batch and the (input index, reason) of rows that failed conversion.
type Converted = (RecordBatch, Vec<(usize, String)>);

/// All candidates in one strict decoder. `None` means "something in there needs the slow path".
fn fast_path(candidates: &[(usize, &[u8])], value_schema: &SchemaRef) -> Result<Option<Converted>> {
    let mut d = decoder(value_schema, true, candidates.len())?;
    let inputs: Vec<&[u8]> = candidates.iter().map(|c| c.1).collect();
    match decode_all(&mut d, &inputs) {
        Ok(batch) => {
            let batch =
                batch.unwrap_or_else(|| RecordBatch::new_empty(decoder_schema(value_schema)));
            if batch.num_rows() != candidates.len() {
                return Ok(None);
            }
            let (batch, bad_rows) = convert_timestamps(batch, value_schema)?;
            let bad = bad_rows
                .into_iter()
                .map(|(row, reason)| (candidates[row].0, reason))
                .collect();
            Ok(Some((batch, bad)))
        }
        Err(_) => Ok(None),
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

/// How one record's keys map to columns: `(column, key as spelled in the record)` for each key
/// that names a column in another case. Records with the same renames decode together.
type Renames = Vec<(String, String)>;

/// One record at a time: find bad ones, count unknown fields, infer new columns, and map a key
/// that differs from a column only in case to that column (Delta column names are
/// case-insensitive: `Membership` *is* the column `membership`).
fn slow_path(
    candidates: Vec<(usize, &[u8])>,
    value_schema: &SchemaRef,
    mode: SchemaMode,
    reserved: &HashSet<String>,
    mut rejects: Vec<(usize, String)>,
) -> Result<Decoded> {
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
        let mut obj: Option<serde_json::Map<String, serde_json::Value>> = None;
        let mut record = RecordNames::default();
        for k in keys.keys() {
            let lower = k.to_lowercase();
            let column = if value_schema.field_with_name(k).is_ok() {
                Some(k.clone())
            } else if let Some(c) = columns.get(&lower) {
                Some(c.clone())
            } else if mode == SchemaMode::Enforce || reserved.contains(&lower) {
                // Enforce mode, or a column Lakestream fills itself (Kafka metadata,
                // processing time): ignored and counted, never a second column.
                record.ignored += 1;
                None
            } else {
                let obj =
                    obj.get_or_insert_with(|| serde_json::from_slice(bytes).unwrap_or_default());
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
    let new_fields: Vec<Field> = new_types
        .into_iter()
        .map(|(name, t)| Field::new(name, t, true))
        .collect();
    let schema: SchemaRef = if new_fields.is_empty() {
        value_schema.clone()
    } else {
        let mut f: Vec<Field> = value_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        f.extend(new_fields.iter().cloned());
        Arc::new(Schema::new(f))
    };
    let dschema = decoder_schema(&schema);
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
    let batch = concat_batches(&dschema, &batches)?;
    // Back to input order.
    let (batch, rows) = if rows.is_sorted() {
        (batch, rows)
    } else {
        let mut order: Vec<u32> = (0..rows.len() as u32).collect();
        order.sort_by_key(|&r| rows[r as usize]);
        let batch = take_record_batch(&batch, &UInt32Array::from(order.clone()))?;
        (batch, order.iter().map(|&r| rows[r as usize]).collect())
    };
    let (batch, bad_rows) = convert_timestamps(batch, &schema)?;
    let bad = bad_rows
        .into_iter()
        .map(|(r, reason)| (rows[r], reason))
        .collect();
    finish(batch, rows, bad, rejects, ignored, new_fields)
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

fn clean_arrow_message(e: &str) -> String {
    e.trim_start_matches("Json error: ")
        .trim_start_matches("Parser error: ")
        .to_string()
}

/// Drop rows that failed timestamp conversion and assemble the result.
fn finish(
    batch: RecordBatch,
    rows: Vec<usize>,
    bad: Vec<(usize, String)>,
    mut rejects: Vec<(usize, String)>,
    unknown_fields_ignored: u64,
    new_fields: Vec<Field>,
) -> Result<Decoded> {
    let (batch, rows) = if bad.is_empty() {
        (batch, rows)
    } else {
        let bad_set: std::collections::HashSet<usize> = bad.iter().map(|b| b.0).collect();
        let keep: BooleanArray = rows.iter().map(|r| Some(!bad_set.contains(r))).collect();
        let batch = filter_record_batch(&batch, &keep)?;
        rejects.extend(bad);
        (
            batch,
            rows.into_iter().filter(|r| !bad_set.contains(r)).collect(),
        )
    };
    rejects.sort_by_key(|r| r.0);
    Ok(Decoded {
        batch,
        rows,
        rejects,
        unknown_fields_ignored,
        new_fields,
    })
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

/// Convert text timestamp columns to microseconds UTC. Returns the batch with `target`'s types
/// and the rows whose text could not be parsed.
fn convert_timestamps(
    batch: RecordBatch,
    target: &Schema,
) -> Result<(RecordBatch, Vec<(usize, String)>)> {
    let mut bad: Vec<(usize, String)> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
    for (field, col) in target.fields().iter().zip(batch.columns()) {
        if !matches!(field.data_type(), DataType::Timestamp(_, _)) {
            columns.push(col.clone());
            continue;
        }
        let Some(text) = col.as_any().downcast_ref::<StringArray>() else {
            columns.push(col.clone());
            continue;
        };
        let mut out: Vec<Option<i64>> = Vec::with_capacity(text.len());
        for (row, v) in text.iter().enumerate() {
            match v.map(parse_timestamp_micros) {
                None => out.push(None),
                Some(Some(us)) => match out_of_range(us, v.unwrap_or_default()) {
                    None => out.push(Some(us)),
                    Some(why) => {
                        bad.push((row, format!("field `{}`: {why}", field.name())));
                        out.push(None);
                    }
                },
                Some(None) => {
                    bad.push((
                        row,
                        format!(
                            "field `{}`: cannot parse {:?} as a timestamp (ISO-8601 or epoch ms)",
                            field.name(),
                            v.unwrap_or_default()
                        ),
                    ));
                    out.push(None);
                }
            }
        }
        let arr = TimestampMicrosecondArray::from(out).with_timezone("UTC");
        columns.push(Arc::new(arr));
    }
    let schema = Arc::new(Schema::new(
        target
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(schema, columns)?;
    Ok((batch, bad))
}

pub use crate::timestamp::{out_of_range, parse_timestamp_micros};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::timestamp_type;
    use deltalake::arrow::array::Int32Array;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("ts", timestamp_type(), false),
        ]))
    }

    fn run(values: &[&str], mode: SchemaMode) -> Decoded {
        let v: Vec<Option<&[u8]>> = values.iter().map(|s| Some(s.as_bytes())).collect();
        match decode_values(&v, &schema(), mode) {
            Ok(d) => d,
            Err(e) => panic!("decode failed: {e}"),
        }
    }

    fn ts_col(d: &Decoded) -> Vec<Option<i64>> {
        let Some(c) = d
            .batch
            .column(2)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
        else {
            panic!("ts is not a timestamp column");
        };
        c.iter().collect()
    }

    #[test]
    fn timestamps_in_every_accepted_form() {
        let d = run(
            &[
                r#"{"id":1,"ts":"2022-04-04T10:15:30.123Z"}"#,
                r#"{"id":2,"ts":"2022-04-04T10:15:30Z"}"#,
                r#"{"id":3,"ts":"2022-04-04T12:15:30.123+02:00"}"#,
                r#"{"id":4,"ts":"2022-04-04 10:15:30"}"#,
                r#"{"id":5,"ts":1649067330123}"#,
                r#"{"id":6,"ts":"2022-04-04T10:15:30.123456"}"#,
            ],
            SchemaMode::Enforce,
        );
        assert!(d.rejects.is_empty(), "{:?}", d.rejects);
        let base = 1_649_067_330_000_000i64;
        assert_eq!(
            ts_col(&d),
            [
                Some(base + 123_000),
                Some(base),
                Some(base + 123_000),
                Some(base),
                Some(base + 123_000),
                Some(base + 123_456)
            ]
        );
    }

    #[test]
    fn bad_records_are_isolated_with_reasons() {
        let d = run(
            &[
                r#"{"id":1,"name":"ok","ts":"2022-04-04T10:15:30Z"}"#,
                r#"[1,2]"#,
                r#"{"id":"abc","ts":"2022-04-04T10:15:30Z"}"#,
                r#"{"id":3000000000,"ts":"2022-04-04T10:15:30Z"}"#,
                r#"{"name":"no id","ts":"2022-04-04T10:15:30Z"}"#,
                r#"{"id":6,"ts":"yesterday"}"#,
                r#"{"id":7,"ts":"2022-04-04T10:15:30Z""#,
                r#"{"id":8,"name":"also ok","ts":"2022-04-04T10:15:30Z"}"#,
            ],
            SchemaMode::Enforce,
        );
        assert_eq!(d.rows, [0, 7]);
        let ids = d
            .batch
            .column(0)
            .as_any()
            .downcast_ref::<Int32Array>()
            .map(|a| a.values().to_vec());
        assert_eq!(ids, Some(vec![1, 8]));
        let reasons: Vec<(usize, &str)> = d.rejects.iter().map(|(i, r)| (*i, r.as_str())).collect();
        assert_eq!(reasons.len(), 6, "{reasons:?}");
        assert!(reasons[0].1.contains("not a JSON object"));
        assert!(reasons[4].1.contains("yesterday"), "{reasons:?}");
        assert!(reasons[5].1.contains("invalid JSON"), "{reasons:?}");
    }

    #[test]
    fn invalid_utf8_is_rejected() {
        let bad: &[u8] = b"{\"id\":1,\"name\":\"\xff\xfe\",\"ts\":1}";
        let d = match decode_values(&[Some(bad), None], &schema(), SchemaMode::Enforce) {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(d.rejects.len(), 1);
        assert!(d.rejects[0].1.contains("UTF-8"));
        assert_eq!(d.batch.num_rows(), 0);
    }

    #[test]
    fn enforce_counts_unknown_fields_merge_adds_columns() {
        let values = [
            r#"{"id":1,"ts":1,"extra":5}"#,
            r#"{"id":2,"ts":2,"extra":5.5,"flag":true,"nested":{"a":1}}"#,
            r#"{"id":3,"ts":3}"#,
        ];
        let d = run(&values, SchemaMode::Enforce);
        assert_eq!(d.unknown_fields_ignored, 4);
        assert_eq!(d.batch.num_columns(), 3);
        assert_eq!(d.rows, [0, 1, 2]);

        let d = run(&values, SchemaMode::Merge);
        let added: Vec<(String, DataType)> = d
            .new_fields
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        assert_eq!(
            added,
            [
                ("extra".to_string(), DataType::Float64),
                ("flag".to_string(), DataType::Boolean)
            ]
        );
        assert_eq!(
            d.unknown_fields_ignored, 1,
            "nested objects are not inferred"
        );
        assert_eq!(d.batch.num_columns(), 5);
        assert_eq!(d.batch.column(4).null_count(), 2);
    }

    #[test]
    fn keys_differing_from_columns_only_in_case_are_those_columns() {
        let values = [
            r#"{"ID":1,"Name":"a","TS":1}"#,
            r#"{"id":2,"name":"b","NAME":"c","ts":2}"#,
            r#"{"id":3,"ts":3,"Extra":1}"#,
            r#"{"id":4,"ts":4,"extra":2.5,"EXTRA":null}"#,
            r#"{"id":5,"ts":5,"a b":1}"#,
            r#"{"id":6,"ts":6,"a b":null,"c=d":{"x":1}}"#,
        ];
        let d = run(&values, SchemaMode::Merge);
        assert_eq!(d.rows, [0, 2, 3, 5]);
        let reasons: Vec<(usize, &str)> = d.rejects.iter().map(|(i, r)| (*i, r.as_str())).collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert_eq!(reasons[0].0, 1);
        assert!(reasons[0].1.contains("differ only in case"), "{reasons:?}");
        assert_eq!(reasons[1].0, 4);
        assert!(reasons[1].1.contains("column mapping"), "{reasons:?}");
        let added: Vec<(&str, &DataType)> = d
            .new_fields
            .iter()
            .map(|f| (f.name().as_str(), f.data_type()))
            .collect();
        assert_eq!(added, [("Extra", &DataType::Float64)]);
        let ids = d
            .batch
            .column(0)
            .as_any()
            .downcast_ref::<Int32Array>()
            .map(|a| a.values().to_vec());
        assert_eq!(ids, Some(vec![1, 3, 4, 6]));
        assert_eq!(ts_col(&d), [Some(1000), Some(3000), Some(4000), Some(6000)]);
        assert_eq!(d.batch.column(1).null_count(), 3, "Name -> name");
        assert_eq!(
            d.unknown_fields_ignored, 1,
            "the nested `c=d` is not a column"
        );

        // Enforce mode: the column in another case is still the column.
        let d = run(
            &[r#"{"Id":7,"TS":"2022-04-04T10:15:30Z"}"#],
            SchemaMode::Enforce,
        );
        assert_eq!((d.rows.len(), d.unknown_fields_ignored), (1, 0));
    }

    #[test]
    fn reserved_columns_are_never_inferred() {
        let v: Vec<Option<&[u8]>> = vec![Some(br#"{"id":1,"ts":1,"Kafka_Offset":9}"#)];
        let reserved: HashSet<String> = ["kafka_offset".to_string()].into();
        let d = match decode_values_reserving(&v, &schema(), SchemaMode::Merge, &reserved) {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        assert!(d.new_fields.is_empty());
        assert_eq!((d.rows.len(), d.unknown_fields_ignored), (1, 1));
    }

    #[test]
    fn timestamps_outside_years_1_to_9999_are_rejected() {
        let d = run(
            &[
                r#"{"id":1,"ts":1764537184835000}"#,
                r#"{"id":2,"ts":"9999-12-31T23:59:59.999999Z"}"#,
                r#"{"id":3,"ts":"0001-01-01T00:00:00Z"}"#,
                r#"{"id":4,"ts":-62135596800001}"#,
            ],
            SchemaMode::Enforce,
        );
        assert_eq!(d.rows, [1, 2]);
        let reasons: Vec<&str> = d.rejects.iter().map(|r| r.1.as_str()).collect();
        assert!(reasons[0].contains("year 57885"), "{reasons:?}");
        assert!(reasons[0].contains("microseconds"), "{reasons:?}");
        assert!(reasons[1].contains("year 0,"), "{reasons:?}");
    }

    #[test]
    fn epoch_ms_overflow_is_rejected() {
        let d = run(
            &[r#"{"id":1,"ts":9223372036854775807}"#],
            SchemaMode::Enforce,
        );
        assert_eq!(d.rejects.len(), 1);
    }
}
