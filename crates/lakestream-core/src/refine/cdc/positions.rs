//! Source positions over a source's life (ARCHITECTURE.md "Position resets").
//!
//! A Debezium change's `__seq` is its source position (MySQL `file.pos.row`, PostgreSQL `lsn`,
//! SQL Server LSNs), which only grows while the source keeps its log. A MySQL `RESET MASTER`
//! or a fail-over to a server with its own binlog starts the positions again, and every later
//! change would rank below the ones before it (SCD1 would drop it as older, SCD2 would file it
//! as old history). Two rules keep that from ever being silent:
//! - **Detection.** Of two changes of one key, the one at the lower position was committed
//!   first: the later one waited for its row lock. So a change at a lower position with a
//!   strictly later commit time (`__source_ts`) than another change of its key proves the
//!   positions went back: the apply fails with [`Error::PositionsWentBack`] and commits
//!   nothing. Snapshot rows (`r`: read time, not commit time) are never the later change;
//!   `__seq`s that are not a bare position (DMS, files, `…|offset`) are not checked.
//! - **Resets.** The family's `position_resets` lists when the positions started again: a
//!   change committed at or after the k-th reset has `e<k, 4 digits>|` put in front of its
//!   `__seq` when it is applied (bronze keeps the position as sent), which ranks it after
//!   every change before the reset. A change without a commit time keeps rank 0.

use super::scd2::keys::KeyCodec;
use crate::error::{Error, Result};
use deltalake::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use deltalake::arrow::datatypes::TimestampMicrosecondType;
use lakestream_formats::config::bronze;
use std::sync::Arc;

/// The `__seq` rank prefix of changes after the `k`-th position reset (`k >= 1`).
pub fn rank_prefix(k: usize) -> String {
    format!("e{k:04}|")
}

/// `changes` with each `__seq` ranked by `resets` (µs, ascending): unchanged when there are
/// none.
pub(crate) fn apply_resets(changes: &RecordBatch, resets: &[i64]) -> Result<RecordBatch> {
    if resets.is_empty() {
        return Ok(changes.clone());
    }
    let seq = strings(changes, bronze::SEQ)?;
    let at = times(changes, bronze::SOURCE_TS)?;
    let ranked: StringArray = (0..changes.num_rows())
        .map(|i| {
            let s = seq.value(i);
            let k = at[i].map_or(0, |t| resets.partition_point(|r| *r <= t));
            Some(if k == 0 {
                s.to_string()
            } else {
                format!("{}{s}", rank_prefix(k))
            })
        })
        .collect();
    let (i, _) = changes
        .schema()
        .column_with_name(bronze::SEQ)
        .ok_or_else(|| Error::Internal("changes have no `__seq`".into()))?;
    let mut columns = changes.columns().to_vec();
    columns[i] = Arc::new(ranked) as ArrayRef;
    Ok(RecordBatch::try_new(changes.schema(), columns)?)
}

/// Whether `seq` is a bare source position (after its reset rank): one only a Debezium
/// position-ordered change has.
fn bare_position(seq: &str) -> bool {
    let rest = match seq.strip_prefix('e') {
        Some(r) => r.split_once('|').map_or(seq, |(_, p)| p),
        None => seq,
    };
    !rest.contains('|')
}

/// One change (or stored row) of a key, for [`went_back`].
#[derive(Debug, Clone)]
pub(crate) struct Seen<'a> {
    /// The encoded key.
    pub key: &'a [u8],
    /// `__seq` (ranked).
    pub seq: &'a str,
    /// Its commit time (µs); for a stored SCD2 row its start (never earlier than its commit).
    pub at: Option<i64>,
    /// A change of this run that is not a snapshot row: only such a change can prove the
    /// positions went back (a stored row was checked when it came).
    pub checked: bool,
}

/// Where a `__seq` sits in the source's positions: its reset rank and, for a MySQL position
/// (`file.pos.row`), its binlog file number. A MySQL event's time is when its statement
/// started, so two transactions of one key can have their times inverted across a binlog
/// rotation or within a file; only a change in a lower file with a later time proves a
/// restart (`RESET MASTER` starts again at file 1). PostgreSQL and SQL Server send commit
/// times, which follow the positions of a key's changes.
fn life(seq: &str) -> (&str, Option<&str>) {
    let (rank, rest) = match seq.strip_prefix('e').and_then(|r| r.split_once('|')) {
        Some((rank, rest)) => (rank, rest),
        None => ("", seq),
    };
    let b = rest.as_bytes();
    let mysql = b.len() == 42
        && b[10] == b'.'
        && b[31] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 10 || i == 31 || c.is_ascii_digit());
    (rank, mysql.then(|| &rest[..10]))
}

/// The first pair (later-committed change, earlier-committed change of its key at a higher
/// position) that proves the positions went back, if any.
pub(crate) fn went_back<'a>(mut seen: Vec<Seen<'a>>) -> Option<(Seen<'a>, Seen<'a>)> {
    seen.sort_by(|a, b| a.key.cmp(b.key).then_with(|| b.seq.cmp(a.seq)));
    // Per key, from the highest position down (indexes into `seen`): the earliest commit time
    // above, and the earliest in a higher binlog file (or an earlier life), for MySQL.
    let earlier = |a: Option<usize>, b: usize| match a {
        Some(a) if seen[a].at <= seen[b].at => Some(a),
        _ if seen[b].at.is_some() => Some(b),
        _ => a,
    };
    let (mut above, mut above_files, mut in_file) = (None, None, None);
    let mut file: Option<(&str, Option<&str>)> = None;
    for i in 0..seen.len() {
        let s = &seen[i];
        if i > 0 && seen[i - 1].key != s.key {
            (above, above_files, in_file, file) = (None, None, None, None);
        }
        let here = life(s.seq);
        if file != Some(here) {
            above_files = match in_file {
                Some(f) => earlier(above_files, f),
                None => above_files,
            };
            (in_file, file) = (None, Some(here));
        }
        let against = if here.1.is_some() { above_files } else { above };
        if s.checked
            && bare_position(s.seq)
            && let (Some(at), Some(e)) = (s.at, against.map(|e| &seen[e]))
            && e.at.is_some_and(|t| at > t)
            && e.seq > s.seq
        {
            return Some((s.clone(), e.clone()));
        }
        above = earlier(above, i);
        in_file = earlier(in_file, i);
    }
    None
}

/// The changes of a run (`changes`: keys, `__op`, `__seq`, `__source_ts`) checked against each
/// other and against the stored rows of their keys (`stored`, with `__seq` and the time column
/// `stored_at`): [`Error::PositionsWentBack`] when the positions went back.
pub(crate) fn check(
    changes: &RecordBatch,
    stored: Option<(&RecordBatch, &str)>,
    keys: &[String],
    who: (&str, &str, Option<&str>),
) -> Result<()> {
    let codec = KeyCodec::new(&changes.schema(), keys)?;
    let (new_keys, new_seq, new_at) = (
        codec.encode(changes)?,
        strings(changes, bronze::SEQ)?,
        times(changes, bronze::SOURCE_TS)?,
    );
    let op = strings(changes, bronze::OP)?;
    let mut seen: Vec<Seen<'_>> = (0..changes.num_rows())
        .filter(|&i| op.value(i) != bronze::OP_TRUNCATE)
        .map(|i| Seen {
            key: &new_keys[i],
            seq: new_seq.value(i),
            at: new_at[i],
            checked: op.value(i) != bronze::OP_SNAPSHOT,
        })
        .collect();
    let old = match stored {
        Some((rows, at)) if rows.num_rows() > 0 => Some((
            codec.encode(rows)?,
            strings(rows, bronze::SEQ)?,
            times(rows, at)?,
        )),
        _ => None,
    };
    if let Some((k, s, a)) = &old {
        seen.extend((0..s.len()).map(|i| Seen {
            key: &k[i],
            seq: s.value(i),
            at: a[i],
            checked: false,
        }));
    }
    match went_back(seen) {
        None => Ok(()),
        Some((later, earlier)) => Err(error(who, &later, &earlier)),
    }
}

fn error(who: (&str, &str, Option<&str>), later: &Seen<'_>, earlier: &Seen<'_>) -> Error {
    let (job, table, family) = who;
    let time = |t: Option<i64>| {
        t.and_then(chrono::DateTime::from_timestamp_micros)
            .map_or_else(|| "at an unknown time".into(), |d| d.to_rfc3339())
    };
    let family = family.map_or_else(String::new, |f| format!(" `{f}`"));
    let (ls, la, es, ea) = (later.seq, time(later.at), earlier.seq, time(earlier.at));
    Error::PositionsWentBack {
        job: job.to_string(),
        table: table.to_string(),
        reason: format!(
            "the change at `{ls}` (committed {la}) ranks below `{es}` (committed {ea}) of the \
             same key. The source restarted its positions (MySQL: `RESET MASTER`, or a \
             fail-over to a server with its own binlog). Add the time of the restart (after \
             {ea}, at or before {la}: the server's log has it) to `position_resets` of the \
             family{family} (README \"CDC: position resets\"); the job then applies every \
             change from that time on after the ones before it"
        ),
    }
}

fn strings<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| Error::Internal(format!("no text column `{name}`")))
}

/// A timestamp column as µs (nulls as `None`).
pub(crate) fn times(batch: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| Error::Internal(format!("no time column `{name}`")))?;
    let col = deltalake::arrow::compute::cast(
        col,
        &deltalake::arrow::datatypes::DataType::Timestamp(
            deltalake::arrow::datatypes::TimeUnit::Microsecond,
            None,
        ),
    )?;
    let t = col.as_primitive::<TimestampMicrosecondType>();
    Ok((0..t.len())
        .map(|i| t.is_valid(i).then(|| t.value(i)))
        .collect())
}

/// The schema-independent part of [`check`] for one pair, used where the stored row and the
/// change are already matched (SCD1's rewrite): whether `later` (a change of this run, not a
/// snapshot row) at a lower position than `earlier` (the stored row of its key) was committed
/// after it.
pub(crate) fn pair_went_back(
    later: (&str, Option<i64>, &str),
    earlier: (&str, Option<i64>),
) -> bool {
    let (seq, at, op) = later;
    let (l, e) = (life(seq), life(earlier.0));
    let other_file = l.0 != e.0 || l.1.is_none() || e.1.is_none() || l.1 < e.1;
    op != bronze::OP_SNAPSHOT
        && bare_position(seq)
        && other_file
        && earlier.0 > seq
        && matches!((at, earlier.1), (Some(a), Some(e)) if a > e)
}

/// The error of a pair found by [`pair_went_back`].
pub(crate) fn pair_error(
    who: (&str, &str, Option<&str>),
    later: (&str, Option<i64>),
    earlier: (&str, Option<i64>),
) -> Error {
    let l = Seen {
        key: &[],
        seq: later.0,
        at: later.1,
        checked: true,
    };
    let e = Seen {
        key: &[],
        seq: earlier.0,
        at: earlier.1,
        checked: false,
    };
    error(who, &l, &e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s<'a>(key: &'a [u8], seq: &'a str, at: i64, checked: bool) -> Seen<'a> {
        Seen {
            key,
            seq,
            at: Some(at),
            checked,
        }
    }

    #[test]
    fn a_lower_position_committed_later_went_back() {
        let found = went_back(vec![
            s(
                b"a",
                "0000000005.00000000000000000100.0000000000",
                100,
                false,
            ),
            s(
                b"a",
                "0000000001.00000000000000000004.0000000000",
                200,
                true,
            ),
        ]);
        assert!(found.is_some_and(|(l, e)| l.at == Some(200) && e.at == Some(100)));
    }

    #[test]
    fn other_keys_snapshot_rows_offsets_and_equal_times_do_not() {
        // Another key's later change, a snapshot row (read time), a DMS/offset seq, equal times.
        for seen in [
            vec![
                s(
                    b"a",
                    "0000000005.00000000000000000100.0000000000",
                    100,
                    false,
                ),
                s(
                    b"b",
                    "0000000001.00000000000000000004.0000000000",
                    200,
                    true,
                ),
            ],
            vec![
                s(
                    b"a",
                    "0000000005.00000000000000000100.0000000000",
                    100,
                    true,
                ),
                s(
                    b"a",
                    "0000000001.00000000000000000004.0000000000",
                    200,
                    false,
                ),
            ],
            vec![
                s(b"a", "2|00000000000000000009|1|k|000000000001", 100, true),
                s(b"a", "2|00000000000000000001|1|k|000000000001", 200, true),
            ],
            vec![
                s(b"a", "00000000000000000200", 100, true),
                s(b"a", "00000000000000000100", 100, true),
            ],
        ] {
            assert!(went_back(seen).is_none());
        }
    }

    #[test]
    fn mysql_times_inverted_within_a_binlog_file_are_not_a_restart() {
        // Statement start times: a long transaction's event can carry an earlier time than a
        // short one committed before it, in the same file (or the next).
        let same_file = vec![
            s(
                b"a",
                "0000000005.00000000000000000900.0000000000",
                100,
                false,
            ),
            s(
                b"a",
                "0000000005.00000000000000000100.0000000000",
                200,
                true,
            ),
        ];
        assert!(went_back(same_file).is_none());
        assert!(!pair_went_back(
            ("0000000005.00000000000000000100.0000000000", Some(200), "u"),
            ("0000000005.00000000000000000900.0000000000", Some(100)),
        ));
        // A lower file, later: the restart.
        assert!(pair_went_back(
            ("0000000001.00000000000000000100.0000000000", Some(200), "u"),
            ("0000000005.00000000000000000900.0000000000", Some(100)),
        ));
        // An earlier-timed change in a higher file counts even past same-file ones.
        let mixed = vec![
            s(
                b"a",
                "0000000006.00000000000000000001.0000000000",
                50,
                false,
            ),
            s(
                b"a",
                "0000000005.00000000000000000900.0000000000",
                300,
                false,
            ),
            s(
                b"a",
                "0000000005.00000000000000000100.0000000000",
                200,
                true,
            ),
        ];
        assert!(went_back(mixed).is_some_and(|(l, e)| l.at == Some(200) && e.at == Some(50)));
    }

    #[test]
    fn a_reset_rank_puts_a_change_after_every_earlier_one() {
        let old = "0000000005.00000000000000000100.0000000000";
        let new = format!(
            "{}0000000001.00000000000000000004.0000000000",
            rank_prefix(1)
        );
        assert!(new.as_str() > old);
        assert!(went_back(vec![s(b"a", old, 100, false), s(b"a", &new, 200, true)]).is_none());
        assert!(bare_position(&new));
    }
}
