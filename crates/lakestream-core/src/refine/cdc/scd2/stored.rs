//! The SCD2 job's side table of deletes and truncates silver has no trace of
//! (`_lakestream/<job>/tombstones`, the tombstone table SCD1 jobs use): a delete that closes
//! no row (it arrived before the upserts it ends, or an older delete closed its row first)
//! and every truncate. Each run loads them ([`load`]) and records its new ones
//! ([`to_store`]) before its silver commit, so a run killed in between loses nothing (a row
//! stored twice is one event: equal `__seq`s are one change).
//!
//! Stored deletes expire like SCD1 tombstones (`tombstone_retention` after they were stored,
//! whole `date` partitions, after a silver commit), recording the greatest expired `__seq`
//! and time as the side table's horizon ([`Side::horizon`]); truncates are stored in the
//! [`NEVER_EXPIRES`] partition and kept. So the table holds the deletes of the retention
//! window and the truncates, not every out-of-order delete of the table's life. A change at
//! or below the horizon for a key with no silver row and nothing stored stays out (it may be
//! older than a forgotten delete of its key: a deleted key must not come back), as SCD1's.

use super::history::{Rebuilt, Stored, Truncate};
use super::keys::KeyCodec;
use crate::error::{Error, Result};
use crate::read::read_all;
use crate::refine::cdc::positions::{RunColumns, Who};
use crate::refine::context::RunContext;
use crate::refine::keyed::expiry::expired_files;
use crate::refine::keyed::tombstones::{EXPIRED_AT_PROPERTY, EXPIRED_THROUGH_PROPERTY};
use crate::table::TableHandle;
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray, TimestampMicrosecondArray,
    new_null_array,
};
use deltalake::arrow::compute::{cast, concat, filter_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, TimeUnit, TimestampMicrosecondType};
use lakestream_formats::config::bronze;
use std::collections::HashSet;
use std::sync::Arc;

pub use crate::refine::keyed::tombstones::NEVER_EXPIRES;

/// A stored row's time column: the delete's `__source_ts`, else its `__ingested_at` (what
/// closes a row's `__END_AT`).
pub const AT: &str = "__at";

/// What the side table holds: the stored deletes and truncates, and the horizon of expired
/// deletes.
#[derive(Debug, Default)]
pub struct Side {
    /// Every stored delete and truncate.
    pub stored: Vec<Stored>,
    /// The greatest `__seq` of the expired deletes and their latest time (µs), if any expired.
    pub horizon: Option<(String, Option<i64>)>,
    /// The oldest `date` partition (from the log: no read), so a run knows whether an expiry
    /// is due without loading the table again.
    pub oldest: Option<String>,
}

/// The `date` partitions before which stored rows expire at `now` (one rule with the
/// tombstones').
pub(crate) use crate::refine::keyed::expiry::cutoff;

/// Every stored delete and truncate of `table`, and its horizon (nothing when it does not
/// exist yet).
///
/// The table is the run's side-table handle ([`RunContext::side`]).
pub async fn load(ctx: &RunContext<'_>, table: &str, codec: &KeyCodec) -> Result<Side> {
    let handle = ctx.side(table).await?;
    if !handle.exists() {
        return Ok(Side::default());
    }
    let horizon = handle.property(EXPIRED_THROUGH_PROPERTY)?.map(|seq| {
        let at = handle.property(EXPIRED_AT_PROPERTY).ok().flatten();
        (seq, at.and_then(|t| t.parse::<i64>().ok()))
    });
    let oldest = handle
        .live_files()?
        .iter()
        .filter_map(|f| f.partition_values().get("date").cloned().flatten())
        .min();
    let stored = rows(&handle, codec).await?;
    Ok(Side {
        stored,
        horizon,
        oldest,
    })
}

/// The stored rows of the loaded side table.
async fn rows(handle: &TableHandle, codec: &KeyCodec) -> Result<Vec<Stored>> {
    let table = handle.name();
    let batch = read_all(handle).await?;
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

/// The run's `changes` without those kept out by the side table's horizon: an upsert (not a
/// delete or truncate) at or below the horizon's `__seq`, committed no later than its time,
/// for a key with no silver row (`old`) and nothing stored. One committed after the horizon
/// but ranked below it proves the source's positions went back (an error). Plain-file
/// `__seq`s (`0|<row time>|...`) order by the rows' own times: never kept out. Returns the
/// changes kept and how many were kept out.
pub fn keep_out(
    changes: &RecordBatch,
    old: &RecordBatch,
    side: &Side,
    codec: &KeyCodec,
    who: &Who,
) -> Result<(RecordBatch, usize)> {
    let Some((horizon, horizon_at)) = &side.horizon else {
        return Ok((changes.clone(), 0));
    };
    let mut known: HashSet<Vec<u8>> = codec.encode(old)?.into_iter().collect();
    known.extend(side.stored.iter().filter_map(|s| s.key.clone()));
    let keys = codec.encode(changes)?;
    let c = RunColumns::of(changes, who)?;
    let mut keep = Vec::with_capacity(changes.num_rows());
    for (row, key) in keys.iter().enumerate() {
        let seq = c.seq.value(row);
        let upsert = ![bronze::OP_DELETE, bronze::OP_TRUNCATE].contains(&c.op.value(row));
        if !upsert || known.contains(key) || seq > horizon.as_str() || seq.starts_with("0|") {
            keep.push(true);
            continue;
        }
        if matches!((c.at[row], horizon_at), (Some(a), Some(h)) if a > *h) {
            c.check(row, (horizon, *horizon_at))?;
            keep.push(true);
            continue;
        }
        keep.push(false);
    }
    let kept_out = keep.iter().filter(|k| !**k).count();
    if kept_out == 0 {
        return Ok((changes.clone(), 0));
    }
    let mask = BooleanArray::from(keep);
    Ok((filter_record_batch(changes, &mask)?, kept_out))
}

/// The `date` partition of each row [`to_store`] returned: a truncate never expires
/// ([`NEVER_EXPIRES`]), a delete expires with `today`'s partition.
pub fn dates(rows: &RecordBatch, today: &str) -> Result<Vec<String>> {
    let op = rows
        .column_by_name(bronze::OP)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| Error::Internal("stored rows without `__op`".into()))?;
    Ok(op
        .iter()
        .map(|o| match o == Some(bronze::OP_TRUNCATE) {
            true => NEVER_EXPIRES.to_string(),
            false => today.to_string(),
        })
        .collect())
}

/// Expire the stored deletes of side table `table` older than `retention`
/// ([`expiry::expire`](crate::refine::keyed::expiry::expire), recording the horizon). Truncates
/// stored in a dated partition (tables written before truncates had [`NEVER_EXPIRES`]) are
/// first stored again there, so an expiry never drops one.
pub async fn expire(
    ctx: &RunContext<'_>,
    table: &str,
    retention: std::time::Duration,
) -> Result<()> {
    // As this run loaded it (newer commits only add today's rows: nothing expiring on it is
    // nothing expiring); refreshed before anything is read for an expiry.
    let mut handle = ctx.side_as_is(table).await?;
    if !handle.exists() {
        return Ok(());
    }
    let cutoff = cutoff(ctx.now, retention);
    if expired_files(&handle, cutoff.clone())?.is_empty() {
        return Ok(());
    }
    handle.refresh().await?;
    // Read only: a truncate stored again is committed (and kept warm) by its own handle.
    keep_dated_truncates(ctx, &handle, &cutoff).await?;
    let horizon = Some((bronze::SEQ, AT));
    crate::refine::keyed::expiry::expire(ctx, table, retention, horizon).await?;
    Ok(())
}

/// Store again, in [`NEVER_EXPIRES`], the truncates of partitions dated before `cutoff` that
/// are not there yet (one commit; a truncate stored twice is one event).
async fn keep_dated_truncates(
    ctx: &RunContext<'_>,
    handle: &TableHandle,
    cutoff: &str,
) -> Result<()> {
    let rows = read_all(handle).await?;
    let text = |name: &str| {
        rows.column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
    };
    let (Some(op), Some(seq), Some(date)) = (text(bronze::OP), text(bronze::SEQ), text("date"))
    else {
        return Ok(());
    };
    let is_t = |i: usize| op.is_valid(i) && op.value(i) == bronze::OP_TRUNCATE;
    let kept: HashSet<&str> = (0..rows.num_rows())
        .filter(|&i| is_t(i) && date.value(i) == NEVER_EXPIRES)
        .map(|i| seq.value(i))
        .collect();
    let mask: BooleanArray = (0..rows.num_rows())
        .map(|i| Some(is_t(i) && date.value(i) < cutoff && !kept.contains(seq.value(i))))
        .collect();
    let dated = filter_record_batch(&rows, &mask)?;
    if dated.num_rows() == 0 {
        return Ok(());
    }
    let columns: Vec<String> = dated
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .filter(|n| !["tie", "deleted_at", "date"].contains(&n.as_str()))
        .collect();
    let ties = text_of(&dated, bronze::SEQ)?;
    let dates = vec![NEVER_EXPIRES.to_string(); dated.num_rows()];
    crate::refine::keyed::tombstones::write_in(ctx, handle.name(), &dated, (&columns, ties), dates)
        .await
}

fn text_of(batch: &RecordBatch, name: &str) -> Result<Vec<String>> {
    let c = batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| Error::Internal(format!("stored rows without `{name}`")))?;
    Ok(c.iter()
        .map(|v| v.unwrap_or_default().to_string())
        .collect())
}
