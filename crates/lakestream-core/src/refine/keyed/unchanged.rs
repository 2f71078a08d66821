//! The CDC apply's look at the output rows a winner replaces ([`Values`] in the [`Sweep`]):
//! its TOAST placeholder cells take the replaced row's values, and a winner whose row values
//! then equal the row's is *unchanged*: it still replaces the row (silver holds the greatest
//! `__seq` of its key, so a change older than it, arriving later, stays out whatever order the
//! changes came in), but the change feed has no row for it (`refine/cdc/feed.rs` compares the
//! images). Only files that lose a row to a newer winner are read whole (they are rewritten
//! anyway).

use super::incoming::{Incoming, IncomingRows};
use super::rewrite::Sweep;
use super::target::{self, TargetFile};
use super::values::{RowValues, Toast, same};
use crate::error::Result;
use crate::table::TableHandle;
use crate::table::parquet_read::with_partitions;
use deltalake::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use deltalake::arrow::compute::kernels::zip::zip;
use deltalake::arrow::compute::{concat_batches, take_record_batch};
use deltalake::arrow::datatypes::SchemaRef;
use std::collections::HashMap;

/// How a CDC apply reads change values (none for the plain upsert).
#[derive(Debug, Clone)]
pub(crate) struct Values {
    /// The Debezium source's TOAST placeholder (none for DMS / files).
    pub toast: Option<Toast>,
    /// The key columns (never a placeholder).
    pub keys: Vec<String>,
}

/// Winners' rows with their placeholders resolved against the rows they replace, to write
/// instead of the source rows.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    /// Source row (in [`IncomingRows::rows`]) -> row of [`Self::rows`].
    pub at: HashMap<u32, usize>,
    /// The resolved rows, in the output's schema after the commit.
    pub rows: Option<RecordBatch>,
}

/// Per candidate file (index), the rows it loses: (row in the file, winner index).
pub(crate) type Drops = foldhash::HashMap<usize, Vec<(usize, usize)>>;

/// Resolve the placeholders of the winners that replace an output row (`drops`, rows marked
/// `truncated` are not replacements) and keep the row when the winner changes nothing: the
/// winner is marked unchanged (and older: nothing written) and its drop removed.
pub(crate) async fn check(
    src: &IncomingRows<'_>,
    incoming: &mut [Incoming],
    files: (&TableHandle, &[&TargetFile], &SchemaRef),
    drops: &mut Drops,
    truncated: usize,
    sweep: &Sweep,
) -> Result<Resolved> {
    let Some(values) = &sweep.values else {
        return Ok(Resolved::default());
    };
    let (output, candidates, schema) = files;
    let mut resolved = Resolved::default();
    let mut parts: Vec<RecordBatch> = Vec::new();
    let mut base = 0;
    let mut fis: Vec<usize> = drops.keys().copied().collect();
    fis.sort_unstable();
    for fi in fis {
        let replaced: Vec<(usize, usize)> = drops[&fi]
            .iter()
            .copied()
            .filter(|&(_, w)| w != truncated && !incoming[w].older && !incoming[w].delete)
            .collect();
        if replaced.is_empty() {
            continue;
        }
        let all = target::read_all(output, candidates[fi], schema).await?;
        let take_old = UInt32Array::from(replaced.iter().map(|r| r.0 as u32).collect::<Vec<_>>());
        let old = take_record_batch(&all, &take_old)?;
        let take_new: Vec<u32> = replaced.iter().map(|r| incoming[r.1].row).collect();
        let new = take_record_batch(&src.stored, &UInt32Array::from(take_new))?;
        let new = with_partitions(schema, &new, &HashMap::new())?;
        let new = match &values.toast {
            Some(t) => from_old(&new, &old, t, &values.keys)?,
            None => new,
        };
        let encoder = RowValues::new(&new)?;
        let (a, b) = (encoder.encode(&new)?, encoder.encode(&old)?);
        for (n, &(_, w)) in replaced.iter().enumerate() {
            // Equal values: the row is still replaced (its `__seq` moves to the winner's, so a
            // change older than the winner stays out), but the feed has no row for it.
            incoming[w].unchanged = same(&a, n, &b, n);
            resolved.at.insert(incoming[w].row, base + n);
        }
        base += new.num_rows();
        parts.push(new);
    }
    if !parts.is_empty() {
        resolved.rows = Some(concat_batches(schema, &parts)?);
    }
    Ok(resolved)
}

/// `new` with each placeholder cell taking the value of the same row of `old`.
fn from_old(
    new: &RecordBatch,
    old: &RecordBatch,
    toast: &Toast,
    keys: &[String],
) -> Result<RecordBatch> {
    let schema = new.schema();
    let mut columns: Vec<ArrayRef> = new.columns().to_vec();
    for (c, f) in schema.fields().iter().enumerate() {
        if f.name().starts_with("__") || keys.contains(f.name()) {
            continue;
        }
        let (Some(marks), Some(before)) = (toast.marks(&columns[c])?, old.column_by_name(f.name()))
        else {
            continue;
        };
        columns[c] = zip(&marks, before, &columns[c])?;
    }
    Ok(RecordBatch::try_new(schema, columns)?)
}
