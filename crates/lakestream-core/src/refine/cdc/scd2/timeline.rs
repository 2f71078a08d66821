//! The SCD2 timeline of touched keys: from each key's events in `__seq` order (upserts,
//! deletes, truncates), the versions and their intervals.
//!
//! - **Clock**: a version's `__START_AT` is the running maximum of the key's event times up to
//!   it (its own time — `__source_ts`, else `__ingested_at` — and every earlier event's start
//!   or close time), and a row's `__END_AT` is the (clamped) time of the event that closes it.
//!   So per key the intervals are never inverted and never overlap, and an as-of query
//!   (`__START_AT <= t < __END_AT`) finds at most one version at any `t` (a version whose
//!   time is clamped to its successor's start has an empty interval). The maximum is
//!   associative: a rebuild from silver's (already clamped) starts and ends plus a late change
//!   gives what the raw times would.
//! - **No-op changes**: an upsert whose row values (every column but `__*`, TOAST placeholders
//!   resolved) equal the open version's makes no version: it leaves no trace (not even on the
//!   clock), the open version goes on from its own start.
//! - **TOAST**: a new change's placeholder cells take the open version's values (none open:
//!   null), before it is compared.

use super::history::{Built, Event, Kept, Kind, Stored};
use crate::error::Result;
use crate::refine::keyed::values::{Before, RowValues, Toast, resolve, same};
use deltalake::arrow::array::RecordBatch;
use std::collections::BTreeMap;

/// `combined` with the placeholder cells of its new rows (index `>= old_rows`) resolved
/// against the key's open version in `__seq` order (`events`, sorted).
pub(super) fn resolve_toast(
    combined: &RecordBatch,
    toast: Option<&Toast>,
    keys: &[String],
    events: &BTreeMap<&[u8], Vec<Event>>,
    old_rows: usize,
) -> Result<RecordBatch> {
    let Some(toast) = toast else {
        return Ok(combined.clone());
    };
    let mut steps = Vec::new();
    for list in events.values() {
        let mut open = Before::Nothing;
        for e in list {
            match e.kind {
                Kind::Upsert(i) => {
                    if i >= old_rows {
                        steps.push((i, open));
                    }
                    open = Before::Row(i);
                }
                Kind::Delete(_) => open = Before::Nothing,
            }
        }
    }
    resolve(combined, toast, keys, &steps)
}

/// The later of two times (`None`: no time).
fn later(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Rebuild the intervals key by key, in `__seq` order (an upsert closes the open row and opens
/// its own unless its values equal the open row's, a delete closes the open row), on the
/// running-maximum clock: the rows built, and the deletes that close no row and are not
/// `kept` yet (the orphans, stored with their own times). `combined` are the rows the events
/// point at (placeholders resolved).
pub(super) fn intervals(
    events: &BTreeMap<&[u8], Vec<Event>>,
    kept: &Kept<'_>,
    combined: &RecordBatch,
) -> Result<(Vec<Built>, Vec<Stored>)> {
    let values = RowValues::new(combined)?.encode(combined)?;
    let mut out: Vec<Built> = Vec::new();
    let mut orphans = Vec::new();
    for (key, list) in events {
        // The open row: (index in `out`, row in `combined`).
        let mut open: Option<(usize, usize)> = None;
        let mut clock: Option<i64> = None;
        for e in list {
            if let (Kind::Upsert(i), Some((_, o))) = (&e.kind, open)
                && same(&values, *i, &values, o)
            {
                continue;
            }
            let at = later(clock, e.at);
            clock = at;
            let closed = open
                .take()
                .map(|(n, _)| out[n].end = Some((e.seq.clone(), at)));
            if closed.is_none() && matches!(e.kind, Kind::Delete(true)) && !kept.has(key, &e.seq) {
                orphans.push(Stored {
                    key: Some(key.to_vec()),
                    seq: e.seq.clone(),
                    at: e.at,
                });
            }
            if let Kind::Upsert(i) = e.kind {
                open = Some((out.len(), i));
                out.push(Built {
                    row: i,
                    start: at,
                    end: None,
                });
            }
        }
    }
    Ok((out, orphans))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_later_time_wins_and_none_is_no_time() {
        assert_eq!(later(None, None), None);
        assert_eq!(later(Some(3), None), Some(3));
        assert_eq!(later(None, Some(2)), Some(2));
        assert_eq!(later(Some(3), Some(2)), Some(3));
    }
}
