//! The SCD2 job's side table of deletes and truncates silver has no trace of
//! (`_lakestream/<job>/tombstones`, the tombstone table SCD1 jobs use, never expired here: a
//! history is kept for good): a delete that closes no row (it arrived before the upserts it
//! ends, or an older delete closed its row first) and every truncate. Each run loads them
//! ([`load`]) and records its new ones ([`to_store`]) before its silver commit, so a run killed
//! in between loses nothing (a row stored twice is one event: equal `__seq`s are one change).
//! Only such deletes are kept, not every delete: the table stays small (out-of-order deliveries
//! and truncates), and is read whole on every run.

use super::history::{Rebuilt, Stored, Truncate};
use super::keys::KeyCodec;
use crate::error::{Error, Result};
use crate::read::read_table;
use crate::storage::Lake;
use deltalake::arrow::array::{
    ArrayRef, AsArray, RecordBatch, StringArray, TimestampMicrosecondArray, new_null_array,
};
use deltalake::arrow::compute::{cast, concat};
use deltalake::arrow::datatypes::{DataType, Field, Schema, TimeUnit, TimestampMicrosecondType};
use lakestream_formats::config::bronze;
use std::collections::HashSet;
use std::sync::Arc;

/// A stored row's time column: the delete's `__source_ts`, else its `__ingested_at` (what
/// closes a row's `__END_AT`).
pub const AT: &str = "__at";

/// Every stored delete and truncate of `table` (none when it does not exist yet).
pub async fn load(lake: &Lake, table: &str, codec: &KeyCodec) -> Result<Vec<Stored>> {
    let batch = match read_table(lake, table, None).await {
        Ok(b) => b,
        Err(Error::TableNotFound(_)) => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    if batch.num_rows() == 0 {
        return Ok(vec![]);
    }
    let text = |name: &str| -> Result<Vec<Option<String>>> {
        let c = batch
            .column_by_name(name)
            .ok_or_else(|| Error::Internal(format!("`{table}` has no `{name}`")))?;
        Ok(cast(c, &DataType::Utf8)?
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect())
    };
    let (seqs, ops) = (text(bronze::SEQ)?, text(bronze::OP)?);
    let at: Vec<Option<i64>> = match batch.column_by_name(AT) {
        Some(c) => cast(c, &DataType::Timestamp(TimeUnit::Microsecond, None))?
            .as_primitive::<TimestampMicrosecondType>()
            .iter()
            .collect(),
        None => vec![None; batch.num_rows()],
    };
    let keys = codec.encode(&batch)?;
    Ok((0..batch.num_rows())
        .map(|i| Stored {
            key: (ops[i].as_deref() != Some(bronze::OP_TRUNCATE)).then(|| keys[i].clone()),
            seq: seqs[i].clone().unwrap_or_default(),
            at: at[i],
        })
        .collect())
}

/// The rows to store: the deletes the rebuild found closing nothing, and the run's truncates
/// not stored yet; key columns (silver types, null for a truncate), `__seq`, [`AT`], `__op`.
/// `None` when there are none.
pub fn to_store(
    codec: &KeyCodec,
    rebuilt: &Rebuilt,
    truncates: &[Truncate],
    stored: &[Stored],
) -> Result<Option<RecordBatch>> {
    let known: HashSet<&str> = stored
        .iter()
        .filter(|s| s.key.is_none())
        .map(|s| s.seq.as_str())
        .collect();
    let new_truncates: Vec<&Truncate> = truncates
        .iter()
        .filter(|t| !known.contains(t.seq.as_str()))
        .collect();
    if rebuilt.orphans.is_empty() && new_truncates.is_empty() {
        return Ok(None);
    }
    let keys: Vec<&[u8]> = rebuilt
        .orphans
        .iter()
        .filter_map(|o| o.key.as_deref())
        .collect();
    let decoded = codec.decode(&keys)?;
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for ((name, ty), deletes) in codec.fields().zip(decoded) {
        fields.push(Field::new(name, ty.clone(), true));
        let nulls = new_null_array(ty, new_truncates.len());
        columns.push(concat(&[deletes.as_ref(), nulls.as_ref()])?);
    }
    let seqs = rebuilt.orphans.iter().map(|o| o.seq.as_str());
    let seqs = seqs.chain(new_truncates.iter().map(|t| t.seq.as_str()));
    let at = rebuilt.orphans.iter().map(|o| o.at);
    let at = at.chain(new_truncates.iter().map(|t| t.at));
    let ops = std::iter::repeat_n(bronze::OP_DELETE, rebuilt.orphans.len()).chain(
        std::iter::repeat_n(bronze::OP_TRUNCATE, new_truncates.len()),
    );
    fields.extend([
        Field::new(bronze::SEQ, DataType::Utf8, false),
        Field::new(AT, crate::schema::timestamp_type(), true),
        Field::new(bronze::OP, DataType::Utf8, false),
    ]);
    columns.extend([
        Arc::new(StringArray::from_iter_values(seqs)) as ArrayRef,
        Arc::new(TimestampMicrosecondArray::from(at.collect::<Vec<_>>()).with_timezone("UTC")),
        Arc::new(StringArray::from_iter_values(ops)),
    ]);
    Ok(Some(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?))
}
