//! JSON values -> Arrow record batches against a table schema, with per-record error isolation.
//!
//! Hot path: every record goes through one arrow-json `Decoder` in strict mode; no per-field
//! `serde_json::Value` is built. Only when that batch fails (a bad record, or an unknown field)
//! does the slow path take records one at a time to find exactly which ones are bad, count
//! unknown fields, and (in `merge` mode) infer new columns.
//!
//! Timestamps are decoded as text first (arrow-json would read a JSON number as microseconds;
//! we define numbers as epoch milliseconds) and then converted ([`timestamps`]).
//!
//! Here: the entry points and the fast path; [`by_name`] is the slow path, [`reader`] the
//! arrow-json plumbing both use.

mod by_name;
mod reader;
#[cfg(test)]
mod tests;
mod timestamps;

use crate::error::Result;
use by_name::{Isolated, slow_path};
use deltalake::arrow::array::BooleanArray;
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::datatypes::{Field, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use lakestream_formats::config::SchemaMode;
use reader::{decode_all, decoder, decoder_schema};
use std::collections::HashSet;
use timestamps::convert_timestamps;

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
    let Isolated {
        batch,
        rows,
        bad,
        rejects,
        unknown_fields_ignored,
        new_fields,
    } = slow_path(candidates, value_schema, mode, reserved, rejects)?;
    finish(
        batch,
        rows,
        bad,
        rejects,
        unknown_fields_ignored,
        new_fields,
    )
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
        let bad_set: HashSet<usize> = bad.iter().map(|b| b.0).collect();
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
