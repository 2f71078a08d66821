//! Expiry of a keyed job's tombstones (`_lakestream/<job>/tombstones`): whole processing-`date`
//! partitions older than the retention are removed after a run commits; a CDC job's expiry also
//! records the horizon below which a change for a key without row or tombstone stays out
//! ([`EXPIRED_THROUGH_PROPERTY`], [`EXPIRED_AT_PROPERTY`], used by
//! [`keep_out_forgotten`](super::tombstones::keep_out_forgotten)).

use super::tombstones::{EXPIRED_AT_PROPERTY, EXPIRED_THROUGH_PROPERTY};
use crate::commit::{Change, CommitSettings, Fixed, Proposal, ReadScope, run};
use crate::error::Result;
use crate::read::read_all;
use crate::refine::RunContext;
use crate::refine::cdc::positions;
use crate::table::TableHandle;
use chrono::{DateTime, Utc};
use deltalake::arrow::array::{Array, AsArray};
use deltalake::protocol::DeltaOperation;
use lakestream_formats::config::bronze;

/// Remove tombstones written before `now - retention` (whole `date` partitions); with
/// `horizon` (a CDC job's `__seq` column and the column of its commit time) the greatest
/// value removed is kept in [`EXPIRED_THROUGH_PROPERTY`] and the latest time in
/// [`EXPIRED_AT_PROPERTY`], in the same commit.
///
/// The table is the run's side-table handle as this run loaded it
/// ([`RunContext::side_as_is`]: no request; this run's own consolidation included): newer
/// commits by other runs add tombstones, past-dated ones only by a consolidation, which the
/// next run's expiry sees (tombstones are kept at least the retention, never less); when it
/// holds something to expire, it is refreshed first (one GET when nothing changed). Kept warm
/// after.
pub async fn expire(
    ctx: &RunContext<'_>,
    table: &str,
    retention: std::time::Duration,
    horizon: Option<(&str, &str)>,
) -> Result<usize> {
    let mut handle = ctx.side_as_is(table).await?;
    if !handle.exists() || expired_files(&handle, cutoff(ctx.now, retention))?.is_empty() {
        return Ok(0);
    }
    handle.refresh().await?;
    let expired = expire_in(&mut handle, ctx.settings, ctx.now, retention, horizon).await;
    ctx.keep(handle);
    expired
}

/// [`expire`] on a loaded handle.
async fn expire_in(
    handle: &mut TableHandle,
    settings: &CommitSettings,
    now: DateTime<Utc>,
    retention: std::time::Duration,
    horizon: Option<(&str, &str)>,
) -> Result<usize> {
    let cutoff = cutoff(now, retention);
    let removes = expired_files(handle, cutoff.clone())?;
    if removes.is_empty() {
        return Ok(0);
    }
    let n = removes.len();
    let schema = handle.arrow_schema()?;
    let properties = match horizon {
        Some(columns) => expired_through(handle, columns, &cutoff).await?,
        None => vec![],
    };
    let change = Change {
        read_version: handle.version(),
        properties,
        operation: DeltaOperation::Delete {
            predicate: Some(format!("date < '{cutoff}'")),
        },
        adds: vec![],
        removes,
        txns: vec![],
        scope: ReadScope::Files,
        cdc_files: vec![],
        info: vec![],
    };
    let mut planner = Fixed(Some(Proposal {
        change,
        schema,
        create: None,
    }));
    // Another run expired them first (a conflict stops it), or storage failed: the next run
    // tries again.
    match run(handle, settings, &mut planner).await {
        Ok(ran) => Ok(if ran.landed.is_some() { n } else { 0 }),
        Err(e) if e.is_retryable() => Ok(0),
        Err(e) => Err(e),
    }
}

/// The `date` partitions before this one expire at `now` (tombstones and SCD2's stored
/// deletes alike).
pub(crate) fn cutoff(now: DateTime<Utc>, retention: std::time::Duration) -> String {
    (now - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX))
        .format("%Y-%m-%d")
        .to_string()
}

/// The removes of the live files dated before `cutoff` (as `handle` knows them).
pub(crate) fn expired_files(
    handle: &TableHandle,
    cutoff: String,
) -> Result<Vec<deltalake::kernel::Remove>> {
    Ok(handle
        .live_files()?
        .iter()
        .filter(|f| {
            f.partition_values()
                .get("date")
                .and_then(|d| d.as_deref())
                .is_some_and(|d| d < cutoff.as_str())
        })
        .map(|f| f.remove_action(true))
        .collect())
}

/// The horizon after removing the tombstones dated before `cutoff`: the greatest `column`
/// value and the latest delete commit time (column `time`: `__source_ts`, or an SCD2 side
/// table's `__at`) among them, or the ones recorded before when greater
/// ([`EXPIRED_THROUGH_PROPERTY`], [`EXPIRED_AT_PROPERTY`]).
async fn expired_through(
    handle: &TableHandle,
    (column, time): (&str, &str),
    cutoff: &str,
) -> Result<Vec<(String, String)>> {
    let rows = read_all(handle).await?;
    let (Some(values), Some(dates)) = (
        rows.column_by_name(column)
            .and_then(|c| c.as_string_opt::<i32>()),
        rows.column_by_name("date")
            .and_then(|c| c.as_string_opt::<i32>()),
    ) else {
        return Ok(vec![]);
    };
    let written = match rows.column_by_name(time) {
        Some(_) => positions::times(&rows, time)?,
        None => vec![None; rows.num_rows()],
    };
    // An SCD2 side table's truncates are kept (never a forgotten delete): no horizon.
    let truncate = rows
        .column_by_name(bronze::OP)
        .and_then(|c| c.as_string_opt::<i32>());
    let is_truncate =
        |i: usize| truncate.is_some_and(|t| t.is_valid(i) && t.value(i) == bronze::OP_TRUNCATE);
    let removed: Vec<usize> = (0..rows.num_rows())
        .filter(|&i| dates.is_valid(i) && values.is_valid(i) && dates.value(i) < cutoff)
        .filter(|&i| !is_truncate(i))
        .collect();
    let seq = removed.iter().map(|&i| values.value(i).to_string()).max();
    // A tombstone's time is Kafka's, not a commit time: never a horizon time.
    let at = removed
        .iter()
        .filter(|&&i| !positions::untimed(values.value(i)))
        .filter_map(|&i| written[i])
        .max();
    let seq = seq.max(handle.property(EXPIRED_THROUGH_PROPERTY)?);
    let before_at = handle
        .property(EXPIRED_AT_PROPERTY)?
        .and_then(|t| t.parse::<i64>().ok());
    let at = at.max(before_at);
    Ok([
        seq.map(|s| (EXPIRED_THROUGH_PROPERTY.to_string(), s)),
        at.map(|t| (EXPIRED_AT_PROPERTY.to_string(), t.to_string())),
    ]
    .into_iter()
    .flatten()
    .collect())
}
