//! The change feed of an SCD2 rebuild: the rebuilt rows compared with the touched keys' old
//! silver rows by (key, `__seq`): a new row is an `insert`, a row whose start or end changed an
//! `update_preimage` + `update_postimage`, an old row gone a `delete`; and the keys whose rows
//! changed (only their files are rewritten).

use super::history::{Built, Rebuilt};
use crate::commit::ChangeType;
use crate::error::Result;
use deltalake::arrow::array::{RecordBatch, UInt32Array};
use deltalake::arrow::compute::take_record_batch;
use deltalake::arrow::datatypes::SchemaRef;
use std::collections::{HashMap, HashSet};

/// What the combined rows held before the rebuild, row by row (the old rows first).
pub(super) struct Old<'a> {
    /// Encoded keys.
    pub keys: &'a [Vec<u8>],
    /// `__seq`.
    pub seqs: &'a [Option<String>],
    /// `__END_SEQ`.
    pub ends: &'a [Option<String>],
    /// `__START_AT`.
    pub start_at: &'a [Option<i64>],
    /// `__END_AT`.
    pub end_at: &'a [Option<i64>],
}

/// Compare the rebuilt rows with the old ones: the change feed and the changed keys. A row
/// whose start or end changed is an update.
pub(super) fn feed(
    schema: &SchemaRef,
    old: &RecordBatch,
    combined: &RecordBatch,
    was: &Old<'_>,
    rows: RecordBatch,
    out: &[Built],
) -> Result<Rebuilt> {
    let (keys, seqs, ends) = (was.keys, was.seqs, was.ends);
    let mut old_at: HashMap<(&[u8], &str), usize> = HashMap::new();
    for i in 0..old.num_rows() {
        old_at.insert((&keys[i], seqs[i].as_deref().unwrap_or_default()), i);
    }
    let (mut inserts, mut pre, mut post) = (Vec::new(), Vec::new(), Vec::new());
    let mut changed = HashSet::new();
    let mut kept_old = HashSet::new();
    for (n, b) in out.iter().enumerate() {
        let (i, end) = (&b.row, &b.end);
        let key = (keys[*i].as_slice(), seqs[*i].as_deref().unwrap_or_default());
        match old_at.get(&key) {
            None => {
                inserts.push(n as u32);
                changed.insert(keys[*i].clone());
            }
            Some(&o) => {
                kept_old.insert(o);
                let new_end = end.as_ref().map(|e| (e.0.as_str(), e.1));
                let old_end = ends[o].as_deref().map(|s| (s, was.end_at[o]));
                if new_end != old_end || b.start != was.start_at[o] {
                    pre.push(o as u32);
                    post.push(n as u32);
                    changed.insert(keys[*i].clone());
                }
            }
        }
    }
    let deletes: Vec<u32> = (0..old.num_rows())
        .filter(|o| !kept_old.contains(o))
        .map(|o| o as u32)
        .collect();
    for &o in &deletes {
        changed.insert(keys[o as usize].clone());
    }
    let pick = |b: &RecordBatch, idx: Vec<u32>| take_record_batch(b, &UInt32Array::from(idx));
    let (inserted, closed) = (inserts.len(), pre.len());
    let mut feed = Vec::new();
    for (kind, batch) in [
        (ChangeType::Insert, pick(&rows, inserts)?),
        (ChangeType::UpdatePreimage, pick(combined, pre)?),
        (ChangeType::UpdatePostimage, pick(&rows, post)?),
        (ChangeType::Delete, pick(combined, deletes)?),
    ] {
        if batch.num_rows() > 0 {
            feed.push((
                kind,
                RecordBatch::try_new(schema.clone(), batch.columns().to_vec())?,
            ));
        }
    }
    Ok(Rebuilt {
        orphans: Vec::new(),
        rows,
        feed,
        changed,
        inserted,
        closed,
    })
}
