//! The silver side of an SCD2 run: the files that can hold a touched key (pruned by key
//! statistics like the upsert's target search; a truncate reads every file) and their touched
//! rows, and the rewrite of the files holding changed keys (copy-on-write: their other rows are
//! kept) with the changed keys' rebuilt rows.

use super::Scd2Planner;
use super::history::{Rebuilt, Truncate};
use super::keys::KeyCodec;
use crate::commit::batch_writer;
use crate::error::{Error, Result};
use crate::refine::keyed::target;
use crate::table::TableHandle;
use deltalake::arrow::array::{BooleanArray, RecordBatch};
use deltalake::arrow::compute::{concat_batches, filter_record_batch};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::{Add, Remove};
use deltalake::writer::DeltaWriter;
use std::collections::HashSet;

/// A silver file holding touched keys: its remove, its rows and their encoded keys.
pub(super) type SilverFile = (Remove, RecordBatch, Vec<Vec<u8>>);

/// The keys a run touches: those of `changes` (the changes without truncates; `keys` the key
/// columns, `codec` their encoding), every key when there are `truncates`.
pub(super) struct Touched<'a> {
    /// The key columns.
    pub keys: &'a [String],
    /// The changes without truncates.
    pub changes: &'a RecordBatch,
    /// The truncates.
    pub truncates: &'a [Truncate],
    /// The keys' encoding.
    pub codec: &'a KeyCodec,
}

/// The silver files (at `output`'s snapshot, read in `schema`) that can hold a touched key:
/// pruned by key statistics like the upsert's target search; a truncate reads every file.
pub(super) async fn read_silver(
    output: &TableHandle,
    touched: Touched<'_>,
    schema: &SchemaRef,
) -> Result<Vec<SilverFile>> {
    let Touched {
        keys,
        changes,
        truncates,
        codec,
    } = touched;
    let mut files: Vec<SilverFile> = Vec::new();
    let first = &keys[0];
    let live = target::live_files(output, first)?;
    let first_col = changes
        .column_by_name(first)
        .ok_or_else(|| Error::Internal(format!("no key column `{first}`")))?
        .clone();
    let candidates: Vec<&target::TargetFile> = if truncates.is_empty() {
        target::candidates(&live, first, &first_col)?
    } else {
        live.iter().collect()
    };
    for f in candidates {
        let rows = target::read_all(output, f, schema).await?;
        let keys = codec.encode(&rows)?;
        files.push((f.remove.clone(), rows, keys));
    }
    Ok(files)
}

/// The touched keys' rows of the silver `files` (every row when there are `truncates`).
pub(super) fn old_rows(
    files: &[SilverFile],
    incoming: &HashSet<Vec<u8>>,
    truncates: &[Truncate],
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let touched = |k: &Vec<u8>| !truncates.is_empty() || incoming.contains(k);
    let mut old_parts = Vec::new();
    for (_, rows, keys) in files {
        let mask = BooleanArray::from(keys.iter().map(touched).collect::<Vec<_>>());
        old_parts.push(filter_record_batch(rows, &mask)?);
    }
    Ok(concat_batches(schema, &old_parts)?)
}

/// Rewrite the silver `files` holding changed keys without those keys' rows, and write the
/// changed keys' rebuilt rows, in one new file: the adds and the removes.
pub(super) async fn write_changed(
    p: &Scd2Planner<'_, '_>,
    schema: &SchemaRef,
    files: &[SilverFile],
    codec: &KeyCodec,
    rebuilt: &Rebuilt,
) -> Result<(Vec<Add>, Vec<Remove>)> {
    let table = p.cfg.output.as_str();
    let mut writer = batch_writer(p.ctx.lake, table, schema.clone(), vec![])?;
    let mut removes = Vec::new();
    let mut out = Vec::new();
    for (remove, rows, keys) in files {
        if !keys.iter().any(|k| rebuilt.changed.contains(k)) {
            continue;
        }
        removes.push(remove.clone());
        let keep = BooleanArray::from(
            keys.iter()
                .map(|k| !rebuilt.changed.contains(k))
                .collect::<Vec<_>>(),
        );
        out.push(filter_record_batch(rows, &keep)?);
    }
    let new_keys = codec.encode(&rebuilt.rows)?;
    let mask = BooleanArray::from(
        new_keys
            .iter()
            .map(|k| rebuilt.changed.contains(k))
            .collect::<Vec<_>>(),
    );
    out.push(filter_record_batch(&rebuilt.rows, &mask)?);
    let out = concat_batches(schema, &out)?;
    let mut adds: Vec<Add> = Vec::new();
    if out.num_rows() > 0 {
        crate::table::parquet_write::write_sliced(&mut writer, &out)
            .await
            .map_err(|e| Error::storage(table, e))?;
        adds = writer.flush().await.map_err(|e| Error::storage(table, e))?;
    }
    Ok((adds, removes))
}
