//! Deletes known only from their Kafka tombstone (ARCHITECTURE.md "Deletes known only from
//! their tombstone"). Debezium follows each delete event with a tombstone (the key, a null
//! value); log compaction may remove the delete event (and every earlier change of the key)
//! before the ingestor reads the partition, and a batch may end between the two. A tombstone
//! that does not follow its delete in its batch reaches bronze as a delete with an empty
//! `__seq` and no commit time; here it gets its place in the key's order:
//!
//! - every change of its key at a lower offset of its Kafka partition came before it, so it
//!   ranks just above the highest `__seq` among them and among what silver holds for the key
//!   (`<that __seq>|tombstone`: positions are fixed width, so nothing ranks between them);
//! - when the nearest of those changes in the run is a delete, the tombstone is that delete's
//!   and adds nothing (dropped); when there is no such `__seq` at all, the key was never seen
//!   and there is nothing to delete (dropped).
//!
//! Its time (`__source_ts`) is the Kafka record's timestamp, when the connector sent it just
//! after the delete committed: SCD2 closes the version then (never before its start). It is
//! not a commit time, so the position checks never use it ([`super::positions::untimed`]).

use super::changes::one_per_key_and_seq;
use super::scd2::keys::KeyCodec;
use crate::error::{Error, Result};
use crate::refine::keyed::target;
use crate::table::TableHandle;
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray, UInt32Array,
};
use deltalake::arrow::compute::{cast, filter_record_batch, take_record_batch};
use deltalake::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use lakestream_formats::config::{bronze, silver};
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

/// A Kafka lineage column of the raw bronze rows as `i64` per row (absent or null: -1).
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

/// `changes` (projected from the raw bronze `rows`, row for row, positions ranked) with each
/// unplaced tombstone (a delete with an empty `__seq`) placed after the changes of its key
/// before it in its partition within the run: `<highest __seq>|tombstone` (`|tombstone` when
/// there are none; [`place_at_current`] finishes it), or dropped when the nearest of them is a
/// delete. Not yet re-sorted.
pub(crate) fn place_in_run(
    changes: &RecordBatch,
    rows: &RecordBatch,
    keys: &[String],
) -> Result<RecordBatch> {
    let (op, seq) = (
        strings(changes, bronze::OP)?,
        strings(changes, bronze::SEQ)?,
    );
    let tomb = |i: usize| op.value(i) == bronze::OP_DELETE && seq.value(i).is_empty();
    if !(0..changes.num_rows()).any(tomb) {
        return Ok(changes.clone());
    }
    let codec = KeyCodec::new(&changes.schema(), keys)?;
    let enc = codec.encode(changes)?;
    let (partition, offset) = (
        lineage(rows, bronze::PARTITION)?,
        lineage(rows, bronze::OFFSET)?,
    );
    // Per (key, partition): the run's other changes as (offset, index).
    let mut before: HashMap<(&[u8], i64), Vec<(i64, usize)>> = HashMap::new();
    for i in (0..changes.num_rows()).filter(|&i| !tomb(i)) {
        before
            .entry((&enc[i], partition[i]))
            .or_default()
            .push((offset[i], i));
    }
    let mut keep = vec![true; changes.num_rows()];
    let mut placed: Vec<Option<String>> = (0..changes.num_rows())
        .map(|i| Some(seq.value(i).to_string()))
        .collect();
    for t in (0..changes.num_rows()).filter(|&i| tomb(i)) {
        let earlier: Vec<(i64, usize)> = before
            .get(&(enc[t].as_slice(), partition[t]))
            .map(|v| v.iter().copied().filter(|(o, _)| *o < offset[t]).collect())
            .unwrap_or_default();
        let nearest = earlier.iter().max_by_key(|(o, _)| *o).map(|(_, i)| *i);
        if nearest.is_some_and(|i| op.value(i) == bronze::OP_DELETE) {
            keep[t] = false;
            continue;
        }
        let base = earlier
            .iter()
            .map(|(_, i)| seq.value(*i))
            .max()
            .unwrap_or("");
        placed[t] = Some(format!("{base}{MARK}"));
    }
    let out = with_seq(changes, placed.into_iter().collect())?;
    Ok(filter_record_batch(&out, &BooleanArray::from(keep))?)
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

/// The silver `output` a run applies to: its handle and schema (`None`: no silver yet), and
/// whether it keeps history (SCD2: the key's highest `__seq` is that of any of its versions or
/// of the change that ended one, `__END_SEQ`; SCD1: its row's).
pub(crate) struct Current<'a> {
    pub output: &'a TableHandle,
    pub schema: Option<&'a SchemaRef>,
    pub history: bool,
}

/// `changes` (sorted by key then `__seq`) with the tombstones [`place_in_run`] left ranked
/// above the key's current silver row too (`<max(run, silver)>|tombstone`; neither: dropped),
/// then sorted again. Reads only the silver files that can hold those keys, and only when a
/// run has such a tombstone.
pub(crate) async fn place_at_current(
    changes: RecordBatch,
    keys: &[String],
    current: Current<'_>,
    table: &str,
) -> Result<RecordBatch> {
    let (op, seq) = (
        strings(&changes, bronze::OP)?,
        strings(&changes, bronze::SEQ)?,
    );
    let tombs: Vec<u32> = (0..changes.num_rows() as u32)
        .filter(|&i| {
            op.value(i as usize) == bronze::OP_DELETE && seq.value(i as usize).ends_with(MARK)
        })
        .collect();
    if tombs.is_empty() {
        return Ok(changes);
    }
    let codec = KeyCodec::new(&changes.schema(), keys)?;
    let enc = codec.encode(&changes)?;
    let wanted = take_record_batch(&changes, &UInt32Array::from(tombs.clone()))?;
    let stored = match current.schema {
        Some(schema) => current_seqs(&current, schema, keys, &wanted, &codec).await?,
        None => HashMap::new(),
    };
    let mut keep = vec![true; changes.num_rows()];
    let mut placed: Vec<Option<String>> = (0..changes.num_rows())
        .map(|i| Some(seq.value(i).to_string()))
        .collect();
    for t in tombs.into_iter().map(|t| t as usize) {
        let run = seq.value(t).strip_suffix(MARK).unwrap_or_default();
        let base = stored.get(&enc[t]).map_or(run, |s| s.as_str().max(run));
        if base.is_empty() {
            keep[t] = false;
        } else {
            placed[t] = Some(format!("{base}{MARK}"));
        }
    }
    let out = with_seq(&changes, placed.into_iter().collect())?;
    let out = filter_record_batch(&out, &BooleanArray::from(keep))?;
    one_per_key_and_seq(&out, keys, table)
}

/// The highest `__seq` silver holds for each key of `wanted` ([`Current`]).
async fn current_seqs(
    current: &Current<'_>,
    schema: &SchemaRef,
    keys: &[String],
    wanted: &RecordBatch,
    codec: &KeyCodec,
) -> Result<HashMap<Vec<u8>, String>> {
    let first = &keys[0];
    let first_values = wanted
        .column_by_name(first)
        .ok_or_else(|| Error::Internal(format!("changes have no key column `{first}`")))?;
    let files = target::live_files(current.output, first)?;
    let mut columns: Vec<String> = keys.to_vec();
    columns.push(silver::SEQ.to_string());
    if current.history {
        columns.push(silver::END_SEQ.to_string());
    }
    let mut out = HashMap::new();
    for f in target::candidates(&files, first, first_values)? {
        let batch = target::read_columns(current.output, f, schema, &columns).await?;
        let enc = codec.encode(&batch)?;
        let mut seqs = Vec::new();
        for name in [silver::SEQ, silver::END_SEQ] {
            if let Some(c) = batch.column_by_name(name) {
                seqs.push(cast(c, &DataType::Utf8)?);
            }
        }
        for (i, key) in enc.into_iter().enumerate() {
            let e = out.entry(key).or_insert_with(String::new);
            for s in seqs.iter().map(|c| c.as_string::<i32>()) {
                if s.is_valid(i) && s.value(i) > e.as_str() {
                    *e = s.value(i).to_string();
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{Int32Array, Int64Array};

    fn batch(ops: &[&str], seqs: &[&str], ids: &[i64]) -> RecordBatch {
        RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
            (
                "__op",
                Arc::new(StringArray::from(ops.to_vec())) as ArrayRef,
            ),
            (
                "__seq",
                Arc::new(StringArray::from(seqs.to_vec())) as ArrayRef,
            ),
        ])
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn lineage_rows(partitions: &[i32], offsets: &[i64]) -> RecordBatch {
        RecordBatch::try_from_iter([
            (
                "__partition",
                Arc::new(Int32Array::from(partitions.to_vec())) as ArrayRef,
            ),
            (
                "__offset",
                Arc::new(Int64Array::from(offsets.to_vec())) as ArrayRef,
            ),
        ])
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn seqs(b: &RecordBatch) -> Vec<String> {
        let s = strings(b, bronze::SEQ).unwrap_or_else(|e| panic!("{e}"));
        s.iter()
            .map(|v| v.unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn a_tombstone_ranks_after_its_keys_earlier_changes_in_its_partition() -> Result<()> {
        // Key 1: update at offset 3, tombstone at 5 (its delete compacted away), create at 7.
        // Key 2: delete at 10, tombstone at 11 (its own delete: dropped).
        // Key 3: tombstone alone (left for the silver lookup). Key 4: a change in another
        // partition does not place it.
        let changes = batch(
            &["u", "d", "c", "d", "d", "d", "c", "d"],
            &["0005", "", "0009", "0010", "", "", "0002", ""],
            &[1, 1, 1, 2, 2, 3, 4, 4],
        );
        let rows = lineage_rows(&[0, 0, 0, 0, 0, 0, 1, 0], &[3, 5, 7, 10, 11, 12, 1, 13]);
        let out = place_in_run(&changes, &rows, &["id".to_string()])?;
        assert_eq!(
            seqs(&out),
            [
                "0005",
                "0005|tombstone",
                "0009",
                "0010",
                "|tombstone",
                "0002",
                "|tombstone"
            ]
        );
        // The placed tombstone sorts between the update and the later create.
        assert!("0005" < "0005|tombstone" && "0005|tombstone" < "0009");
        Ok(())
    }

    #[test]
    fn changes_without_tombstones_are_returned_unchanged() -> Result<()> {
        let changes = batch(&["c", "d"], &["0001", "0002"], &[1, 1]);
        let out = place_in_run(
            &changes,
            &RecordBatch::new_empty(changes.schema()),
            &["id".into()],
        )?;
        assert_eq!(seqs(&out), ["0001", "0002"]);
        Ok(())
    }
}
