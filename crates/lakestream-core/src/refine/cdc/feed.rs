//! The change data feed rows of one apply commit (Delta's `_change_data/` files): computed from
//! the rows the commit dropped from silver (old images) and the rows it wrote (new images), so
//! only the touched keys appear, whatever else the rewritten files held:
//! - a key with a new row and no old one: `insert`;
//! - a key with both: `update_preimage` (old) and `update_postimage` (new);
//! - a key with an old row and no new one (delete, truncate): `delete` (old values);
//! - a key whose new row has the old row's values (every column but `__*`): nothing (an
//!   unchanged re-snapshot or re-emission only moves `__seq` / `__source_ts`).
//!
//! A change that lost (older than silver or a tombstone) drops and writes nothing, so it has no
//! rows here.

use crate::commit::{ChangeType, change_schema};
use crate::error::Result;
use crate::refine::keyed::Images;
use crate::refine::keyed::order::Encoder;
use crate::refine::keyed::values::{RowValues, same};
use deltalake::arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use deltalake::arrow::compute::{concat_batches, filter_record_batch};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The feed rows (the table's columns + [`CHANGE_TYPE`](crate::commit::CHANGE_TYPE)) of a commit whose dropped and written
/// rows are `images`, keys encoded by `keys`; `None` when the commit changes no row.
pub fn change_rows(keys: &Encoder, table: &str, images: &Images) -> Result<Option<RecordBatch>> {
    let schema = &images.schema;
    let old = concat_batches(schema, &images.dropped)?;
    let new = match &images.written {
        Some(b) => b.clone(),
        None => RecordBatch::new_empty(schema.clone()),
    };
    let (old, new) = without_unchanged(keys, table, old, new)?;
    if old.num_rows() == 0 && new.num_rows() == 0 {
        return Ok(None);
    }
    let old_keys: HashSet<Vec<u8>> = keys.encode(&old, table)?.into_iter().collect();
    let new_keys: HashSet<Vec<u8>> = keys.encode(&new, table)?.into_iter().collect();
    let old_types: Vec<&str> = keys
        .encode(&old, table)?
        .iter()
        .map(|k| {
            if new_keys.contains(k) {
                ChangeType::UpdatePreimage.as_str()
            } else {
                ChangeType::Delete.as_str()
            }
        })
        .collect();
    let new_types: Vec<&str> = keys
        .encode(&new, table)?
        .iter()
        .map(|k| {
            if old_keys.contains(k) {
                ChangeType::UpdatePostimage.as_str()
            } else {
                ChangeType::Insert.as_str()
            }
        })
        .collect();
    let out = change_schema(schema);
    let with_type = |b: &RecordBatch, types: Vec<&str>| -> Result<RecordBatch> {
        let mut cols: Vec<ArrayRef> = b.columns().to_vec();
        cols.push(Arc::new(StringArray::from(types)));
        Ok(RecordBatch::try_new(out.clone(), cols)?)
    };
    let parts = [with_type(&old, old_types)?, with_type(&new, new_types)?];
    Ok(Some(concat_batches(&out, &parts)?))
}

/// `old` and `new` without the keys whose new row has the old row's values (columns but `__*`).
fn without_unchanged(
    keys: &Encoder,
    table: &str,
    old: RecordBatch,
    new: RecordBatch,
) -> Result<(RecordBatch, RecordBatch)> {
    if old.num_rows() == 0 || new.num_rows() == 0 {
        return Ok((old, new));
    }
    let values = RowValues::new(&old)?;
    let (old_values, new_values) = (values.encode(&old)?, values.encode(&new)?);
    let (old_keys, new_keys) = (keys.encode(&old, table)?, keys.encode(&new, table)?);
    let new_at: HashMap<&[u8], usize> = new_keys
        .iter()
        .enumerate()
        .map(|(j, k)| (k.as_slice(), j))
        .collect();
    let unchanged: HashSet<&[u8]> = old_keys
        .iter()
        .enumerate()
        .filter(|(i, k)| {
            new_at
                .get(k.as_slice())
                .is_some_and(|&j| same(&old_values, *i, &new_values, j))
        })
        .map(|(_, k)| k.as_slice())
        .collect();
    if unchanged.is_empty() {
        return Ok((old, new));
    }
    let keep = |b: &RecordBatch, ks: &[Vec<u8>]| -> Result<RecordBatch> {
        let mask =
            BooleanArray::from_iter(ks.iter().map(|k| Some(!unchanged.contains(k.as_slice()))));
        Ok(filter_record_batch(b, &mask)?)
    };
    Ok((keep(&old, &old_keys)?, keep(&new, &new_keys)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{AsArray, Int64Array};
    use deltalake::arrow::datatypes::{DataType, Schema};

    fn rows(ids: &[i64], v: &[&str]) -> RecordBatch {
        RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
            ("v", Arc::new(StringArray::from(v.to_vec())) as ArrayRef),
        ])
        .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(Schema::empty())))
    }

    #[test]
    fn touched_keys_only_with_their_change_types() -> Result<()> {
        let old = rows(&[1, 2], &["a", "b"]);
        let images = Images {
            schema: old.schema(),
            dropped: vec![old],
            written: Some(rows(&[1, 3], &["a2", "c"])),
        };
        let keys = Encoder::new(&["id".to_string()], vec![DataType::Int64])?;
        let feed = change_rows(&keys, "t", &images)?.unwrap_or_else(|| rows(&[], &[]));
        let got: Vec<(String, String)> = (0..feed.num_rows())
            .map(|i| {
                (
                    feed.column(1).as_string::<i32>().value(i).to_string(),
                    feed.column(2).as_string::<i32>().value(i).to_string(),
                )
            })
            .collect();
        let want = [
            ("a", "update_preimage"),
            ("b", "delete"),
            ("a2", "update_postimage"),
            ("c", "insert"),
        ];
        assert_eq!(
            got,
            want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec()
        );
        let nothing = Images {
            schema: images.schema.clone(),
            dropped: vec![],
            written: None,
        };
        assert!(change_rows(&keys, "t", &nothing)?.is_none());
        Ok(())
    }
}
