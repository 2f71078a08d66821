//! The join's output table: its columns in table order (non-partition columns left then right,
//! then the partition columns), its schema from the two sources' schemas, and the output
//! columns of matched pairs of rows.

use crate::error::{Error, Result};
use deltalake::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use deltalake::arrow::compute::take;
use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::join::IntervalJoinConfig;
use std::sync::Arc;

/// Output columns in table order: `(left side?, source column, output column)`, the non-partition
/// columns first (left, then right), then the partition columns in `partition_by` order.
fn output_columns(cfg: &RefineJob, join: &IntervalJoinConfig) -> Vec<(bool, String, String)> {
    let all: Vec<(bool, String, String)> = [(true, &join.left), (false, &join.right)]
        .into_iter()
        .flat_map(|(is_left, side)| {
            side.column_pairs()
                .into_iter()
                .map(move |(src, out)| (is_left, src, out))
        })
        .collect();
    let mut ordered: Vec<_> = all
        .iter()
        .filter(|c| !cfg.partition_by.contains(&c.2))
        .cloned()
        .collect();
    for p in &cfg.partition_by {
        ordered.extend(all.iter().filter(|c| &c.2 == p).cloned());
    }
    ordered
}

/// The output schema (see [`output_columns`] for the order).
pub fn output_schema(
    cfg: &RefineJob,
    join: &IntervalJoinConfig,
    left: &Schema,
    right: &Schema,
) -> Result<SchemaRef> {
    let mut fields = Vec::new();
    for (is_left, src, out) in output_columns(cfg, join) {
        let (side, schema) = if is_left {
            (&join.left, left)
        } else {
            (&join.right, right)
        };
        let f = schema.field_with_name(&src).map_err(|_| Error::Schema {
            table: side.table.clone(),
            reason: format!("no column `{src}` (named in refine job `{}`)", cfg.job),
        })?;
        fields.push(Field::new(out, f.data_type().clone(), true));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The output columns of `pairs` of rows of `left` and `right`.
pub(super) fn pair_columns(
    cfg: &RefineJob,
    join: &IntervalJoinConfig,
    left: &RecordBatch,
    right: &RecordBatch,
    pairs: Vec<(u32, u32)>,
) -> Result<Vec<ArrayRef>> {
    let (li, ri): (Vec<u32>, Vec<u32>) = pairs.into_iter().unzip();
    let (li, ri) = (UInt32Array::from(li), UInt32Array::from(ri));
    output_columns(cfg, join)
        .iter()
        .map(|(is_left, src, _)| {
            let (batch, idx) = if *is_left { (left, &li) } else { (right, &ri) };
            let c = batch
                .column_by_name(src)
                .ok_or_else(|| Error::Internal(format!("no `{src}`")))?;
            Ok(take(c.as_ref(), idx, None)?)
        })
        .collect()
}
