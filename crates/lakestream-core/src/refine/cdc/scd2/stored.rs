//! The SCD2 job's side table of deletes and truncates silver has no trace of
//! (`_lakestream/<job>/tombstones`, the tombstone table SCD1 jobs use, never expired here: a
//! history is kept for good): a delete that closed no row when it was applied (it arrived
//! before the upserts it ends) and every truncate. Each run loads them for its touched keys
//! ([`load`]) and records its new ones ([`to_store`]) before its silver commit, so a run killed
//! in between loses nothing (a row stored twice is one event: equal `__seq`s are deduplicated).

use super::history::{KeyCodec, Rebuilt, Stored};
use crate::error::{Error, Result};
use crate::read::read_table;
use crate::storage::Lake;
use deltalake::arrow::array::{AsArray, BooleanArray, RecordBatch};
use deltalake::arrow::compute::{cast, filter_record_batch};
use deltalake::arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use lakestream_formats::config::bronze;
use std::collections::HashSet;

/// The columns a stored row keeps besides the keys.
pub const COLUMNS: [&str; 3] = [bronze::SEQ, bronze::SOURCE_TS, bronze::OP];

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
    let at: Vec<Option<i64>> = match batch.column_by_name(bronze::SOURCE_TS) {
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

/// The rows of `changes` (the run's changes with truncates) to store: the deletes the rebuild
/// found closing nothing, and the truncates not stored yet. `None` when there are none.
pub fn to_store(
    changes: &RecordBatch,
    codec: &KeyCodec,
    rebuilt: &Rebuilt,
    stored: &[Stored],
) -> Result<Option<RecordBatch>> {
    let col = |name: &str| -> Result<Vec<Option<String>>> {
        let c = changes
            .column_by_name(name)
            .ok_or_else(|| Error::Internal(format!("changes without `{name}`")))?;
        Ok(cast(c, &DataType::Utf8)?
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect())
    };
    let (ops, seqs) = (col(bronze::OP)?, col(bronze::SEQ)?);
    let keys = codec.encode(changes)?;
    let truncates: HashSet<&str> = stored
        .iter()
        .filter(|s| s.key.is_none())
        .map(|s| s.seq.as_str())
        .collect();
    let keep: Vec<bool> = (0..changes.num_rows())
        .map(|i| {
            let seq = seqs[i].clone().unwrap_or_default();
            match ops[i].as_deref() {
                Some(bronze::OP_TRUNCATE) => !truncates.contains(seq.as_str()),
                Some(bronze::OP_DELETE) => rebuilt.orphans.contains(&(keys[i].clone(), seq)),
                _ => false,
            }
        })
        .collect();
    if !keep.contains(&true) {
        return Ok(None);
    }
    Ok(Some(filter_record_batch(
        changes,
        &BooleanArray::from(keep),
    )?))
}
