//! What changed between two versions: the rows each commit inserted or deleted, by replaying
//! the commit files like the incremental reader does (`refine::source`).
//!
//! A version with change data files (`cdc` actions: a table with Delta's change data feed) is
//! read from them: their rows, with their own `_change_type` (`insert`, `update_preimage`,
//! `update_postimage`, `delete`). Only a version without any is diffed as below.
//!
//! Per version: files added with `dataChange=true` hold inserted rows, files removed with
//! `dataChange=true` (a delete, update or overwrite rewrote them) hold deleted rows. A rewrite
//! keeps most rows of the files it replaces, so within one commit a row found both in a removed
//! and in an added file (the same values in every column) is unchanged and left out: what is
//! reported is the net change (an update shows as the old row deleted and the new one inserted).
//! Commits with only `dataChange=false` actions (compaction) change nothing.

use crate::error::{Error, Result};
use crate::partition_path::decode;
use crate::storage::Lake;
use crate::table::{DataFile, TableHandle, is_missing_file};
use deltalake::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array};
use deltalake::arrow::compute::{concat_batches, take};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::row::{RowConverter, SortField};
use deltalake::kernel::Action;
use futures::TryStreamExt;
use std::collections::HashMap;
use std::sync::Arc;

/// Column naming the kind of change (`insert` or `delete`; from change data files also
/// `update_preimage` and `update_postimage`).
pub const CHANGE_TYPE: &str = "_change_type";
/// Column with the version of the commit that made the change.
pub const COMMIT_VERSION: &str = "_commit_version";

/// The changed rows of versions `from..=to`.
#[derive(Debug, Clone)]
pub struct Changes {
    /// First version read.
    pub from: u64,
    /// Last version read.
    pub to: u64,
    /// Rows in the table's latest schema plus [`CHANGE_TYPE`] and [`COMMIT_VERSION`], in
    /// version order.
    pub rows: RecordBatch,
}

/// The rows versions `from..=to` (default: the latest) inserted or deleted.
pub async fn changes(lake: &Lake, table: &str, from: u64, to: Option<u64>) -> Result<Changes> {
    let handle = TableHandle::open_existing(lake, table).await?;
    let latest = handle.version().unwrap_or(0);
    let to = to.unwrap_or(latest);
    let unavailable = |reason: String| Error::VersionUnavailable {
        table: table.to_string(),
        reason,
    };
    if to > latest || from > to {
        return Err(unavailable(format!(
            "asked for versions {from}..={to}; the table has 0..={latest}"
        )));
    }
    let schema = handle.arrow_schema()?;
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(CHANGE_TYPE, DataType::Utf8, false));
    fields.push(Field::new(COMMIT_VERSION, DataType::Int64, false));
    let out_schema: SchemaRef = Arc::new(Schema::new(fields));
    let cdc_schema = crate::commit::change_schema(&schema);
    let mut commits = handle.commits(from..=to).stream();
    let mut batches = Vec::new();
    while let Some(commit) = commits.try_next().await.map_err(|e| match e {
        Error::CommitGone {
            version: v, oldest, ..
        } => unavailable(format!(
            "the commit file of version {v} is gone (log cleanup); changes can be read from \
             version {} on",
            oldest.unwrap_or(latest)
        )),
        e => e,
    })? {
        let v = commit.version();
        let actions = commit.actions()?;
        let (mut added, mut removed, mut changed) = (Vec::new(), Vec::new(), Vec::new());
        let has_cdc = actions.iter().any(|a| matches!(a, Action::Cdc(_)));
        for action in actions {
            let (path, partitions, into) = match action {
                Action::Cdc(c) => (c.path, c.partition_values, &mut changed),
                Action::Add(a) if a.data_change && !has_cdc => {
                    (a.path, a.partition_values, &mut added)
                }
                Action::Remove(r) if r.data_change && !has_cdc => {
                    (r.path, r.partition_values.unwrap_or_default(), &mut removed)
                }
                _ => continue,
            };
            let file_schema = if has_cdc { &cdc_schema } else { &schema };
            let file = DataFile::new(&decode(&path), None, partitions);
            match handle.read_file(&file, file_schema).await {
                Ok(b) => into.extend(b),
                Err(e) if is_missing_file(&e) => {
                    return Err(unavailable(format!(
                        "version {v} references {}, which vacuum deleted; changes of \
                         versions inside the vacuum retention window can be read",
                        file.path
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        if has_cdc {
            for rows in changed {
                let n = rows.num_rows();
                let mut cols: Vec<ArrayRef> = rows.columns().to_vec();
                cols.push(Arc::new(Int64Array::from(vec![v as i64; n])));
                batches.push(RecordBatch::try_new(out_schema.clone(), cols)?);
            }
            continue;
        }
        let added = concat_batches(&schema, &added)?;
        let removed = concat_batches(&schema, &removed)?;
        let (inserts, deletes) = net(&schema, &added, &removed)?;
        for (rows, kind) in [(deletes, "delete"), (inserts, "insert")] {
            if rows.num_rows() == 0 {
                continue;
            }
            let n = rows.num_rows();
            let mut cols: Vec<ArrayRef> = rows.columns().to_vec();
            cols.push(Arc::new(StringArray::from(vec![kind; n])));
            cols.push(Arc::new(Int64Array::from(vec![v as i64; n])));
            batches.push(RecordBatch::try_new(out_schema.clone(), cols)?);
        }
    }
    Ok(Changes {
        from,
        to,
        rows: concat_batches(&out_schema, &batches)?,
    })
}

/// (inserted, deleted): rows of `added` not in `removed`, and of `removed` not in `added`,
/// counting duplicates (a multiset difference on whole rows).
fn net(
    schema: &SchemaRef,
    added: &RecordBatch,
    removed: &RecordBatch,
) -> Result<(RecordBatch, RecordBatch)> {
    if removed.num_rows() == 0 || added.num_rows() == 0 {
        return Ok((added.clone(), removed.clone()));
    }
    let converter = RowConverter::new(
        schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect(),
    )?;
    let removed_rows = converter.convert_columns(removed.columns())?;
    let added_rows = converter.convert_columns(added.columns())?;
    let mut pending: HashMap<&[u8], Vec<u32>> = HashMap::new();
    for (i, r) in removed_rows.iter().enumerate() {
        pending.entry(r.data()).or_default().push(i as u32);
    }
    let mut inserted = Vec::new();
    for (i, r) in added_rows.iter().enumerate() {
        match pending.get_mut(r.data()).and_then(Vec::pop) {
            Some(_) => {} // rewritten unchanged
            None => inserted.push(i as u32),
        }
    }
    let mut deleted: Vec<u32> = pending.into_values().flatten().collect();
    deleted.sort_unstable();
    let pick = |batch: &RecordBatch, idx: Vec<u32>| -> Result<RecordBatch> {
        let idx = UInt32Array::from(idx);
        let cols = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &idx, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(schema.clone(), cols)?)
    };
    Ok((pick(added, inserted)?, pick(removed, deleted)?))
}

#[cfg(test)]
mod tests {
    use super::net;
    use deltalake::arrow::array::{Array, Int64Array, RecordBatch, StringArray};
    use deltalake::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn rows(ids: &[i64], vs: &[&str]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(vs.to_vec())),
            ],
        )
        .expect("batch")
    }

    fn ids(b: &RecordBatch) -> Vec<i64> {
        let a = b
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("ids");
        (0..a.len()).map(|i| a.value(i)).collect()
    }

    #[test]
    fn a_rewrite_reports_only_what_changed_counting_duplicates() {
        // A file of rows 1,2,2,3 rewritten as 1,2,3' (one of the duplicate 2s deleted, 3
        // updated) plus a new 4.
        let removed = rows(&[1, 2, 2, 3], &["a", "b", "b", "c"]);
        let added = rows(&[1, 2, 3, 4], &["a", "b", "C", "d"]);
        let schema = removed.schema();
        let (ins, del) = net(&schema, &added, &removed).expect("net");
        assert_eq!(ids(&ins), [3, 4]);
        assert_eq!(ids(&del), [2, 3]);
        let (ins, del) = net(&schema, &added, &rows(&[], &[])).expect("net");
        assert_eq!((ins.num_rows(), del.num_rows()), (4, 0));
    }
}
