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
use std::collections::{HashMap, HashSet};
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

/// Where a change was in Kafka: (encoded key, topic, partition).
type Place = (Vec<u8>, String, i64);

/// Changes as [`Place`] -> [(offset, `__op`, ranked `__seq`)]: tombstones (empty `__seq`) and
/// truncates left out; only the places in `wanted`, when given.
type Earlier = HashMap<Place, Vec<(i64, String, String)>>;

/// The [`Place`] of every row of `batch` (its key, `__topic`, `__partition`) and its offset.
fn places(batch: &RecordBatch, codec: &KeyCodec) -> Result<(Vec<Place>, Vec<i64>)> {
    let topic = batch
        .column_by_name(bronze::TOPIC)
        .map(|c| cast(c, &DataType::Utf8))
        .transpose()?;
    let topic = topic.as_ref().map(|t| t.as_string::<i32>());
    let (partition, offset) = (
        lineage(batch, bronze::PARTITION)?,
        lineage(batch, bronze::OFFSET)?,
    );
    let out = codec
        .encode(batch)?
        .into_iter()
        .enumerate()
        .map(|(i, k)| {
            let t = topic.filter(|t| t.is_valid(i)).map(|t| t.value(i));
            (k, t.unwrap_or_default().to_string(), partition[i])
        })
        .collect();
    Ok((out, offset))
}

fn earlier_of(
    batch: &RecordBatch,
    codec: &KeyCodec,
    wanted: Option<&HashSet<Place>>,
    into: &mut Earlier,
) -> Result<()> {
    let (op, seq) = (strings(batch, bronze::OP)?, strings(batch, bronze::SEQ)?);
    let (places, offset) = places(batch, codec)?;
    for (i, place) in places.into_iter().enumerate() {
        let change = seq.is_valid(i) && !seq.value(i).is_empty();
        if !change
            || op.value(i) == bronze::OP_TRUNCATE
            || wanted.is_some_and(|w| !w.contains(&place))
        {
            continue;
        }
        into.entry(place).or_default().push((
            offset[i],
            op.value(i).to_string(),
            seq.value(i).to_string(),
        ));
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
/// with each tombstone (a delete with an empty `__seq`, in a bronze with Kafka offsets) placed
/// or dropped (module doc). The run's changes place a tombstone whose nearest earlier change
/// is in the run, and every one when the run read bronze's whole `snapshot`; the others read
/// `source`'s files that can hold their keys, keeping only those keys' rows. Not re-sorted.
pub(crate) async fn place_tombstones(
    changes: &RecordBatch,
    rows: &RecordBatch,
    keys: &[String],
    source: &TableHandle,
    (resets, snapshot): (&[i64], bool),
) -> Result<RecordBatch> {
    let (op, seq) = (
        strings(changes, bronze::OP)?,
        strings(changes, bronze::SEQ)?,
    );
    let tombs: Vec<usize> = (0..changes.num_rows())
        .filter(|&i| op.value(i) == bronze::OP_DELETE && seq.value(i).is_empty())
        .collect();
    if tombs.is_empty() || rows.column_by_name(bronze::OFFSET).is_none() {
        return Ok(changes.clone());
    }
    let codec = KeyCodec::new(&changes.schema(), keys)?;
    let with_lineage = lineage_of(changes, rows)?;
    let (at, offset) = places(&with_lineage, &codec)?;
    let mut in_run = Earlier::new();
    earlier_of(&with_lineage, &codec, None, &mut in_run)?;
    let mut placed: Vec<Option<String>> = (0..changes.num_rows())
        .map(|i| Some(seq.value(i).to_string()))
        .collect();
    let mut keep = vec![true; changes.num_rows()];
    let mut open = Vec::new();
    let key_nulls: Vec<&ArrayRef> = keys
        .iter()
        .filter_map(|k| changes.column_by_name(k))
        .collect();
    for &t in &tombs {
        // A key the tombstone does not name (the table's keys are not the record key's).
        if key_nulls.len() < keys.len() || key_nulls.iter().any(|c| c.is_null(t)) {
            keep[t] = false;
            continue;
        }
        let earlier = in_run.get(&at[t]).map(Vec::as_slice).unwrap_or_default();
        let nearest = earlier
            .iter()
            .filter(|(o, _, _)| *o < offset[t])
            .max_by_key(|(o, _, _)| *o);
        match nearest {
            Some((_, op, _)) if op == bronze::OP_DELETE => keep[t] = false,
            _ if snapshot => match place(earlier, offset[t]) {
                Some(s) => placed[t] = Some(s),
                None => keep[t] = false,
            },
            _ => open.push(t),
        }
    }
    if !open.is_empty() {
        let wanted: HashSet<Place> = open.iter().map(|&t| at[t].clone()).collect();
        let first = take_record_batch(
            changes,
            &UInt32Array::from_iter_values(open.iter().map(|&t| t as u32)),
        )?;
        let mut all = Earlier::new();
        for_bronze_rows(source, keys, &first, |batch| {
            earlier_of(
                &apply_resets(&batch, resets)?,
                &codec,
                Some(&wanted),
                &mut all,
            )
        })
        .await?;
        for t in open {
            match all.get(&at[t]).and_then(|e| place(e, offset[t])) {
                Some(s) => placed[t] = Some(s),
                None => keep[t] = false,
            }
        }
    }
    let out = with_seq(changes, placed.into_iter().collect())?;
    Ok(filter_record_batch(&out, &BooleanArray::from(keep))?)
}

/// `changes` with the raw rows' Kafka lineage beside them.
fn lineage_of(changes: &RecordBatch, rows: &RecordBatch) -> Result<RecordBatch> {
    let mut fields: Vec<_> = changes.schema().fields().iter().cloned().collect();
    let mut columns = changes.columns().to_vec();
    for name in [bronze::TOPIC, bronze::PARTITION, bronze::OFFSET] {
        if let Some((i, f)) = rows.schema().column_with_name(name) {
            fields.push(Arc::new(f.clone()));
            columns.push(rows.column(i).clone());
        }
    }
    let schema = deltalake::arrow::datatypes::Schema::new(fields);
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// Each of `source`'s files that can hold a key of `wanted` (by its first key), as its key,
/// order and lineage columns (`__op`, `__seq` as text), one file at a time.
async fn for_bronze_rows(
    source: &TableHandle,
    keys: &[String],
    wanted: &RecordBatch,
    mut each: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
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
            bronze::TOPIC,
            bronze::PARTITION,
            bronze::OFFSET,
        ]
        .map(str::to_string),
    );
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
        each(RecordBatch::try_new(Arc::new(schema), cols)?)?;
    }
    Ok(())
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
    fn earlier_changes_are_per_topic_and_partition_without_truncates_or_tombstones() -> Result<()> {
        use deltalake::arrow::array::{Int32Array, Int64Array};
        let batch = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    Some(1),
                    None,
                    Some(1),
                    Some(1),
                ])) as ArrayRef,
            ),
            (
                "__op",
                Arc::new(StringArray::from(vec!["c", "u", "t", "d", "u"])) as ArrayRef,
            ),
            (
                "__seq",
                Arc::new(StringArray::from(vec!["01", "02", "03", "", "04"])) as ArrayRef,
            ),
            (
                "__topic",
                Arc::new(StringArray::from(vec!["a", "b", "a", "a", "a"])) as ArrayRef,
            ),
            (
                "__partition",
                Arc::new(Int32Array::from(vec![0, 0, 0, 0, 1])) as ArrayRef,
            ),
            (
                "__offset",
                Arc::new(Int64Array::from(vec![5, 6, 7, 8, 9])) as ArrayRef,
            ),
        ])?;
        let codec = KeyCodec::new(&batch.schema(), &["id".to_string()])?;
        let mut e = Earlier::new();
        earlier_of(&batch, &codec, None, &mut e)?;
        let (places, _) = places(&batch, &codec)?;
        // Topic a, partition 0 holds the create only: not topic b's update, not the truncate,
        // not the tombstone, not partition 1's update.
        assert_eq!(e.get(&places[0]).map(Vec::len), Some(1));
        assert_eq!(e.len(), 3, "{e:?}");
        let mut only = Earlier::new();
        let wanted: HashSet<Place> = [places[1].clone()].into();
        earlier_of(&batch, &codec, Some(&wanted), &mut only)?;
        assert_eq!(only.keys().collect::<Vec<_>>(), [&places[1]]);
        Ok(())
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
