//! Tombstones kept inside the output commit that applies their deletes, until they are
//! consolidated into the job's tombstone table (ARCHITECTURE.md "Refine: upsert", step 3).
//!
//! A keyed run's winning deletes go into its output commit's `commitInfo` as one Arrow IPC
//! batch (base64, [`COMMIT_INFO_KEY`]): the delete and its tombstone land in one PUT or not at
//! all, and no tombstone-table commit is made per run. The tombstone table says how far it
//! holds an output's tombstones (the property [`property_key`] of the output's table id: a
//! version; one key per output, so a run on a deleted output never moves a new one's);
//! the tombstones of a plan at output version `r` are the table's rows plus the inline batches
//! of the output commits after that version up to `r` ([`read`]). Rules:
//! - no commit of an output carries inline tombstones unless the table holds the property for
//!   that output's id (its *anchor*, [`Mark::Anchor`], set before the first such commit at the
//!   plan's read version); a new output's first commit writes its tombstones to the table;
//! - after a commit lands, the pending batches are appended to the table with the property
//!   moved to the landed version ([`consolidate_if_due`]) when a checkpoint version lies in the
//!   pending range or a pending tombstone is dated before today;
//! - a chunk whose tombstones encode to more than [`INLINE_TOMBSTONE_BYTES`] writes them to the
//!   table before the output commit instead (the loop's side write).

use super::tombstone_table::{self, Mark};
use super::tombstones;
use crate::error::{Error, Result};
use crate::refine::RunContext;
use crate::refine::context::JOB_PROPERTY;
use crate::storage::Lake;
use crate::table::TableHandle;
use base64::Engine;
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use futures::StreamExt;

/// The `commitInfo` field of an output commit holding its tombstones (base64 Arrow IPC).
pub const COMMIT_INFO_KEY: &str = "lakestream.tombstones";
/// Tombstone table property prefix: `<prefix>.<output table id>` = a version, every tombstone
/// of that output's commits up to it is in the table (`-1`: none is) ([`property_key`]).
pub const CONSOLIDATED_PROPERTY: &str = "lakestream.tombstones.consolidated_through";
/// A chunk's tombstones larger than this (Arrow IPC bytes) go to the tombstone table before
/// the output commit instead of into it: a commit file stays small.
pub const INLINE_TOMBSTONE_BYTES: usize = 64 << 10;
/// Output commits read at once when gathering pending tombstones.
const READ_AHEAD: usize = 8;

/// How far the tombstone table (as `side` knows it) holds the tombstones of output
/// `output_id`: `None` when it holds no anchor for that output (nothing is pending).
pub fn consolidated_through(side: &TableHandle, output_id: &str) -> Result<Option<i64>> {
    if !side.exists() {
        return Ok(None);
    }
    Ok(side
        .property(&property_key(output_id))?
        .and_then(|v| v.parse::<i64>().ok()))
}

/// The tombstone table's property holding how far output `output_id`'s tombstones are
/// consolidated.
pub fn property_key(output_id: &str) -> String {
    format!("{CONSOLIDATED_PROPERTY}.{output_id}")
}

/// The tombstone rows as the text of [`COMMIT_INFO_KEY`]; `None` when they are larger than
/// [`INLINE_TOMBSTONE_BYTES`].
pub(crate) fn encode(batch: &RecordBatch) -> Result<Option<String>> {
    let mut w = arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &batch.schema())?;
    w.write(batch)?;
    w.finish()?;
    let bytes = w.into_inner()?;
    if bytes.len() > INLINE_TOMBSTONE_BYTES {
        return Ok(None);
    }
    Ok(Some(
        base64::engine::general_purpose::STANDARD.encode(bytes),
    ))
}

/// The tombstone rows of a [`COMMIT_INFO_KEY`] text of `table`'s commit `version`. Untrusted
/// (any writer can put anything in a commit): bounded by what [`encode`] writes, decoded
/// without allocating what a message header claims, and refused as [`Error::InlineTombstones`]
/// (permanent) when it is not one batch of tombstones.
pub(crate) fn decode(text: &str, table: &str, version: u64) -> Result<RecordBatch> {
    let bad = |reason: String| Error::InlineTombstones {
        table: table.to_string(),
        version,
        reason,
    };
    // Base64 of INLINE_TOMBSTONE_BYTES, rounded up.
    if text.len() > INLINE_TOMBSTONE_BYTES.div_ceil(3) * 4 {
        return Err(bad(format!("{} characters, more than written", text.len())));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| bad(e.to_string()))?;
    let mut buffer = deltalake::arrow::buffer::Buffer::from(bytes);
    let mut decoder = arrow_ipc::reader::StreamDecoder::new();
    let mut batches = Vec::new();
    while !buffer.is_empty() {
        if let Some(b) = decoder
            .decode(&mut buffer)
            .map_err(|e| bad(e.to_string()))?
        {
            batches.push(b);
        }
    }
    decoder.finish().map_err(|e| bad(e.to_string()))?;
    let schema = match (decoder.schema(), batches.first()) {
        (_, Some(b)) => b.schema(),
        (Some(s), None) => s,
        (None, None) => return Err(bad("no schema".into())),
    };
    deltalake::arrow::compute::concat_batches(&schema, &batches).map_err(|e| bad(e.to_string()))
}

/// The inline tombstones of the output commits `after + 1 ..= to` (oldest first), with their
/// versions. Through the table's log cache: commits this process read or wrote cost nothing.
/// A commit file that is gone is [`Error::CommitGone`]: its tombstones cannot be known.
pub(crate) async fn read(
    output: &TableHandle,
    after: i64,
    to: u64,
) -> Result<Vec<(u64, RecordBatch)>> {
    let from = u64::try_from(after.saturating_add(1)).unwrap_or(0);
    if from > to {
        return Ok(vec![]);
    }
    let mut out = Vec::new();
    let mut commits = output.commits(from..=to).read_ahead(READ_AHEAD).stream();
    while let Some(commit) = commits.next().await {
        let commit = commit?;
        let Some(field) = commit.info_field(COMMIT_INFO_KEY) else {
            continue;
        };
        let text = field.as_str().ok_or_else(|| Error::InlineTombstones {
            table: output.name().to_string(),
            version: commit.version(),
            reason: "not a string".into(),
        })?;
        out.push((
            commit.version(),
            decode(text, output.name(), commit.version())?,
        ));
    }
    Ok(out)
}

/// Whether the pending range `after + 1 ..= landed` is due for consolidation: it holds a
/// checkpoint version (`(c + 1) % interval == 0`, the versions the commit path checkpoints),
/// or a tombstone dated before `today`.
pub(crate) fn due(
    after: i64,
    landed: u64,
    interval: u64,
    pending: &[(u64, RecordBatch)],
    today: &str,
) -> bool {
    let interval = i64::try_from(interval.max(1)).unwrap_or(i64::MAX);
    let landed = i64::try_from(landed).unwrap_or(i64::MAX);
    let checkpoint_passed = (landed + 1) / interval > (after.max(-1) + 1) / interval;
    checkpoint_passed || pending.iter().any(|(_, b)| dated_before(b, today))
}

/// Whether a tombstone of `batch` is dated before `today` (its `date` column).
fn dated_before(batch: &RecordBatch, today: &str) -> bool {
    let Some(dates) = batch
        .column_by_name("date")
        .and_then(|c| c.as_string_opt::<i32>())
    else {
        return false;
    };
    (0..dates.len()).any(|i| dates.is_valid(i) && dates.value(i) < today)
}

/// After `output`'s commit at `landed`: consolidate the pending tombstones into `job`'s
/// tombstone table when [`due`] (one commit: the rows and the property moved to `landed`).
/// The table as this run's plan loaded it ([`RunContext::side_as_is`]); a newer commit makes
/// the PUT fail and the plan run again on the new state (already consolidated: nothing). A
/// failure is logged, not returned: the output commit landed, and nothing is lost while the
/// tombstones stay pending (the next run tries again: the range stays due).
pub(crate) async fn consolidate_if_due(
    ctx: &RunContext<'_>,
    job: &str,
    output: &TableHandle,
    landed: u64,
) -> Result<()> {
    let table = tombstones::table_name(job);
    let mut side = ctx.side_as_is(&table).await?;
    let id = output.table_id()?;
    let Some(after) = consolidated_through(&side, &id)? else {
        return Ok(());
    };
    if after >= i64::try_from(landed).unwrap_or(i64::MAX) {
        return Ok(());
    }
    let pending = read(output, after, landed).await?;
    let today = ctx.now.format("%Y-%m-%d").to_string();
    // The versions the commit path checkpoints (the table's `delta.checkpointInterval`).
    let interval = {
        use deltalake::table::config::TablePropertiesExt;
        output
            .snapshot()?
            .table_config()
            .checkpoint_interval()
            .get()
    };
    if !due(after, landed, interval, &pending, &today) {
        return Ok(());
    }
    let schema = side.arrow_schema()?;
    let batches: Vec<RecordBatch> = pending.into_iter().map(|(_, b)| b).collect();
    let batch = tombstone_table::aligned_all(&batches, schema)?;
    let through = i64::try_from(landed).unwrap_or(i64::MAX);
    let mark = Mark::Through {
        output_id: id,
        through,
    };
    let written = tombstone_table::append_marked(ctx, &mut side, batch, mark).await;
    match written {
        Ok(()) => {}
        Err(e) if e.is_retryable() => {
            tracing::warn!(table = %table, error = %e, "tombstones not consolidated; the next run will try again");
        }
        Err(e) => {
            tracing::error!(table = %table, error = %e, "tombstones not consolidated; they stay in the output's commits (kept by log cleanup) until this is fixed");
        }
    }
    Ok(())
}

/// The oldest commit of `output` that may hold tombstones not consolidated yet (the one after
/// its job's tombstone table's [`CONSOLIDATED_PROPERTY`]); `None` for a table that is not a
/// keyed job's output or has no anchor. Log cleanup keeps it and every commit after.
pub async fn pending_from(lake: &Lake, output: &TableHandle) -> Result<Option<u64>> {
    // Only a keyed job's output has a tombstone table (SCD2's side table holds no anchor).
    let Some(job) = output.property(JOB_PROPERTY)? else {
        return Ok(None);
    };
    let mut side = TableHandle::open(lake, &tombstones::table_name(&job))?;
    side.refresh().await?;
    let Some(after) = consolidated_through(&side, &output.table_id()?)? else {
        return Ok(None);
    };
    Ok(Some(u64::try_from(after.saturating_add(1)).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    fn batch(dates: &[&str]) -> RecordBatch {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..dates.len() as i64));
        let dates: ArrayRef = Arc::new(StringArray::from(dates.to_vec()));
        RecordBatch::try_from_iter([("id", ids), ("date", dates)]).unwrap()
    }

    #[test]
    fn inline_tombstones_round_trip_and_anything_else_is_refused() {
        let b = batch(&["2026-12-05", "2026-12-05"]);
        let text = encode(&b).unwrap().unwrap();
        assert_eq!(decode(&text, "silver", 1).unwrap(), b);
        let big = batch(&vec!["2026-12-05"; 20_000]);
        assert!(
            encode(&big).unwrap().is_none(),
            "over INLINE_TOMBSTONE_BYTES"
        );
        for hostile in [
            "not base64!".to_string(),
            base64::engine::general_purpose::STANDARD.encode(b"\xff\xff\xff\xff\x10\0\0\0junk"),
            "A".repeat(INLINE_TOMBSTONE_BYTES * 2),
            // A stream cut short.
            base64::engine::general_purpose::STANDARD.encode(
                &base64::engine::general_purpose::STANDARD
                    .decode(&text)
                    .unwrap()[..40],
            ),
        ] {
            let err = decode(&hostile, "silver", 3).unwrap_err();
            assert!(!err.is_retryable(), "{err}");
            assert!(err.to_string().contains("`silver` version 3"), "{err}");
        }
    }

    #[test]
    fn each_output_has_its_own_anchor_key() {
        assert_ne!(property_key("a"), property_key("b"));
        assert!(property_key("a").starts_with(CONSOLIDATED_PROPERTY));
    }

    #[test]
    fn consolidation_is_due_at_a_checkpoint_or_a_day_later() {
        let today = [(5, batch(&["2026-12-05"]))];
        let yesterday = [(5, batch(&["2026-12-04"]))];
        // Checkpoints at versions 9, 19, ...: (c + 1) % 10 == 0.
        assert!(!due(0, 8, 10, &today, "2026-12-05"));
        assert!(due(0, 9, 10, &today, "2026-12-05"));
        assert!(
            due(-1, 9, 10, &[], "2026-12-05"),
            "an empty range moves too"
        );
        assert!(!due(9, 18, 10, &today, "2026-12-05"));
        assert!(due(8, 9, 10, &[], "2026-12-05"));
        assert!(
            due(0, 3, 10, &yesterday, "2026-12-05"),
            "the expiry sees it within a day"
        );
    }
}
