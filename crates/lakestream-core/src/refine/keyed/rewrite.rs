//! The writes of an upsert run, all before its commit: the output's rows of the incoming keys
//! are compared with the winners (an older winner is kept out, a newer one replaces the row),
//! each file that loses a row is rewritten without it, streamed row group by row group into
//! the run's one writer, and the winners that are neither older nor deletes are written as new
//! rows through it: they share files, one per partition (one data PUT for a small table's
//! run), flushed early once [`REWRITE_FLUSH_BYTES`](super::REWRITE_FLUSH_BYTES) are written
//! (memory: the open files' row groups up to that). A CDC truncate also drops every
//! row older than it ([`Sweep`]), and a CDC apply keeps the dropped rows for the change data
//! feed.

use super::incoming::{Incoming, IncomingRows, Ties};
use super::order::{KeyIndex, tie_texts};
use super::target::{self, TargetFile};
use super::unchanged::{self, Drops, Resolved, Values};
use super::values::null_placeholders;
use crate::error::{Error, Result};
use crate::refine::cdc::positions::{self, RunColumns};
use crate::table::TableHandle;
use crate::table::parquet_read::with_partitions;
use deltalake::arrow::array::{AsArray, BooleanArray, RecordBatch, StringArray, UInt32Array};
use deltalake::arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::{Add, Remove};
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use futures::TryStreamExt;
use lakestream_formats::config::silver;
use std::collections::HashMap;

/// What a run does to the output besides replacing the incoming keys' rows.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sweep {
    /// A truncate: drop every row whose ordering bytes are below these (every file is read).
    pub truncate_before: Option<Vec<u8>>,
    /// Keep the rows dropped from the output (the old images of the change data feed).
    pub keep_dropped: bool,
    /// CDC: TOAST placeholders and changes that change nothing ([`unchanged`](super::unchanged)).
    pub values: Option<Values>,
    /// CDC: (job, bronze table, family) when a winner older than its row is checked for
    /// positions that went back ([`positions`](crate::refine::cdc::positions)).
    pub positions: Option<positions::Who>,
}

/// The files a run rewrote (their kept rows are in the writer, written out with the new rows
/// unless flushed early).
#[derive(Debug, Default)]
pub(crate) struct Replaced {
    /// Files flushed early (past [`REWRITE_FLUSH_BYTES`](super::REWRITE_FLUSH_BYTES)).
    pub adds: Vec<Add>,
    /// The removes of the files rewritten.
    pub removes: Vec<Remove>,
    /// The rows dropped from the output (in the output's schema), when [`Sweep::keep_dropped`].
    pub dropped: Vec<RecordBatch>,
    /// Winners' rows resolved against the rows they replace (CDC, [`Sweep::values`]).
    pub resolved: Resolved,
}

/// The output a run rewrites: its handle, its schema after the commit and the run's writer.
pub(crate) struct Output<'o> {
    /// The output at the planned snapshot.
    pub handle: &'o TableHandle,
    /// Its schema after the commit (files are read and written in it).
    pub schema: &'o SchemaRef,
    /// The run's one writer.
    pub writer: &'o mut RecordBatchWriter,
}

/// One output file's `__seq` and `__source_ts`, read once per file: SCD1 checks a winner at a
/// lower position than its key's row, committed after it ([`RunColumns::check`]).
struct FileTimes<'b> {
    seq: &'b StringArray,
    at: Vec<Option<i64>>,
}

impl<'b> FileTimes<'b> {
    fn of(batch: &'b RecordBatch) -> Result<Self> {
        Ok(Self {
            seq: batch
                .column_by_name(silver::SEQ)
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| Error::Internal("silver has no text `__seq`".into()))?,
            at: positions::times(batch, silver::SOURCE_TS)?,
        })
    }
}

/// The output files that can hold a winner's key (every file for a truncate).
fn candidate_files<'f>(
    src: &IncomingRows<'_>,
    incoming: &[Incoming],
    files: &'f [TargetFile],
    sweep: &Sweep,
) -> Result<Vec<&'f TargetFile>> {
    let key = &src.u.key[0];
    if sweep.truncate_before.is_some() {
        return Ok(files.iter().collect());
    }
    let first_key = src
        .rows
        .column_by_name(key)
        .ok_or_else(|| Error::Internal("key".into()))?;
    let winners_first = deltalake::arrow::compute::take(
        first_key,
        &UInt32Array::from(incoming.iter().map(|w| w.row).collect::<Vec<_>>()),
        None,
    )?;
    target::candidates(files, key, &winners_first)
}

/// The output columns a run reads to compare (keys, ordering, and `__source_ts` when CDC
/// checks positions), and the check.
fn target_columns<'s>(
    src: &'s IncomingRows<'_>,
    sweep: &'s Sweep,
    schema: &SchemaRef,
) -> Result<(Vec<String>, Option<RunColumns<'s>>)> {
    let u = src.u;
    let mut columns: Vec<String> = u.key.iter().chain(&u.order_by).cloned().collect();
    columns.dedup();
    let went_back = match &sweep.positions {
        Some(who) if schema.column_with_name(silver::SOURCE_TS).is_some() => {
            columns.push(silver::SOURCE_TS.to_string());
            Some(RunColumns::of(&src.rows, who)?)
        }
        _ => None,
    };
    Ok((columns, went_back))
}

/// A target row dropped by the truncate (not by an incoming key).
const TRUNCATED: usize = usize::MAX;

/// Compare the output's rows of the incoming keys (at `output`'s snapshot, read in `schema`)
/// with the winners: mark winners that lose as older and those that win as replacing, and
/// rewrite each file that loses a row (or, per `sweep`, a row older than a truncate) through
/// the output's writer.
pub(crate) async fn replace_older_rows(
    src: &IncomingRows<'_>,
    index: &KeyIndex<'_>,
    incoming: &mut [Incoming],
    ties: &mut Ties,
    out: Output<'_>,
    sweep: &Sweep,
) -> Result<Replaced> {
    let Output {
        handle: output,
        schema,
        writer,
    } = out;
    let (u, table) = (src.u, src.cfg.output.as_str());
    let files = target::live_files(output, &u.key[0])?;
    let candidates = candidate_files(src, incoming, &files, sweep)?;
    let (columns, went_back) = target_columns(src, sweep, schema)?;
    // Per candidate file: the rows (index in the file, index in `incoming`) it replaces.
    let mut drops: Drops = Default::default();
    for (fi, f) in candidates.iter().enumerate() {
        let batch = target::read_columns(output, f, schema, &columns).await?;
        let ek = src.key_enc.rows(&batch, table)?;
        let eo = src.order_enc.rows(&batch, table)?;
        let mut tied = Vec::new();
        let mut file_times: Option<FileTimes<'_>> = None;
        for i in 0..ek.num_rows() {
            if let Some(t) = &sweep.truncate_before
                && eo.row(i).data() < t.as_slice()
            {
                drops.entry(fi).or_default().push((i, TRUNCATED));
                continue;
            }
            let Some(&w) = index.get(ek.row(i).data()) else {
                continue;
            };
            match eo.row(i).data().cmp(src.order_of(&incoming[w])) {
                std::cmp::Ordering::Greater => {
                    if let Some(check) = &went_back {
                        if file_times.is_none() {
                            file_times = Some(FileTimes::of(&batch)?);
                        }
                        if let Some(f) = &file_times {
                            check.check(incoming[w].row as usize, (f.seq.value(i), f.at[i]))?;
                        }
                    }
                    incoming[w].older = true
                }
                std::cmp::Ordering::Less => {
                    let o = eo.row(i).data();
                    if incoming[w].after.as_deref().is_none_or(|a| a < o) {
                        incoming[w].after = Some(o.to_vec());
                    }
                    drops.entry(fi).or_default().push((i, w))
                }
                // At equal ordering values a delete wins (it carries the row's last image).
                std::cmp::Ordering::Equal if incoming[w].delete => {
                    drops.entry(fi).or_default().push((i, w))
                }
                std::cmp::Ordering::Equal => tied.push((i, w)),
            }
        }
        if !tied.is_empty() {
            src.fill_ties(incoming, ties, tied.iter().map(|t| t.1).collect())?;
            let all = target::read_all(output, f, schema).await?;
            let as_incoming = with_partitions(&src.stored_schema, &all, &HashMap::new())?;
            let idx: Vec<usize> = tied.iter().map(|t| t.0).collect();
            for ((i, w), text) in tied.into_iter().zip(tie_texts(&as_incoming, &idx)?) {
                if Some(&text) >= ties.get(&w) {
                    incoming[w].older = true;
                } else {
                    drops.entry(fi).or_default().push((i, w));
                }
            }
        }
    }
    // CDC: placeholders resolved against the replaced rows; a winner equal to its row keeps it.
    let resolved = unchanged::check(
        src,
        incoming,
        (output, &candidates, schema),
        &mut drops,
        TRUNCATED,
        sweep,
    )
    .await?;
    let out = Replaced {
        resolved,
        ..Default::default()
    };
    let out_files = Output {
        handle: output,
        schema,
        writer,
    };
    rewrite_losers(incoming, &candidates, &drops, out_files, sweep, out).await
}

/// Rewrite each candidate file without the rows it loses (`drops`): a truncated row, or one a
/// winner replaces (a key whose incoming row lost to a newer one keeps all its rows).
async fn rewrite_losers(
    incoming: &mut [Incoming],
    candidates: &[&TargetFile],
    drops: &Drops,
    files: Output<'_>,
    sweep: &Sweep,
    mut out: Replaced,
) -> Result<Replaced> {
    let Output {
        handle: output,
        schema,
        writer,
    } = files;
    for (fi, f) in candidates.iter().enumerate() {
        let Some(rows) = drops.get(&fi) else { continue };
        let mut drop = Vec::new();
        for &(i, w) in rows {
            if w == TRUNCATED {
                drop.push(i);
            } else if !incoming[w].older {
                incoming[w].replaces = true;
                drop.push(i);
            }
        }
        drop.sort_unstable();
        drop.dedup();
        if drop.is_empty() {
            continue;
        }
        let dropped = sweep.keep_dropped.then_some(&mut out.dropped);
        rewrite_without(writer, output, f, schema, &drop, dropped).await?;
        out.removes.push(f.remove.clone());
        if writer.buffer_len() >= super::REWRITE_FLUSH_BYTES {
            let flushed = writer
                .flush()
                .await
                .map_err(|e| Error::storage(output.name(), e))?;
            out.adds.extend(flushed);
        }
    }
    Ok(out)
}

/// Write the winners that are neither older than what the output has nor deletes, in
/// `schema`, through `writer`, then flush it: the files (holding the rewritten files' kept rows
/// too, see [`rewrite_without`]) and the rows written. CDC (`values`):
/// a winner's `resolved` row is written instead of its source row, and a placeholder left
/// (no previous value) is written as null.
pub(crate) async fn write_new_rows(
    src: &IncomingRows<'_>,
    incoming: &[Incoming],
    schema: &SchemaRef,
    writer: &mut RecordBatchWriter,
    (resolved, values): (&Resolved, Option<&Values>),
) -> Result<(Vec<Add>, Option<RecordBatch>)> {
    let table = src.cfg.output.as_str();
    // (winner's row, the row written: CDC, the change that started its version).
    let mut upserts: Vec<(u32, u32)> = incoming
        .iter()
        .filter(|w| !w.older && !w.delete)
        .map(|w| (w.row, w.row))
        .collect();
    upserts.sort_unstable();
    if upserts.is_empty() {
        // The rewritten files' rows (buffered by `rewrite_without`) still go out.
        let adds = writer.flush().await.map_err(|e| Error::storage(table, e))?;
        return Ok((adds, None));
    }
    let written: Vec<u32> = upserts.iter().map(|u| u.1).collect();
    let rows = take_record_batch(&src.stored, &UInt32Array::from(written))?;
    let mut rows = with_partitions(schema, &rows, &HashMap::new())?;
    if let Some(better) = &resolved.rows {
        let n = rows.num_rows();
        let idx: Vec<u32> = upserts
            .iter()
            .enumerate()
            .map(|(k, (w, _))| resolved.at.get(w).map_or(k, |&j| n + j) as u32)
            .collect();
        let both = concat_batches(schema, [&rows, better])?;
        rows = take_record_batch(&both, &UInt32Array::from(idx))?;
    }
    if let Some(Values {
        toast: Some(toast),
        keys,
        ..
    }) = values
    {
        rows = null_placeholders(&rows, toast, keys)?;
    }
    // In slices, each file ending past REWRITE_FLUSH_BYTES: a run of a million new rows
    // writes files of ~32 MiB in row groups of ROW_GROUP_BYTES, not one file of one group.
    let mut adds = crate::table::parquet_write::write_sliced_flushing(
        writer,
        &rows,
        super::REWRITE_FLUSH_BYTES,
    )
    .await
    .map_err(|e| Error::storage(table, e))?;
    adds.extend(writer.flush().await.map_err(|e| Error::storage(table, e))?);
    Ok((adds, Some(rows)))
}

/// Rows per batch read while rewriting (parquet's default of 1,024 made the per-batch work
/// of filtering and writing a third of the rewrite).
const REWRITE_BATCH_ROWS: usize = 8192;

/// Rewrite `f` without the rows whose index (in file order) is in `drop` (sorted), streaming
/// row group by row group into `writer`, not flushed: every file a run rewrites and its new
/// rows go out together ([`write_new_rows`] flushes; the caller flushes early past
/// [`REWRITE_FLUSH_BYTES`](super::REWRITE_FLUSH_BYTES)), one file per partition (was a file
/// per rewritten file plus one for the new rows: 2-3 data PUTs per CDC apply instead of one).
/// The dropped rows go to `dropped` when given.
async fn rewrite_without(
    writer: &mut RecordBatchWriter,
    output: &TableHandle,
    f: &TargetFile,
    schema: &SchemaRef,
    drop: &[usize],
    mut dropped: Option<&mut Vec<RecordBatch>>,
) -> Result<()> {
    let table = output.name();
    let mut stream = output.stream_file(&f.file, REWRITE_BATCH_ROWS).await?;
    let mut offset = 0usize;
    while let Some(batch) = stream.try_next().await? {
        let n = batch.num_rows();
        let mut keep = vec![true; n];
        let start = drop.partition_point(|&i| i < offset);
        for &i in drop[start..].iter().take_while(|&&i| i < offset + n) {
            keep[i - offset] = false;
        }
        let keep = BooleanArray::from(keep);
        offset += n;
        if let Some(out) = dropped.as_deref_mut() {
            let gone = filter_record_batch(&batch, &deltalake::arrow::compute::not(&keep)?)?;
            if gone.num_rows() > 0 {
                out.push(with_partitions(schema, &gone, f.partitions())?);
            }
        }
        let batch = with_partitions(schema, &filter_record_batch(&batch, &keep)?, f.partitions())?;
        if batch.num_rows() > 0 {
            writer
                .write(batch)
                .await
                .map_err(|e| Error::storage(table, e))?;
        }
    }
    Ok(())
}
