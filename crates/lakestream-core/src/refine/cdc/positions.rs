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
use crate::table::TableHandle;
use deltalake::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use deltalake::arrow::datatypes::TimestampMicrosecondType;
use lakestream_formats::config::bronze;
use std::sync::Arc;

/// Silver table property: the `position_resets` (µs, comma separated) its rows were ranked
/// with. A silver applied under other resets is rebuilt from bronze before the next run
/// ([`resets_changed`]): rows written before a reset was declared carry unranked positions,
/// and a re-emission ranked after the reset would pass them.
pub const RESETS_PROPERTY: &str = "lakestream.cdc.position_resets";

/// `resets` as [`RESETS_PROPERTY`] records them.
pub(crate) fn resets_text(resets: &[i64]) -> String {
    resets
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `output` (an existing silver) was applied under other resets than `resets`.
pub(crate) fn resets_changed(output: &TableHandle, resets: &[i64]) -> Result<bool> {
    let recorded = output.property(RESETS_PROPERTY)?.unwrap_or_default();
    Ok(recorded != resets_text(resets))
}

/// The property a commit of `output` sets so that it records `resets` (none when it does).
pub(crate) fn resets_property(
    output: &TableHandle,
    resets: &[i64],
) -> Result<Option<(String, String)>> {
    let exists = output.exists();
    if (!exists && resets.is_empty()) || (exists && !resets_changed(output, resets)?) {
        return Ok(None);
    }
    Ok(Some((RESETS_PROPERTY.to_string(), resets_text(resets))))
}

/// The `__seq` rank prefix of changes after the `k`-th position reset (`k >= 1`).
pub fn rank_prefix(k: usize) -> String {
    format!("e{k:04}|")
}

/// `seq` without its reset rank prefix ([`rank_prefix`]): the position bronze holds.
pub(crate) fn unranked(seq: &str) -> &str {
    match seq.as_bytes() {
        [b'e', d @ ..] if d.len() > 5 && d[..4].iter().all(u8::is_ascii_digit) && d[4] == b'|' => {
            &seq[6..]
        }
        _ => seq,
    }
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
            // A tombstone has no position (empty): `compacted` places it among ranked ones.
            Some(if k == 0 || s.is_empty() {
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

/// Whether `seq` is a tombstone's ([`compacted`](super::compacted)): its time is when Kafka
/// took the tombstone, not a commit time, so it never proves the positions went back.
pub(crate) fn untimed(seq: &str) -> bool {
    seq.ends_with(super::compacted::MARK)
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

/// How much later (µs) a change at a lower position must be to prove a restart: for MySQL,
/// whose event times are statement start times, longer than a transaction waits for a row
/// lock (`innodb_lock_wait_timeout`, 50 s by default) with room to spare; PostgreSQL and SQL
/// Server send commit times, which follow the positions of a key's changes.
fn margin(life: (&str, Option<&str>)) -> i64 {
    if life.1.is_some() { MYSQL_MARGIN_US } else { 0 }
}

/// [`margin`] for MySQL positions: 5 minutes.
pub const MYSQL_MARGIN_US: i64 = 300_000_000;

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
            && e.at.is_some_and(|t| at > t.saturating_add(margin(here)))
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
            at: new_at[i].filter(|_| !untimed(new_seq.value(i))),
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
             same key: the source restarted its positions (MySQL: `RESET MASTER`, or a \
             fail-over to a server with its own binlog); check the server's log for it. Add the \
             time of the restart (after \
             {ea}, at or before {la}) to `position_resets` of the family{family} (README \
             \"CDC: position resets\"); the next run rebuilds silver from bronze with every \
             change from that time on ranked after the ones before it"
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

/// The changes of a run checked against truncates (`__seq`, time): a change (or truncate) at a
/// lower position than a truncate, committed after it, would be voided by it although the
/// source's positions went back ([`Error::PositionsWentBack`]).
pub(crate) fn check_truncates(
    changes: &RecordBatch,
    truncates: &[(&str, Option<i64>)],
    who: (&str, &str, Option<&str>),
) -> Result<()> {
    if truncates.is_empty() {
        return Ok(());
    }
    let (seq, at, op) = (
        strings(changes, bronze::SEQ)?,
        times(changes, bronze::SOURCE_TS)?,
        strings(changes, bronze::OP)?,
    );
    for (i, at) in at.into_iter().enumerate() {
        let later = (seq.value(i), at, op.value(i));
        for &earlier in truncates {
            if pair_went_back(later, earlier) {
                return Err(pair_error(who, (later.0, later.1), earlier));
            }
        }
    }
    Ok(())
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
        && !untimed(earlier.0)
        && matches!((at, earlier.1), (Some(a), Some(e)) if a > e.saturating_add(margin(l)))
}

/// Who a [`positions`](self) error names: the job, its bronze table, its family.
pub(crate) type Who = (String, String, Option<String>);

/// A CDC run's `__seq`, `__source_ts` and `__op`, to check a change against a stored row or
/// what keeps it out ([`pair_went_back`]) where the two are already matched.
pub(crate) struct RunColumns<'s> {
    who: &'s Who,
    /// The run's `__seq`s.
    pub seq: &'s StringArray,
    /// Their commit times (µs).
    pub at: Vec<Option<i64>>,
    /// Their `__op`s.
    pub op: &'s StringArray,
}

impl<'s> RunColumns<'s> {
    /// The columns of the run's changes `rows`.
    pub fn of(rows: &'s RecordBatch, who: &'s Who) -> Result<Self> {
        Ok(Self {
            who,
            seq: strings(rows, bronze::SEQ)?,
            at: times(rows, bronze::SOURCE_TS)?,
            op: strings(rows, bronze::OP)?,
        })
    }

    /// `Err` ([`Error::PositionsWentBack`]) when change `row`, at a lower position than
    /// `earlier` (`__seq`, time), was committed after it.
    pub fn check(&self, row: usize, earlier: (&str, Option<i64>)) -> Result<()> {
        let later = (self.seq.value(row), self.at[row], self.op.value(row));
        if pair_went_back(later, earlier) {
            let (job, table, family) = self.who;
            let who = (job.as_str(), table.as_str(), family.as_deref());
            return Err(pair_error(who, (later.0, later.1), earlier));
        }
        Ok(())
    }
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
#[path = "positions_tests.rs"]
mod tests;
