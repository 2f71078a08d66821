//! The SCD type 2 history of touched keys, rebuilt from their set of changes (pure: batches in,
//! batches out).
//!
//! A key's silver rows are turned back into changes (a row = an upsert at its `__seq`; an
//! `__END_SEQ` no row of the key starts at = a delete), the stored deletes and truncates are
//! added ([`Stored`]), then the new changes (equal `__seq`: the change already applied wins); a
//! truncate is a delete of every key, and the intervals are rebuilt in `__seq` order
//! ([`timeline`](super::timeline)): an upsert closes the open row and opens its own (unless its
//! row values equal the open row's: then it is no version), a delete closes the open row; the
//! times are a running maximum per key, so the history is a timeline. The change feed
//! compares the rebuilt rows with the old ones by (key, `__seq`): new -> `insert`, start or end
//! changed -> `update_preimage` + `update_postimage`, gone -> `delete`.
//!
//! A delete that closes nothing leaves no trace in silver: one that arrived before the upserts
//! it ends, or one that closed a row until an older delete or truncate arrived and closed that
//! row first. Nor does a truncate for a key with no row yet. Such deletes
//! ([`Rebuilt::orphans`]) and every truncate are kept in the job's side table and passed back
//! as [`Stored`], so the history stays a function of the key's set of changes, whatever the
//! order they arrive in.

use super::keys::KeyCodec;
use super::{compare, timeline};
use crate::commit::ChangeType;
use crate::error::{Error, Result};
use crate::refine::keyed::values::Toast;
use deltalake::arrow::array::{
    ArrayRef, AsArray, RecordBatch, StringArray, TimestampMicrosecondArray, UInt32Array,
    new_null_array,
};
use deltalake::arrow::compute::{cast, concat_batches, take_record_batch};
use deltalake::arrow::datatypes::{DataType, SchemaRef, TimestampMicrosecondType};
use lakestream_formats::config::{bronze, silver};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// A truncate of the source table: every row open before it is closed at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    /// Its `__seq`.
    pub seq: String,
    /// Its time (µs), `__source_ts` else `__ingested_at`.
    pub at: Option<i64>,
}

/// A delete or truncate kept in the job's side table (silver has no trace of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The key (encoded by [`KeyCodec`]); `None`: a truncate (every key).
    pub key: Option<Vec<u8>>,
    /// Its `__seq`.
    pub seq: String,
    /// Its time (µs).
    pub at: Option<i64>,
}

/// The rebuilt history of the touched keys.
#[derive(Debug)]
pub struct Rebuilt {
    /// Deletes (new, or read back from silver) that close no row now: to be stored.
    pub orphans: Vec<Stored>,
    /// Every row of every touched key, in the silver schema.
    pub rows: RecordBatch,
    /// The change feed rows: the silver schema plus `_change_type`.
    pub feed: Vec<(ChangeType, RecordBatch)>,
    /// Keys whose rows changed (encoded by [`KeyCodec`]); only their files are rewritten.
    pub changed: HashSet<Vec<u8>>,
    /// Rows opened (new versions).
    pub inserted: usize,
    /// Existing rows whose end changed.
    pub closed: usize,
}

/// A rebuilt row: its index in the combined rows, its start (`__START_AT`, on the key's
/// clock) and its end (`__END_SEQ`, `__END_AT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Built {
    /// Index in the combined rows.
    pub row: usize,
    /// `__START_AT`.
    pub start: Option<i64>,
    /// `__END_SEQ`, `__END_AT` (`None`: open).
    pub end: Option<(String, Option<i64>)>,
}

#[derive(Debug, Clone)]
pub(super) enum Kind {
    /// Opens the row at this index of the combined rows.
    Upsert(usize),
    /// Closes the open row; `true`: its only trace would be the row it closes (a new delete,
    /// or one read back from a silver row's end), so it is an orphan when it closes none.
    Delete(bool),
}

#[derive(Debug, Clone)]
pub(super) struct Event {
    pub seq: String,
    /// Already applied (from silver): wins over a redelivery of the same `__seq`.
    pub old: bool,
    pub kind: Kind,
    /// Its time: a silver row's `__START_AT` / `__END_AT` (clamped), else the change's.
    pub at: Option<i64>,
}

fn texts(batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    let c = batch
        .column_by_name(name)
        .ok_or_else(|| Error::Internal(format!("no column `{name}`")))?;
    let c = cast(c, &DataType::Utf8)?;
    Ok(c.as_string::<i32>()
        .iter()
        .map(|v| v.map(str::to_string))
        .collect())
}

fn micros(batch: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let Some(c) = batch.column_by_name(name) else {
        return Ok(vec![None; batch.num_rows()]);
    };
    let c = cast(
        c,
        &DataType::Timestamp(deltalake::arrow::datatypes::TimeUnit::Microsecond, None),
    )?;
    Ok(c.as_primitive::<TimestampMicrosecondType>()
        .iter()
        .collect())
}

/// The new changes' upserts as silver rows (row columns, `__seq`, `__START_AT`; open).
fn as_rows(
    schema: &SchemaRef,
    changes: &RecordBatch,
    starts: &[Option<i64>],
) -> Result<RecordBatch> {
    let n = changes.num_rows();
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            let c: ArrayRef = match f.name().as_str() {
                silver::START_AT => {
                    Arc::new(TimestampMicrosecondArray::from(starts.to_vec()).with_timezone("UTC"))
                }
                silver::END_AT | silver::END_SEQ => new_null_array(f.data_type(), n),
                name => match changes.column_by_name(name) {
                    Some(c) => c.clone(),
                    None => new_null_array(f.data_type(), n),
                },
            };
            Ok(cast(&c, f.data_type())?)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The run's changes to rebuild with: `ChangeRead::changes` without truncates, the
/// truncates, and the Debezium source's TOAST placeholder (none for DMS / files).
pub struct RunChanges<'a> {
    /// The upserts and deletes.
    pub changes: &'a RecordBatch,
    /// The truncates (they close every key).
    pub truncates: &'a [Truncate],
    /// The TOAST placeholder.
    pub toast: Option<&'a Toast>,
}

/// Rebuild the history of the keys of `old` (their silver rows) and the run's changes `run`,
/// with the `stored` deletes and truncates of earlier runs, on the key's clock, without
/// versions for changes that change nothing ([`timeline`](super::timeline)).
pub fn rebuild(
    schema: &SchemaRef,
    codec: &KeyCodec,
    old: &RecordBatch,
    run: RunChanges<'_>,
    stored: &[Stored],
) -> Result<Rebuilt> {
    let changes = run.changes;
    let c = Combined::new(schema, codec, old, changes)?;
    let ops = texts(changes, bronze::OP)?;
    let mut events = c.events(old.num_rows(), &ops);
    let kept = Kept::new(stored);
    kept.add_to(&mut events, run.truncates);
    let keys: Vec<String> = codec.fields().map(|(k, _)| k.to_string()).collect();
    let combined = timeline::resolve_toast(&c.combined, run.toast, &keys, &events, old.num_rows())?;
    let (out, orphans) = timeline::intervals(&events, &kept, &combined)?;
    let rows = with_ends(&combined, &out)?;
    let mut rebuilt = compare::feed(
        schema,
        old,
        &c.combined,
        &compare::Old {
            keys: &c.keys,
            seqs: &c.seqs,
            ends: &c.ends,
            start_at: &c.start_at,
            end_at: &c.end_at,
        },
        rows,
        &out,
    )?;
    rebuilt.orphans = orphans;
    Ok(rebuilt)
}

/// The touched keys' old silver rows followed by the new changes' upserts as silver rows, with
/// the columns the rebuild reads.
struct Combined {
    /// The rows.
    combined: RecordBatch,
    /// Their encoded keys.
    keys: Vec<Vec<u8>>,
    /// Their `__seq`.
    seqs: Vec<Option<String>>,
    /// Their `__END_SEQ`.
    ends: Vec<Option<String>>,
    /// Their `__START_AT`.
    start_at: Vec<Option<i64>>,
    /// Their `__END_AT`.
    end_at: Vec<Option<i64>>,
}

impl Combined {
    /// `old`'s rows and `changes` as silver rows (opened at `__source_ts`, else
    /// `__ingested_at`).
    fn new(
        schema: &SchemaRef,
        codec: &KeyCodec,
        old: &RecordBatch,
        changes: &RecordBatch,
    ) -> Result<Self> {
        let starts: Vec<Option<i64>> = micros(changes, bronze::SOURCE_TS)?
            .into_iter()
            .zip(micros(changes, bronze::INGESTED_AT)?)
            .map(|(s, i)| s.or(i))
            .collect();
        let combined = concat_batches(schema, [old, &as_rows(schema, changes, &starts)?])?;
        let keys = codec.encode(&combined)?;
        let (seqs, ends) = (
            texts(&combined, silver::SEQ)?,
            texts(&combined, silver::END_SEQ)?,
        );
        let (start_at, end_at) = (
            micros(&combined, silver::START_AT)?,
            micros(&combined, silver::END_AT)?,
        );
        Ok(Self {
            combined,
            keys,
            seqs,
            ends,
            start_at,
            end_at,
        })
    }

    /// The events per key: the first `old_rows` rows (old) are upserts, and deletes where an
    /// end starts no row of the key; the changes (`ops` their `__op`) upserts or deletes.
    fn events(&self, old_rows: usize, ops: &[Option<String>]) -> BTreeMap<&[u8], Vec<Event>> {
        let keys = &self.keys;
        let mut events: BTreeMap<&[u8], Vec<Event>> = BTreeMap::new();
        // Old rows: upserts, and deletes where an end starts no row of the key.
        let mut starts_of: HashSet<(&[u8], &str)> = HashSet::new();
        for (k, s) in keys.iter().zip(&self.seqs).take(old_rows) {
            if let Some(s) = s {
                starts_of.insert((k, s));
            }
        }
        for i in 0..self.combined.num_rows() {
            let seq = self.seqs[i].clone().unwrap_or_default();
            let is_old = i < old_rows;
            let list = events.entry(&keys[i]).or_default();
            let kind = if is_old || ops[i - old_rows].as_deref() != Some(bronze::OP_DELETE) {
                Kind::Upsert(i)
            } else {
                Kind::Delete(true)
            };
            list.push(Event {
                seq,
                old: is_old,
                kind,
                at: self.start_at[i],
            });
            if is_old
                && let Some(e) = &self.ends[i]
                && !starts_of.contains(&(keys[i].as_slice(), e.as_str()))
            {
                list.push(Event {
                    seq: e.clone(),
                    old: true,
                    kind: Kind::Delete(true),
                    at: self.end_at[i],
                });
            }
        }
        events
    }
}

/// The stored deletes by key, and the stored truncates (they close every key).
pub(super) struct Kept<'s> {
    by_key: HashMap<&'s [u8], Vec<&'s Stored>>,
    every: Vec<&'s Stored>,
}

impl<'s> Kept<'s> {
    /// The `stored` deletes and truncates of earlier runs.
    fn new(stored: &'s [Stored]) -> Self {
        let mut by_key: HashMap<&[u8], Vec<&Stored>> = HashMap::new();
        let (keyed, every): (Vec<&Stored>, Vec<&Stored>) =
            stored.iter().partition(|s| s.key.is_some());
        for s in keyed {
            if let Some(k) = &s.key {
                by_key.entry(k.as_slice()).or_default().push(s);
            }
        }
        Self { by_key, every }
    }

    /// Add the stored deletes and truncates and the run's `truncates` to each key's events,
    /// and order them by `__seq` (one event per `__seq`).
    fn add_to(&self, events: &mut BTreeMap<&[u8], Vec<Event>>, truncates: &[Truncate]) {
        for (key, list) in events.iter_mut() {
            let own = self.by_key.get(key).map(Vec::as_slice).unwrap_or_default();
            for s in own.iter().chain(&self.every) {
                list.push(Event {
                    seq: s.seq.clone(),
                    old: true,
                    kind: Kind::Delete(false),
                    at: s.at,
                });
            }
            for t in truncates {
                list.push(Event {
                    seq: t.seq.clone(),
                    old: false,
                    kind: Kind::Delete(false),
                    at: t.at,
                });
            }
            // By `__seq`; of equal ones the applied change first (a stored delete after
            // silver's trace of it: the sort is stable), then delivery order.
            list.sort_by(|a, b| a.seq.cmp(&b.seq).then(b.old.cmp(&a.old)));
            list.dedup_by(|b, a| a.seq == b.seq);
        }
    }

    /// Whether the delete or truncate at `seq` of `key` is already stored.
    pub(super) fn has(&self, key: &[u8], seq: &str) -> bool {
        self.every.iter().any(|s| s.seq == seq)
            || self
                .by_key
                .get(key)
                .is_some_and(|own| own.iter().any(|s| s.seq == seq))
    }
}

/// The rebuilt rows `out` of `combined`, with their starts (`__START_AT`) and ends
/// (`__END_SEQ`, `__END_AT`).
fn with_ends(combined: &RecordBatch, out: &[Built]) -> Result<RecordBatch> {
    let idx = UInt32Array::from(out.iter().map(|b| b.row as u32).collect::<Vec<_>>());
    let mut rows = take_record_batch(combined, &idx)?;
    let end_seq: StringArray = out
        .iter()
        .map(|b| b.end.as_ref().map(|e| e.0.clone()))
        .collect();
    let times = |f: &dyn Fn(&Built) -> Option<i64>| {
        TimestampMicrosecondArray::from(out.iter().map(f).collect::<Vec<_>>()).with_timezone("UTC")
    };
    let start_at = times(&|b| b.start);
    let end_at = times(&|b| b.end.as_ref().and_then(|e| e.1));
    rows = replace(&rows, silver::START_AT, Arc::new(start_at))?;
    rows = replace(&rows, silver::END_SEQ, Arc::new(end_seq))?;
    rows = replace(&rows, silver::END_AT, Arc::new(end_at))?;
    Ok(rows)
}

fn replace(b: &RecordBatch, name: &str, col: ArrayRef) -> Result<RecordBatch> {
    let schema = b.schema();
    let (i, f) = schema
        .column_with_name(name)
        .ok_or_else(|| Error::Internal(format!("no column `{name}` in silver")))?;
    let mut cols = b.columns().to_vec();
    cols[i] = cast(&col, f.data_type())?;
    Ok(RecordBatch::try_new(schema.clone(), cols)?)
}
