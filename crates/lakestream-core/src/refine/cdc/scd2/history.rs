//! The SCD type 2 history of touched keys, rebuilt from their set of changes (pure: batches in,
//! batches out).
//!
//! A key's silver rows are turned back into changes (a row = an upsert at its `__seq`; an
//! `__END_SEQ` no row of the key starts at = a delete), the stored deletes and truncates are
//! added ([`Stored`]), then the new changes (equal `__seq`: the change already applied wins); a
//! truncate is a delete of every key, and the intervals are rebuilt in `__seq` order: an upsert
//! closes the open row and opens its own, a delete closes the open row. The change feed
//! compares the rebuilt rows with the old ones by (key, `__seq`): new -> `insert`, end changed
//! -> `update_preimage` + `update_postimage`.
//!
//! A delete that closes nothing leaves no trace in silver: one that arrived before the upserts
//! it ends, or one that closed a row until an older delete or truncate arrived and closed that
//! row first. Nor does a truncate for a key with no row yet. Such deletes
//! ([`Rebuilt::orphans`]) and every truncate are kept in the job's side table and passed back
//! as [`Stored`], so the history stays a function of the key's set of changes, whatever the
//! order they arrive in.

use crate::commit::ChangeType;
use crate::error::{Error, Result};
use deltalake::arrow::array::{
    ArrayRef, AsArray, RecordBatch, StringArray, TimestampMicrosecondArray, UInt32Array,
    new_null_array,
};
use deltalake::arrow::compute::{cast, concat_batches, take_record_batch};
use deltalake::arrow::datatypes::{DataType, SchemaRef, TimestampMicrosecondType};
use deltalake::arrow::row::{RowConverter, SortField};
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

/// Encodes key columns to comparable bytes, in the silver key types.
pub struct KeyCodec {
    converter: RowConverter,
    keys: Vec<String>,
    types: Vec<DataType>,
}

impl KeyCodec {
    /// A codec for `keys` typed as in `schema`.
    pub fn new(schema: &SchemaRef, keys: &[String]) -> Result<Self> {
        let types = keys
            .iter()
            .map(|k| {
                schema
                    .field_with_name(k)
                    .map(|f| f.data_type().clone())
                    .map_err(|_| Error::Internal(format!("no key column `{k}` in silver")))
            })
            .collect::<Result<Vec<_>>>()?;
        let converter = RowConverter::new(types.iter().cloned().map(SortField::new).collect())?;
        Ok(Self {
            converter,
            keys: keys.to_vec(),
            types,
        })
    }

    /// The encoded key of every row of `batch`.
    pub fn encode(&self, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        let cols = self
            .keys
            .iter()
            .zip(&self.types)
            .map(|(k, t)| {
                let c = batch
                    .column_by_name(k)
                    .ok_or_else(|| Error::Internal(format!("no key column `{k}`")))?;
                Ok(cast(c, t)?)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let rows = self.converter.convert_columns(&cols)?;
        Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
    }

    /// The key columns (silver types) of encoded keys, in order: [`encode`](Self::encode)'s
    /// inverse.
    pub fn decode(&self, keys: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        let parser = self.converter.parser();
        Ok(self
            .converter
            .convert_rows(keys.iter().map(|k| parser.parse(k)))?)
    }

    /// The key column names and their silver types.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &DataType)> {
        self.keys.iter().map(String::as_str).zip(&self.types)
    }
}

/// A rebuilt row: its index in the combined rows, and its end (`__END_SEQ`, `__END_AT`).
type Built = (usize, Option<(String, Option<i64>)>);

#[derive(Debug, Clone)]
enum Kind {
    /// Opens the row at this index of the combined rows.
    Upsert(usize),
    /// Closes the open row; `true`: its only trace would be the row it closes (a new delete,
    /// or one read back from a silver row's end), so it is an orphan when it closes none.
    Delete(bool),
}

#[derive(Debug, Clone)]
struct Event {
    seq: String,
    /// Already applied (from silver): wins over a redelivery of the same `__seq`.
    old: bool,
    kind: Kind,
    at: Option<i64>,
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

/// Rebuild the history of the keys of `old` (their silver rows) and `changes` (the run's
/// changes, `ChangeRead::changes` without truncates), with `truncates` closing every key and
/// the `stored` deletes and truncates of earlier runs.
pub fn rebuild(
    schema: &SchemaRef,
    codec: &KeyCodec,
    old: &RecordBatch,
    changes: &RecordBatch,
    truncates: &[Truncate],
    stored: &[Stored],
) -> Result<Rebuilt> {
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
    let ops = texts(changes, bronze::OP)?;
    let mut events: BTreeMap<&[u8], Vec<Event>> = BTreeMap::new();
    // Old rows: upserts, and deletes where an end starts no row of the key.
    let mut starts_of: HashSet<(&[u8], &str)> = HashSet::new();
    for i in 0..old.num_rows() {
        if let Some(s) = &seqs[i] {
            starts_of.insert((&keys[i], s));
        }
    }
    for i in 0..combined.num_rows() {
        let seq = seqs[i].clone().unwrap_or_default();
        let is_old = i < old.num_rows();
        let list = events.entry(&keys[i]).or_default();
        let kind = if is_old || ops[i - old.num_rows()].as_deref() != Some(bronze::OP_DELETE) {
            Kind::Upsert(i)
        } else {
            Kind::Delete(true)
        };
        list.push(Event {
            seq,
            old: is_old,
            kind,
            at: start_at[i],
        });
        if is_old
            && let Some(e) = &ends[i]
            && !starts_of.contains(&(keys[i].as_slice(), e.as_str()))
        {
            list.push(Event {
                seq: e.clone(),
                old: true,
                kind: Kind::Delete(true),
                at: end_at[i],
            });
        }
    }
    // Stored deletes by key; stored truncates close every key.
    let mut by_key: HashMap<&[u8], Vec<&Stored>> = HashMap::new();
    let (keyed, every): (Vec<&Stored>, Vec<&Stored>) = stored.iter().partition(|s| s.key.is_some());
    for s in keyed {
        if let Some(k) = &s.key {
            by_key.entry(k.as_slice()).or_default().push(s);
        }
    }
    for (key, list) in events.iter_mut() {
        let own = by_key.get(key).map(Vec::as_slice).unwrap_or_default();
        for s in own.iter().chain(&every) {
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
        // By `__seq`; of equal ones the applied change first (a stored delete after silver's
        // trace of it: the sort is stable), then delivery order.
        list.sort_by(|a, b| a.seq.cmp(&b.seq).then(b.old.cmp(&a.old)));
        list.dedup_by(|b, a| a.seq == b.seq);
    }
    // Rebuild: (combined row, end) per row, key by key.
    let mut out: Vec<Built> = Vec::new();
    let mut orphans = Vec::new();
    for (key, list) in &events {
        let mut open: Option<usize> = None;
        for e in list {
            let closed = open.take().map(|o| out[o].1 = Some((e.seq.clone(), e.at)));
            let kept = || {
                every.iter().any(|s| s.seq == e.seq)
                    || by_key
                        .get(key)
                        .is_some_and(|own| own.iter().any(|s| s.seq == e.seq))
            };
            if closed.is_none() && matches!(e.kind, Kind::Delete(true)) && !kept() {
                orphans.push(Stored {
                    key: Some(key.to_vec()),
                    seq: e.seq.clone(),
                    at: e.at,
                });
            }
            if let Kind::Upsert(i) = e.kind {
                open = Some(out.len());
                out.push((i, None));
            }
        }
    }
    let idx = UInt32Array::from(out.iter().map(|(i, _)| *i as u32).collect::<Vec<_>>());
    let mut rows = take_record_batch(&combined, &idx)?;
    let end_seq: StringArray = out
        .iter()
        .map(|(_, e)| e.as_ref().map(|e| e.0.clone()))
        .collect();
    let end_at = TimestampMicrosecondArray::from(
        out.iter()
            .map(|(_, e)| e.as_ref().and_then(|e| e.1))
            .collect::<Vec<_>>(),
    )
    .with_timezone("UTC");
    rows = replace(&rows, silver::END_SEQ, Arc::new(end_seq))?;
    rows = replace(&rows, silver::END_AT, Arc::new(end_at))?;
    let mut rebuilt = feed(
        schema,
        old,
        &combined,
        &keys,
        &seqs,
        &ends,
        &end_at_vec(&combined)?,
        rows,
        &out,
    )?;
    rebuilt.orphans = orphans;
    Ok(rebuilt)
}

fn end_at_vec(b: &RecordBatch) -> Result<Vec<Option<i64>>> {
    micros(b, silver::END_AT)
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

/// Compare the rebuilt rows with the old ones: the change feed and the changed keys.
#[allow(clippy::too_many_arguments)]
fn feed(
    schema: &SchemaRef,
    old: &RecordBatch,
    combined: &RecordBatch,
    keys: &[Vec<u8>],
    seqs: &[Option<String>],
    ends: &[Option<String>],
    old_end_at: &[Option<i64>],
    rows: RecordBatch,
    out: &[Built],
) -> Result<Rebuilt> {
    let mut old_at: HashMap<(&[u8], &str), usize> = HashMap::new();
    for i in 0..old.num_rows() {
        old_at.insert((&keys[i], seqs[i].as_deref().unwrap_or_default()), i);
    }
    let (mut inserts, mut pre, mut post) = (Vec::new(), Vec::new(), Vec::new());
    let mut changed = HashSet::new();
    let mut kept_old = HashSet::new();
    for (n, (i, end)) in out.iter().enumerate() {
        let key = (keys[*i].as_slice(), seqs[*i].as_deref().unwrap_or_default());
        match old_at.get(&key) {
            None => {
                inserts.push(n as u32);
                changed.insert(keys[*i].clone());
            }
            Some(&o) => {
                kept_old.insert(o);
                let new_end = end.as_ref().map(|e| (e.0.as_str(), e.1));
                let old_end = ends[o].as_deref().map(|s| (s, old_end_at[o]));
                if new_end != old_end {
                    pre.push(o as u32);
                    post.push(n as u32);
                    changed.insert(keys[*i].clone());
                }
            }
        }
    }
    let deletes: Vec<u32> = (0..old.num_rows())
        .filter(|o| !kept_old.contains(o))
        .map(|o| o as u32)
        .collect();
    for &o in &deletes {
        changed.insert(keys[o as usize].clone());
    }
    let pick = |b: &RecordBatch, idx: Vec<u32>| take_record_batch(b, &UInt32Array::from(idx));
    let (inserted, closed) = (inserts.len(), pre.len());
    let mut feed = Vec::new();
    for (kind, batch) in [
        (ChangeType::Insert, pick(&rows, inserts)?),
        (ChangeType::UpdatePreimage, pick(combined, pre)?),
        (ChangeType::UpdatePostimage, pick(&rows, post)?),
        (ChangeType::Delete, pick(combined, deletes)?),
    ] {
        if batch.num_rows() > 0 {
            feed.push((
                kind,
                RecordBatch::try_new(schema.clone(), batch.columns().to_vec())?,
            ));
        }
    }
    Ok(Rebuilt {
        orphans: Vec::new(),
        rows,
        feed,
        changed,
        inserted,
        closed,
    })
}
