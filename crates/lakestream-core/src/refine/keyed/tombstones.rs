//! Tombstones of a CDC upsert: when a delete wins for a key, the key, its ordering values and
//! its tie-break text are kept — in the output commit that applies the delete, then
//! consolidated into the job's tombstone table (`_lakestream/<job>/tombstones`, a Delta table
//! partitioned by the processing `date`; [`pending`]) — so a late, older insert of that key is
//! not brought back. Tombstones expire `tombstone_retention` after they were written (whole `date`
//! partitions are removed by the job itself). For a CDC job (`__seq` order) the expiry
//! records the greatest `__seq` it removed on the tombstone table
//! ([`EXPIRED_THROUGH_PROPERTY`]), and an incremental run keeps out a change at or below it
//! for a key with neither a row nor a tombstone ([`keep_out_forgotten`]): it may be older
//! than a delete that was forgotten, and a deleted key must not come back. A plain upsert has
//! no such horizon: a row for the key older than the delete that arrives after expiry is
//! upserted again.

use super::incoming::{Incoming, IncomingRows, Ties};
use super::order::Encoder;
use super::pending;
use super::tombstone_table::dated_batch;
pub(crate) use super::tombstone_table::write_in;
pub use super::tombstone_table::{NEVER_EXPIRES, write, write_dated};
use crate::error::{Error, Result};
use crate::read::read_all;
use crate::refine::RunContext;
use crate::refine::cdc::positions::{self, RunColumns};
use crate::table::TableHandle;
use chrono::{DateTime, Utc};
use deltalake::arrow::array::{ArrayRef, AsArray, RecordBatch, StringArray, UInt32Array};
use deltalake::arrow::compute::take_record_batch;
use lakestream_formats::config::bronze;
use std::collections::HashMap;
use std::sync::Arc;

/// The tombstone table of a job (named in one place, with every other table of the pipeline:
/// [`lakestream_formats::tables`]).
pub fn table_name(job: &str) -> String {
    lakestream_formats::tables::tombstone_table(job)
}

/// Tombstone table property: the greatest `__seq` of the tombstones expired so far (CDC jobs).
pub const EXPIRED_THROUGH_PROPERTY: &str = "lakestream.tombstones.expired_through";
/// Tombstone table property: the latest commit time (`__source_ts`, µs) of the expired
/// tombstones' deletes.
pub const EXPIRED_AT_PROPERTY: &str = "lakestream.tombstones.expired_through_at";

/// The newest tombstone of a key.
#[derive(Debug, Clone)]
pub struct Tomb {
    /// Its ordering bytes.
    pub order: Vec<u8>,
    /// Its tie text.
    pub tie: String,
    /// CDC: its `__seq` and the delete's commit time (`__source_ts`, µs): a change committed
    /// after that cannot be older than the delete
    /// ([`positions`](crate::refine::cdc::positions)).
    pub seq_at: Option<(String, i64)>,
}

/// Key -> the newest tombstone per key.
pub type Tombstones = HashMap<Vec<u8>, Tomb>;

/// Every live tombstone of the table (it only holds deletes within the retention) as of
/// `handle` (the run's side-table handle, [`RunContext::side`]), and those of `pending` (the
/// output commits' inline tombstones not consolidated yet, [`pending::read`]); nothing when
/// there is no table yet and nothing pending.
pub async fn load(
    handle: &TableHandle,
    pending: &[RecordBatch],
    table: &str,
    key: &Encoder,
    order: &Encoder,
) -> Result<Tombstones> {
    let mut out = Tombstones::new();
    if handle.exists() {
        newest_of(&read_all(handle).await?, &mut out, table, (key, order))?;
    }
    for batch in pending {
        newest_of(batch, &mut out, table, (key, order))?;
    }
    Ok(out)
}

/// Keep in `out` the newest tombstone per key of `batch` and what `out` holds.
fn newest_of(
    batch: &RecordBatch,
    out: &mut Tombstones,
    table: &str,
    (key, order): (&Encoder, &Encoder),
) -> Result<()> {
    let keys = key.encode(batch, table)?;
    let orders = order.encode(batch, table)?;
    let ties = batch
        .column_by_name("tie")
        .ok_or_else(|| Error::Internal(format!("tombstone table `{table}` has no `tie`")))?
        .as_string::<i32>()
        .clone();
    let seqs = batch
        .column_by_name(bronze::SEQ)
        .and_then(|c| c.as_string_opt::<i32>());
    // The delete's own commit time (a database time, compared with the changes' own).
    let written = batch
        .column_by_name(bronze::SOURCE_TS)
        .map(|_| positions::times(batch, bronze::SOURCE_TS))
        .transpose()?;
    for (i, (k, o)) in keys.into_iter().zip(orders).enumerate() {
        let t = ties.value(i).to_string();
        let newer = out.get(&k).is_none_or(|b| (&o, &t) > (&b.order, &b.tie));
        if newer {
            let at = written.as_ref().and_then(|w| w[i]);
            let seq_at = seqs.zip(at).map(|(s, at)| (s.value(i).to_string(), at));
            out.insert(
                k,
                Tomb {
                    order: o,
                    tie: t,
                    seq_at,
                },
            );
        }
    }
    Ok(())
}

/// Mark the winners a tombstone keeps out as older: a delete with greater ordering values
/// keeps a row out; at equal ordering values the delete wins over a non-delete, and a delete is
/// never older than an equal tombstone (its own, from an earlier attempt or run that did not
/// commit the output). CDC (`who`: job, bronze, family): a change the tombstone keeps out but
/// committed after the delete was written proves the source's positions went back: an error,
/// never a silent drop. The tombstones are the table's and those pending in the output's
/// commits up to `output`'s version ([`pending`]). Returns the tombstone table as loaded (once
/// per plan; a re-plan loads it again: [`keep_out_forgotten`] reads its properties from it);
/// `None`, loading nothing, for a job whose source has no deletes (no `op` column configured).
pub(crate) async fn keep_out_deleted(
    ctx: &RunContext<'_>,
    src: &IncomingRows<'_>,
    incoming: &mut [Incoming],
    who: Option<&positions::Who>,
    output: &TableHandle,
) -> Result<Option<Loaded>> {
    if src.u.op.is_none() {
        return Ok(None);
    }
    let table = table_name(&src.cfg.job);
    // Loaded after the output's state: an anchor set before an inline commit that state
    // holds is seen here.
    let handle = ctx.side(&table).await?;
    let through = match output.exists() {
        true => pending::consolidated_through(&handle, &output.table_id()?)?,
        false => None,
    };
    let inline = match (through, output.version()) {
        (Some(after), Some(at)) => pending::read(output, after, at).await?,
        _ => vec![],
    };
    let inline: Vec<RecordBatch> = inline.into_iter().map(|(_, b)| b).collect();
    let tombs = load(&handle, &inline, &table, &src.key_enc, &src.order_enc).await?;
    let anchored = through.is_some();
    if tombs.is_empty() {
        return Ok(Some(Loaded { handle, anchored }));
    }
    let changes = match who {
        Some(who) => Some(RunColumns::of(&src.rows, who)?),
        None => None,
    };
    for inc in incoming.iter_mut() {
        let Some(tomb) = tombs.get(src.keys.row(inc.row as usize).data()) else {
            continue;
        };
        let cmp = tomb.order.as_slice().cmp(src.order_of(inc));
        if cmp.is_gt() || (cmp.is_eq() && !inc.delete) {
            if let (Some(c), Some((seq, at))) = (&changes, &tomb.seq_at) {
                c.check(inc.row as usize, (seq, Some(*at)))?;
            }
            inc.older = true;
        } else {
            inc.after = Some(tomb.order.clone());
        }
    }
    Ok(Some(Loaded { handle, anchored }))
}

/// The tombstone table as a plan loaded it.
pub(crate) struct Loaded {
    /// The table (its properties: the expiry horizon).
    pub handle: TableHandle,
    /// It holds the output's anchor: tombstones of the output's commits may be pending.
    pub anchored: bool,
}

/// CDC, after the winners met the output's rows: keep out a winner that is not a delete, has
/// neither an output row nor a tombstone, sorts at or below the expired tombstones' greatest
/// `__seq` ([`EXPIRED_THROUGH_PROPERTY`]) and was committed no later than the newest of them
/// was written ([`EXPIRED_AT_PROPERTY`]): it may be older than a forgotten delete of its key.
/// One committed after that cannot be; if its `__seq` still sorts below, the source's
/// positions went back (an error, [`positions`]). Plain-file `__seq`s (`0|<row time>|...`)
/// order by the rows' own times, which a back-fill may set in the past: never kept out.
/// Returns how many were kept out. `loaded`: the tombstone table as this plan loaded it
/// ([`keep_out_deleted`]), else it is loaded here.
pub(crate) async fn keep_out_forgotten(
    ctx: &RunContext<'_>,
    src: &IncomingRows<'_>,
    incoming: &mut [Incoming],
    who: &positions::Who,
    loaded: Option<&Loaded>,
) -> Result<usize> {
    let table = table_name(&src.cfg.job);
    let fresh;
    let handle = match loaded {
        Some(l) => &l.handle,
        None => {
            fresh = ctx.side(&table).await?;
            &fresh
        }
    };
    if !handle.exists() {
        return Ok(0);
    }
    let Some(horizon) = handle.property(EXPIRED_THROUGH_PROPERTY)? else {
        return Ok(0);
    };
    let horizon_at = handle
        .property(EXPIRED_AT_PROPERTY)?
        .and_then(|t| t.parse::<i64>().ok());
    let at = RecordBatch::try_from_iter([(
        bronze::SEQ,
        Arc::new(StringArray::from(vec![horizon.clone()])) as ArrayRef,
    )])?;
    let horizon_bytes = src.order_enc.encode(&at, &table)?.remove(0);
    let c = RunColumns::of(&src.rows, who)?;
    let mut kept_out = 0;
    for inc in incoming.iter_mut() {
        let row = inc.row as usize;
        let forgotten = !inc.older && !inc.delete && !inc.replaces && inc.after.is_none();
        if !forgotten
            || src.order_of(inc) > horizon_bytes.as_slice()
            || c.seq.value(row).starts_with("0|")
        {
            continue;
        }
        let committed_after = matches!((c.at[row], horizon_at), (Some(a), Some(h)) if a > h);
        if committed_after {
            c.check(row, (&horizon, horizon_at))?;
            continue;
        }
        inc.older = true;
        kept_out += 1;
    }
    Ok(kept_out)
}

/// The deletes that won, to be recorded as tombstones (in the output commit, or before it:
/// [`pending`]).
pub(crate) struct Deletes {
    rows: RecordBatch,
    columns: Vec<String>,
    ties: Vec<String>,
}

impl Deletes {
    /// The winners that are deletes and not older than the output (their tie texts computed
    /// into `ties`); `None` when there are none.
    pub(crate) fn of(
        src: &IncomingRows<'_>,
        incoming: &[Incoming],
        ties: &mut Ties,
    ) -> Result<Option<Self>> {
        let mut deleted: Vec<usize> = (0..incoming.len())
            .filter(|&w| !incoming[w].older && incoming[w].delete)
            .collect();
        src.fill_ties(incoming, ties, deleted.clone())?;
        deleted.sort_by_key(|&w| incoming[w].row);
        if deleted.is_empty() {
            return Ok(None);
        }
        let idx = UInt32Array::from(deleted.iter().map(|&w| incoming[w].row).collect::<Vec<_>>());
        Ok(Some(Self {
            rows: take_record_batch(&src.rows, &idx)?,
            // CDC: the delete's commit time too, to tell a change committed after it.
            columns: src
                .u
                .key
                .iter()
                .chain(&src.u.order_by)
                .cloned()
                .chain(
                    src.rows
                        .column_by_name(bronze::SOURCE_TS)
                        .map(|_| bronze::SOURCE_TS.to_string()),
                )
                .collect(),
            ties: deleted
                .iter()
                .map(|w| ties.get(w).cloned().unwrap_or_default())
                .collect(),
        }))
    }

    /// Record them in `job`'s tombstone table (today's `date` partition).
    pub(crate) async fn write(&self, ctx: &RunContext<'_>, job: &str) -> Result<()> {
        let today = ctx.now.format("%Y-%m-%d").to_string();
        let dates = vec![today; self.rows.num_rows()];
        let cols = (self.columns.as_slice(), self.ties.clone());
        write_in(ctx, &table_name(job), &self.rows, cols, dates).await
    }

    /// The tombstone rows as written to the table (today's `date` partition).
    pub(crate) fn dated(&self, now: DateTime<Utc>) -> Result<Option<RecordBatch>> {
        let today = now.format("%Y-%m-%d").to_string();
        let dates = vec![today; self.rows.num_rows()];
        dated_batch(&self.rows, (&self.columns, self.ties.clone()), now, dates)
    }
}
