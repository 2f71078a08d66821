//! Z-order: sort a bin's rows by the Morton code of their per-column ranks, so files hold
//! narrow ranges of every z-order column at once.

use crate::error::{Error, Result};
use deltalake::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use deltalake::arrow::compute::{sort_to_indices, take_record_batch};

/// Sort rows by the Morton (z-order) code of their per-column ranks.
pub(super) fn zorder(batch: &RecordBatch, columns: &[String]) -> Result<RecordBatch> {
    let n = batch.num_rows();
    if n < 2 {
        return Ok(batch.clone());
    }
    let bits = (64 / columns.len().max(1)).min(32) as u32;
    let scale = |rank: usize| -> u64 {
        ((rank as u128 * ((1u128 << bits) - 1)) / (n as u128 - 1).max(1)) as u64
    };
    let mut keys = vec![0u64; n];
    for (ci, c) in columns.iter().enumerate() {
        let col: &ArrayRef = batch
            .column_by_name(c)
            .ok_or_else(|| Error::Config(format!("z-order column `{c}` missing")))?;
        let order = sort_to_indices(col, None, None)?;
        for (rank, &row) in order.values().iter().enumerate() {
            let r = scale(rank);
            for b in 0..bits {
                if r >> b & 1 == 1 {
                    keys[row as usize] |= 1u64 << (b as usize * columns.len() + ci);
                }
            }
        }
    }
    let mut idx: Vec<u32> = (0..n as u32).collect();
    idx.sort_by_key(|&i| keys[i as usize]);
    Ok(take_record_batch(batch, &UInt32Array::from(idx))?)
}
