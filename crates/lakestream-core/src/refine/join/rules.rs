//! The pure parts of the interval join, on Arrow batches: join keys and event times of rows,
//! the lateness rule, and matching pairs. No I/O here, so the rules are tested directly.

use crate::error::{Error, Result};
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use lakestream_formats::refine::join::JoinSideConfig;
use std::collections::HashMap;

/// Rows of one side with their join key (as text) and event time (µs since the epoch).
#[derive(Debug, Clone)]
pub struct Rows {
    /// The rows, in the source table's schema.
    pub batch: RecordBatch,
    /// Join key per row (`None`: null, never matches).
    pub keys: Vec<Option<String>>,
    /// Event time per row (`None`: null, never matches).
    pub times: Vec<Option<i64>>,
}

impl Rows {
    /// Extract `side`'s key and time columns of `batch` (rows of `side`'s table).
    pub fn new(batch: RecordBatch, side: &JoinSideConfig) -> Result<Self> {
        let (table, key, time) = (side.table.as_str(), side.key.as_str(), side.time.as_str());
        let column = |name: &str| {
            batch.column_by_name(name).ok_or_else(|| Error::Schema {
                table: table.to_string(),
                reason: format!("no column `{name}` (the refine job's join names it)"),
            })
        };
        let keys = cast(column(key)?, &DataType::Utf8)?;
        let keys = keys.as_string::<i32>();
        let keys = (0..keys.len())
            .map(|i| keys.is_valid(i).then(|| keys.value(i).to_string()))
            .collect();
        let times = cast(
            column(time)?,
            &DataType::Timestamp(TimeUnit::Microsecond, None),
        )
        .map_err(|e| Error::Schema {
            table: table.to_string(),
            reason: format!("column `{time}` is not a timestamp: {e}"),
        })?;
        let times = times.as_primitive::<TimestampMicrosecondType>();
        let times = (0..times.len())
            .map(|i| times.is_valid(i).then(|| times.value(i)))
            .collect();
        Ok(Self { batch, keys, times })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Smallest and largest event time.
    pub fn time_range(&self) -> Option<(i64, i64)> {
        let mut it = self.times.iter().flatten();
        let first = *it.next()?;
        Some(it.fold((first, first), |(lo, hi), t| (lo.min(*t), hi.max(*t))))
    }
}

/// What the lateness rule says about one new row of a side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Joined (a null time is on time: it never matches anyway).
    OnTime,
    /// Below the watermark: dead-lettered (`late: ...`), not joined.
    Late,
    /// Beyond processing time plus `max_future_skew`: dead-lettered (`future: ...`), not
    /// joined, and it does not move the watermark.
    Future,
}

/// The lateness rule. `versions` are the event times of the rows each new version added, in
/// version order; `before` is the largest event time (at most `cap`) of the versions before
/// the first one. A row above `cap` (processing time plus the allowed skew) is
/// [`Verdict::Future`] and feeds nothing; otherwise a row of version v is late when its time is
/// below (the largest time at most `cap` of all versions before v) minus `delay_us`. Returns,
/// per version, the verdicts and the watermark it was held to.
pub fn late_flags(
    versions: &[Vec<Option<i64>>],
    before: Option<i64>,
    delay_us: i64,
    cap: i64,
) -> Vec<(Vec<Verdict>, Option<i64>)> {
    let mut max = before;
    versions
        .iter()
        .map(|times| {
            let watermark = max.map(|m| m.saturating_sub(delay_us));
            let verdicts = times
                .iter()
                .map(|t| match (t, watermark) {
                    (Some(t), _) if *t > cap => Verdict::Future,
                    (Some(t), Some(w)) if *t < w => Verdict::Late,
                    _ => Verdict::OnTime,
                })
                .collect();
            for t in times.iter().flatten().filter(|t| **t <= cap) {
                max = Some(max.map_or(*t, |m| m.max(*t)));
            }
            (verdicts, watermark)
        })
        .collect()
}

/// Pairs `(l, r)` of row indexes with equal keys and
/// `right.time + lower <= left.time <= right.time + upper` (both inclusive), over the rows
/// each side allows (`use_left[l]`, `use_right[r]`).
pub fn interval_pairs(
    left: &Rows,
    use_left: &[bool],
    right: &Rows,
    use_right: &[bool],
    lower_us: i64,
    upper_us: i64,
) -> Vec<(u32, u32)> {
    let mut by_key: HashMap<&str, Vec<(i64, u32)>> = HashMap::new();
    for (r, (k, t)) in right.keys.iter().zip(&right.times).enumerate() {
        if let (Some(k), Some(t), true) = (k, t, use_right.get(r).copied().unwrap_or(false)) {
            by_key.entry(k.as_str()).or_default().push((*t, r as u32));
        }
    }
    for v in by_key.values_mut() {
        v.sort_unstable();
    }
    let mut out = Vec::new();
    for (l, (k, t)) in left.keys.iter().zip(&left.times).enumerate() {
        let (Some(k), Some(t), true) = (k, t, use_left.get(l).copied().unwrap_or(false)) else {
            continue;
        };
        let Some(candidates) = by_key.get(k.as_str()) else {
            continue;
        };
        // right.time in [left.time - upper, left.time - lower]
        let (lo, hi) = (t.saturating_sub(upper_us), t.saturating_sub(lower_us));
        let start = candidates.partition_point(|(rt, _)| *rt < lo);
        for (rt, r) in &candidates[start..] {
            if *rt > hi {
                break;
            }
            out.push((l as u32, *r));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(keys: &[&str], times: &[i64]) -> Rows {
        Rows {
            batch: RecordBatch::new_empty(std::sync::Arc::new(
                deltalake::arrow::datatypes::Schema::empty(),
            )),
            keys: keys.iter().map(|k| Some(k.to_string())).collect(),
            times: times.iter().map(|t| Some(*t)).collect(),
        }
    }

    const HOUR: i64 = 3_600_000_000;

    #[test]
    fn interval_bounds_are_inclusive_to_the_microsecond() {
        // a membership at 0; orders at -1 µs, 0, 1 h, 1 h + 1 ms, 1 h + 1 µs
        let right = rows(&["alice"], &[0]);
        let left = rows(
            &["alice", "alice", "alice", "alice", "alice", "bob"],
            &[-1, 0, HOUR, HOUR + 1000, HOUR + 1, HOUR / 2],
        );
        let pairs = interval_pairs(&left, &[true; 6], &right, &[true], 0, HOUR);
        assert_eq!(pairs, [(1, 0), (2, 0)]);
    }

    #[test]
    fn excluded_rows_never_match() {
        let right = rows(&["a", "a"], &[0, 10]);
        let left = rows(&["a", "a"], &[20, 30]);
        let pairs = interval_pairs(&left, &[true, false], &right, &[false, true], 0, HOUR);
        assert_eq!(pairs, [(0, 1)]);
    }

    use Verdict::{Future, Late, OnTime};

    #[test]
    fn lateness_uses_only_earlier_versions() {
        let delay = 3 * HOUR;
        let cap = i64::MAX;
        let v1 = vec![Some(10 * HOUR), Some(2 * HOUR)]; // same version: never late to itself
        let v2 = vec![Some(7 * HOUR), Some(7 * HOUR - 1)]; // watermark 7 h: second is late
        let v3 = vec![Some(12 * HOUR)];
        let out = late_flags(&[v1, v2, v3], None, delay, cap);
        assert_eq!(out[0], (vec![OnTime, OnTime], None));
        assert_eq!(out[1], (vec![OnTime, Late], Some(7 * HOUR)));
        assert_eq!(out[2], (vec![OnTime], Some(7 * HOUR)));
        let resumed = late_flags(&[vec![Some(8 * HOUR)]], Some(12 * HOUR), delay, cap);
        assert_eq!(resumed[0], (vec![Late], Some(9 * HOUR)));
    }

    #[test]
    fn a_row_beyond_the_cap_is_future_and_never_moves_the_watermark() {
        let delay = 3 * HOUR;
        let cap = 11 * HOUR; // processing time 10 h, skew 1 h
        let v1 = vec![Some(10 * HOUR)];
        let v2 = vec![Some(100_000 * HOUR), Some(11 * HOUR)]; // far future; exactly at the cap
        let v3 = vec![Some(9 * HOUR), Some(11 * HOUR + 1)];
        let out = late_flags(&[v1, v2, v3], None, delay, cap);
        assert_eq!(out[0], (vec![OnTime], None));
        assert_eq!(out[1], (vec![Future, OnTime], Some(7 * HOUR)));
        assert_eq!(out[2], (vec![OnTime, Future], Some(8 * HOUR)));
    }
}
