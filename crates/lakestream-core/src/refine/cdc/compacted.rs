//! Deletes known only from their Kafka tombstone (ARCHITECTURE.md "Deletes known only from
//! their tombstone"). Debezium follows each delete event with a tombstone (the key, a null
//! value); log compaction may remove the delete event before the ingestor reads the partition,
//! and a batch may end between the two. A tombstone that does not follow its delete in its
//! batch reaches bronze as a delete with an empty `__seq`; here it gets its place in the key's
//! order, from the key's changes at lower offsets of its Kafka partition (bronze rows, any
//! commit; other tombstones not counted):
//!
//! - when there are none, the key was never seen: nothing to delete (dropped);
//! - when the nearest of them is a delete, the tombstone is that delete's: dropped;
//! - else it ranks just above the highest `__seq` among them (`<that __seq>|tombstone`:
//!   positions are fixed width, so nothing ranks between them).
//!
//! The run's own changes settle most tombstones (their delete is in the run); the others read
//! the bronze files that can hold their keys (key columns, `__seq`, `__op`, lineage).
//!
//! Its time (`__source_ts`) is the Kafka record's timestamp, when the connector sent it just
//! after the delete committed: SCD2 closes the version then (never before its start). It is
//! not a commit time, so the position checks never use it ([`super::positions::untimed`]).

use super::positions::apply_resets;
use super::scd2::keys::KeyCodec;
use crate::error::{Error, Result};
use crate::refine::keyed::target;
use crate::table::TableHandle;
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray, UInt32Array,
};
use deltalake::arrow::compute::{cast, filter_record_batch, take_record_batch};
use deltalake::arrow::datatypes::{DataType, Int64Type};
use lakestream_formats::config::bronze;
use std::collections::HashMap;
use std::sync::Arc;

/// What a placed tombstone's `__seq` ends with: `<base>|tombstone` ranks just above `<base>`.
pub(crate) const MARK: &str = "|tombstone";

fn strings<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| Error::Internal(format!("changes have no text `{name}`")))
}

/// A Kafka lineage column as `i64` per row (absent or null: -1).
fn lineage(rows: &RecordBatch, name: &str) -> Result<Vec<i64>> {
    let Some(col) = rows.column_by_name(name) else {
        return Ok(vec![-1; rows.num_rows()]);
    };
    let col = cast(col, &DataType::Int64)?;
    let col = col.as_primitive::<Int64Type>();
    Ok((0..col.len())
        .map(|i| if col.is_valid(i) { col.value(i) } else { -1 })
        .collect())
}

/// Rows of one batch as (key, partition) -> [(offset, `__op`, ranked `__seq`)], tombstones
/// (empty `__seq`) left out.
type Earlier = HashMap<(Vec<u8>, i64), Vec<(i64, String, String)>>;

fn earlier_of(batch: &RecordBatch, codec: &KeyCodec, into: &mut Earlier) -> Result<()> {
    let (op, seq) = (strings(batch, bronze::OP)?, strings(batch, bronze::SEQ)?);
    let (partition, offset) = (
        lineage(batch, bronze::PARTITION)?,
        lineage(batch, bronze::OFFSET)?,
    );
    for (i, key) in codec.encode(batch)?.into_iter().enumerate() {
        if seq.is_valid(i) && !seq.value(i).is_empty() {
            into.entry((key, partition[i])).or_default().push((
                offset[i],
                op.value(i).to_string(),
                seq.value(i).to_string(),
            ));
        }
    }
    Ok(())
}

/// Where a tombstone goes given its key's `earlier` changes: `None` (dropped) or its `__seq`.
fn place(earlier: &[(i64, String, String)], at: i64) -> Option<String> {
    let before = earlier.iter().filter(|(o, _, _)| *o < at);
    let nearest = before.clone().max_by_key(|(o, _, _)| *o)?;
    if nearest.1 == bronze::OP_DELETE {
        return None;
    }
    before
        .map(|(_, _, s)| s.as_str())
        .max()
        .map(|b| format!("{b}{MARK}"))
}

/// `changes` (projected from the raw bronze `rows`, row for row, `__seq` ranked by `resets`)
/// with each tombstone (a delete with an empty `__seq`) placed or dropped (module doc). The
/// run's changes place most; the others read `source`'s files that can hold their keys.
/// Not re-sorted.
pub(crate) async fn place_tombstones(
    changes: &RecordBatch,
    rows: &RecordBatch,
    keys: &[String],
    source: &TableHandle,
    resets: &[i64],
) -> Result<RecordBatch> {
    let (op, seq) = (
        strings(changes, bronze::OP)?,
        strings(changes, bronze::SEQ)?,
    );
    let tombs: Vec<usize> = (0..changes.num_rows())
        .filter(|&i| op.value(i) == bronze::OP_DELETE && seq.value(i).is_empty())
        .collect();
    if tombs.is_empty() {
        return Ok(changes.clone());
    }
    let codec = KeyCodec::new(&changes.schema(), keys)?;
    let enc = codec.encode(changes)?;
    let (partition, offset) = (
        lineage(rows, bronze::PARTITION)?,
        lineage(rows, bronze::OFFSET)?,
    );
    // The run's own changes: with lineage, as the raw rows have it.
    let mut in_run = Earlier::new();
    let with_lineage = lineage_of(changes, rows)?;
    earlier_of(&with_lineage, &codec, &mut in_run)?;
    let mut placed: Vec<Option<String>> = (0..changes.num_rows())
        .map(|i| Some(seq.value(i).to_string()))
        .collect();
    let mut keep = vec![true; changes.num_rows()];
    let mut open = Vec::new();
    for &t in &tombs {
        let earlier = in_run.get(&(enc[t].clone(), partition[t]));
        let nearest = earlier.and_then(|e| {
            e.iter()
                .filter(|(o, _, _)| *o < offset[t])
                .max_by_key(|(o, _, _)| *o)
        });
        match nearest {
            Some((_, op, _)) if op == bronze::OP_DELETE => keep[t] = false,
            _ => open.push(t),
        }
    }
    if !open.is_empty() {
        let wanted = take_record_batch(
            changes,
            &UInt32Array::from_iter_values(open.iter().map(|&t| t as u32)),
        )?;
        let mut all = Earlier::new();
        for batch in bronze_rows(source, keys, &wanted).await? {
            earlier_of(&apply_resets(&batch, resets)?, &codec, &mut all)?;
        }
        for t in open {
            let earlier = all.get(&(enc[t].clone(), partition[t]));
            match earlier.and_then(|e| place(e, offset[t])) {
                Some(s) => placed[t] = Some(s),
                None => keep[t] = false,
            }
        }
    }
    let out = with_seq(changes, placed.into_iter().collect())?;
    Ok(filter_record_batch(&out, &BooleanArray::from(keep))?)
}

/// `changes` with the raw rows' `__partition` and `__offset` beside them.
fn lineage_of(changes: &RecordBatch, rows: &RecordBatch) -> Result<RecordBatch> {
    let mut fields: Vec<_> = changes.schema().fields().iter().cloned().collect();
    let mut columns = changes.columns().to_vec();
    for name in [bronze::PARTITION, bronze::OFFSET] {
        if let Some((i, f)) = rows.schema().column_with_name(name) {
            fields.push(Arc::new(f.clone()));
            columns.push(rows.column(i).clone());
        }
    }
    let schema = deltalake::arrow::datatypes::Schema::new(fields);
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// The key, order and lineage columns of `source`'s files that can hold a key of `wanted`.
async fn bronze_rows(
    source: &TableHandle,
    keys: &[String],
    wanted: &RecordBatch,
) -> Result<Vec<RecordBatch>> {
    let first = &keys[0];
    let values = wanted
        .column_by_name(first)
        .ok_or_else(|| Error::Internal(format!("changes have no key column `{first}`")))?;
    let schema = source.arrow_schema()?;
    let files = target::live_files(source, first)?;
    let mut columns: Vec<String> = keys.to_vec();
    columns.extend(
        [
            bronze::OP,
            bronze::SEQ,
            bronze::SOURCE_TS,
            bronze::PARTITION,
            bronze::OFFSET,
        ]
        .map(str::to_string),
    );
    let mut out = Vec::new();
    for f in target::candidates(&files, first, values)? {
        let batch = target::read_columns(source, f, &schema, &columns).await?;
        let mut cols = batch.columns().to_vec();
        let mut fields: Vec<_> = batch.schema().fields().iter().cloned().collect();
        for (i, f) in batch.schema().fields().iter().enumerate() {
            if f.name() == bronze::OP || f.name() == bronze::SEQ {
                cols[i] = cast(&cols[i], &DataType::Utf8)?;
                fields[i] = Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8));
            }
        }
        let schema = deltalake::arrow::datatypes::Schema::new(fields);
        out.push(RecordBatch::try_new(Arc::new(schema), cols)?);
    }
    Ok(out)
}

/// `batch` with its `__seq` column replaced.
fn with_seq(batch: &RecordBatch, seq: StringArray) -> Result<RecordBatch> {
    let (i, _) = batch
        .schema()
        .column_with_name(bronze::SEQ)
        .ok_or_else(|| Error::Internal("changes have no `__seq`".into()))?;
    let mut columns = batch.columns().to_vec();
    columns[i] = Arc::new(seq) as ArrayRef;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(v: &[(i64, &str, &str)]) -> Vec<(i64, String, String)> {
        v.iter()
            .map(|(o, op, s)| (*o, op.to_string(), s.to_string()))
            .collect()
    }

    #[test]
    fn a_tombstone_ranks_above_every_earlier_change_of_its_key() {
        // An update at offset 3, a late older change at 4, the tombstone at 5, a create at 7.
        let earlier = e(&[(3, "u", "0009"), (4, "u", "0005"), (7, "c", "0012")]);
        assert_eq!(place(&earlier, 5).as_deref(), Some("0009|tombstone"));
        assert!("0009" < "0009|tombstone" && "0009|tombstone" < "0010");
        // Its own delete just before it: nothing more. No earlier change: nothing to delete.
        assert_eq!(place(&e(&[(3, "u", "0009"), (4, "d", "0010")]), 5), None);
        assert_eq!(place(&e(&[(7, "c", "0012")]), 5), None);
        // The nearest decides, not the highest: an older change delivered after the delete.
        let late = e(&[(3, "d", "0010"), (4, "u", "0005")]);
        assert_eq!(place(&late, 5).as_deref(), Some("0010|tombstone"));
    }
}
