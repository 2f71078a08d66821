//! SCD type 1: the latest change per key by `__seq`, applied with the upsert's machinery
//! (copy-on-write, files pruned by key statistics, tombstones as the side write, one commit
//! with the source `txn`): the job is an upsert keyed on the CDC keys, ordered by `__seq`,
//! with `__op = d` as its delete, `__op` and `__ingested_at` not stored. What CDC adds:
//! - a truncate (`__op = t`) newer than the silver's `lakestream.cdc.truncated_at` drops every
//!   silver row with a smaller `__seq` and records its `__seq` there in the same commit; a
//!   change with `__seq <= truncated_at` is void;
//! - silver is created with the change data feed on, and every commit carries the feed rows
//!   of the touched keys ([`feed`](super::feed)) as `_change_data/` files, except a commit that
//!   only inserts (no file rewritten): readers derive its rows from its adds, as the protocol
//!   says ([`derivable_from_actions`]).

use super::changes::{ChangeRead, read_changes};
use super::feed;
use crate::commit::{
    TableState, derivable_from_actions, write_change_data, write_empty_change_data,
};
use crate::error::{Error, Result};
use crate::refine::context::RunContext;
use crate::refine::keyed::incoming::IncomingRows;
use crate::refine::keyed::rewrite::Sweep;
use crate::refine::keyed::unchanged::Values;
use crate::refine::keyed::values::{self, Before, Toast};
use crate::refine::keyed::{self, KeyedPlan, Planned, empty_report};
use crate::refine::rebuild::voided_truncates;
use crate::refine::report::RunReport;
use crate::table::TableHandle;
use deltalake::arrow::array::{ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::row::{RowConverter, SortField};
use lakestream_formats::config::{bronze, silver};
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::cdc::CdcApply;
use lakestream_formats::refine::upsert::{OpConfig, UpsertConfig};
use std::sync::Arc;

/// One SCD1 apply run on the one commit loop.
pub(crate) async fn run_once(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    apply: &CdcApply,
    output: TableHandle,
) -> Result<RunReport> {
    let app = ctx.app_id(&cfg.job, &apply.source);
    let plan = Scd1Plan { ctx, cfg, apply };
    let expire = Some(keyed::Expiry {
        retention: apply.tombstone_retention,
        horizon: Some((bronze::SEQ, bronze::SOURCE_TS)),
    });
    keyed::run_keyed(ctx, &cfg.job, app, plan, output, expire).await
}

/// The upsert an SCD1 apply is: keyed on `keys`, ordered by `__seq`, `d` deletes.
pub(crate) fn as_upsert(apply: &CdcApply, keys: Vec<String>) -> UpsertConfig {
    UpsertConfig {
        source: apply.source.clone(),
        key: keys,
        order_by: vec![bronze::SEQ.to_string()],
        op: Some(OpConfig {
            column: bronze::OP.to_string(),
            delete: vec![bronze::OP_DELETE.to_string()],
            keep: false,
        }),
        tombstone_retention: apply.tombstone_retention,
    }
}

struct Scd1Plan<'a, 'c> {
    ctx: &'a RunContext<'c>,
    cfg: &'a RefineJob,
    apply: &'a CdcApply,
}

impl KeyedPlan for Scd1Plan<'_, '_> {
    async fn plan(
        &mut self,
        output: &TableHandle,
        state: &TableState,
        consumed: Option<u64>,
    ) -> Result<Planned> {
        let (ctx, cfg, apply) = (self.ctx, self.cfg, self.apply);
        let mut report = empty_report();
        let Some(ChangeRead {
            read,
            keys,
            changes,
        }) = read_changes(ctx, cfg, apply, (consumed, &voided_truncates(output)?)).await?
        else {
            report.waiting_for = Some(apply.source.clone());
            return Ok(Planned::Nothing(report));
        };
        if !read.chunk.advanced() {
            return Ok(Planned::Nothing(report));
        }
        // A first run (a new or rebuilt silver) reads every truncate from bronze's snapshot:
        // the silver's record of earlier ones (ranked under other resets, perhaps) is not used.
        let incremental = state.version.is_some() && consumed.is_some();
        let before = if incremental {
            truncated_at(output)?
        } else {
            None
        };
        let before_time = match incremental {
            true => output.property(TRUNCATED_AT_TIME_PROPERTY)?,
            false => None,
        }
        .and_then(|t| t.parse::<i64>().ok());
        let run_truncates = truncates_of(&changes)?;
        // The newest truncate of the run (by `__seq`), whose time silver records with it.
        let newest_time = run_truncates.iter().max().and_then(|t| t.1);
        let mut truncates: Vec<(&str, Option<i64>)> = run_truncates;
        if let Some(b) = before.as_deref() {
            truncates.push((b, before_time));
        }
        let who = super::changes::who(cfg, apply);
        super::positions::check_truncates(&changes, &truncates, who)?;
        let (rows, truncate) = apply_truncate(&changes, before.as_deref())?;
        let toast = apply.toast_placeholder.as_deref().map(Toast::new);
        let same_key = same_key(&rows, &keys)?;
        let rows = match &toast {
            Some(toast) => resolve_in_run(&rows, &keys, &same_key, toast)?,
            None => rows,
        };
        let values = Values {
            toast,
            keys: keys.clone(),
        };
        let u = as_upsert(apply, keys);
        let src = IncomingRows::of_rows(cfg, &u, read, rows, &[bronze::INGESTED_AT], &[])?;
        let sweep = Sweep {
            truncate_before: match &truncate {
                Some(t) => Some(seq_bytes(&src, t)?),
                None => None,
            },
            keep_dropped: true,
            values: Some(values),
            positions: Some((cfg.job.clone(), apply.source.clone(), apply.family.clone())),
        };
        let (mut plan, images) = keyed::plan(ctx, &src, output, state, consumed, &sweep).await?;
        if let Some(t) = truncate {
            let props = &mut plan.proposal.change.properties;
            props.push((silver::TRUNCATED_AT_PROPERTY.to_string(), t));
            // Always with the truncate it describes (empty: that truncate had no time).
            let at = newest_time.map(|t| t.to_string()).unwrap_or_default();
            props.push((TRUNCATED_AT_TIME_PROPERTY.to_string(), at));
        }
        let resets = super::positions::resets_property(output, &apply.position_resets)?;
        plan.proposal.change.properties.extend(resets);
        // Silver has the change data feed on; each commit carries its touched keys' rows.
        // An apply that only inserts writes none: readers derive its rows from its adds.
        if let Some(rows) = feed::change_rows(&src.key_enc, &cfg.output, &images)? {
            let change = &plan.proposal.change;
            if !derivable_from_actions(&change.adds, &change.removes, &rows) {
                plan.proposal.change.cdc_files =
                    write_change_data(ctx.lake, &cfg.output, images.schema.clone(), &[], &rows)
                        .await?;
            }
        } else if plan.proposal.change.removes.iter().any(|r| r.data_change) {
            // Rows rewritten with their values unchanged (only `__seq` moved): no feed rows.
            let store = output.object_store();
            let empty = write_empty_change_data(&store, &cfg.output, &images.schema).await?;
            plan.proposal.change.cdc_files = vec![empty];
        }
        if let Some(create) = plan.proposal.create.as_mut() {
            create.change_data_feed = true;
        }
        Ok(Planned::Commit(Box::new(plan)))
    }
}

/// Per change (sorted by key then `__seq`): whether the previous one is of the same key.
fn same_key(rows: &RecordBatch, keys: &[String]) -> Result<Vec<bool>> {
    let columns = keys
        .iter()
        .map(|k| {
            rows.column_by_name(k)
                .cloned()
                .ok_or_else(|| Error::Internal(format!("changes have no key column `{k}`")))
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let fields = columns
        .iter()
        .map(|c| SortField::new(c.data_type().clone()));
    let encoded = RowConverter::new(fields.collect())?.convert_columns(&columns)?;
    Ok((0..rows.num_rows())
        .map(|i| i > 0 && encoded.row(i) == encoded.row(i - 1))
        .collect())
}

/// The changes' `__op` is a delete, change by change.
fn deletes(rows: &RecordBatch) -> Result<Vec<bool>> {
    let op = rows
        .column_by_name(bronze::OP)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| Error::Internal("changes have no text `__op`".into()))?;
    Ok((0..rows.num_rows())
        .map(|i| op.value(i) == bronze::OP_DELETE)
        .collect())
}

/// The run's changes (sorted by key then `__seq`) with their TOAST placeholders resolved
/// against the key's earlier change in the run: after a delete they are null; in the key's
/// first change they stay, to take the silver row's values in the rewrite
/// ([`unchanged`](crate::refine::keyed::unchanged)).
fn resolve_in_run(
    rows: &RecordBatch,
    keys: &[String],
    same_key: &[bool],
    toast: &Toast,
) -> Result<RecordBatch> {
    let mut steps = Vec::new();
    let mut before = Before::Unknown;
    for (i, delete) in deletes(rows)?.into_iter().enumerate() {
        if !same_key[i] {
            before = Before::Unknown;
        }
        if delete {
            before = Before::Nothing;
        } else {
            steps.push((i, before));
            before = Before::Row(i);
        }
    }
    values::resolve(rows, toast, keys, &steps)
}

/// Silver property: the commit time (µs) of the truncate `lakestream.cdc.truncated_at` names,
/// when it had one: a change committed after it but ranked below it proves the source's
/// positions went back ([`positions::check_truncates`](super::positions::check_truncates)).
pub(crate) const TRUNCATED_AT_TIME_PROPERTY: &str = "lakestream.cdc.truncated_at_time";

/// The run's truncates: (`__seq`, commit time).
fn truncates_of(changes: &RecordBatch) -> Result<Vec<(&str, Option<i64>)>> {
    let col = |name: &str| -> Result<&StringArray> {
        changes
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| Error::Internal(format!("changes have no text `{name}`")))
    };
    let (op, seq) = (col(bronze::OP)?, col(bronze::SEQ)?);
    let at = super::positions::times(changes, bronze::SOURCE_TS)?;
    Ok((0..changes.num_rows())
        .filter(|&i| op.value(i) == bronze::OP_TRUNCATE)
        .map(|i| (seq.value(i), at[i]))
        .collect())
}

/// The silver's `lakestream.cdc.truncated_at` (the `__seq` of the last truncate applied).
fn truncated_at(output: &TableHandle) -> Result<Option<String>> {
    // Empty: none (a `--void-truncate` reset cleared it).
    Ok(output
        .property(silver::TRUNCATED_AT_PROPERTY)?
        .filter(|t| !t.is_empty()))
}

/// The changes that still apply after the truncates (those of the table, `before`, and the
/// newest in `changes`): truncate rows and every change with `__seq <=` the newest truncate are
/// dropped. Also the chunk's truncate when it is newer than `before` (it sweeps the silver).
fn apply_truncate(
    changes: &RecordBatch,
    before: Option<&str>,
) -> Result<(RecordBatch, Option<String>)> {
    let col = |name: &str| -> Result<&StringArray> {
        changes
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| Error::Internal(format!("changes have no text `{name}`")))
    };
    let (op, seq) = (col(bronze::OP)?, col(bronze::SEQ)?);
    let newest = (0..changes.num_rows())
        .filter(|&i| op.value(i) == bronze::OP_TRUNCATE)
        .map(|i| seq.value(i))
        .max();
    let newer = newest.filter(|t| before.is_none_or(|b| *t > b));
    let cut = newer.or(before);
    if newest.is_none() && cut.is_none() {
        return Ok((changes.clone(), None));
    }
    let keep: BooleanArray = (0..changes.num_rows())
        .map(|i| Some(op.value(i) != bronze::OP_TRUNCATE && cut.is_none_or(|c| seq.value(i) > c)))
        .collect();
    Ok((
        filter_record_batch(changes, &keep)?,
        newer.map(str::to_string),
    ))
}

/// The ordering bytes of `__seq` value `seq` (as the upsert compares the output's rows).
fn seq_bytes(src: &IncomingRows<'_>, seq: &str) -> Result<Vec<u8>> {
    let batch = RecordBatch::try_from_iter([(
        bronze::SEQ,
        Arc::new(StringArray::from(vec![seq])) as ArrayRef,
    )])?;
    src.order_enc
        .encode(&batch, &src.cfg.output)?
        .pop()
        .ok_or_else(|| Error::Internal("no encoded sequence".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(ops: &[&str], seqs: &[&str]) -> RecordBatch {
        RecordBatch::try_from_iter([
            (
                bronze::OP,
                Arc::new(StringArray::from(ops.to_vec())) as ArrayRef,
            ),
            (
                bronze::SEQ,
                Arc::new(StringArray::from(seqs.to_vec())) as ArrayRef,
            ),
        ])
        .unwrap_or_else(|_| {
            RecordBatch::new_empty(Arc::new(deltalake::arrow::datatypes::Schema::empty()))
        })
    }

    fn seqs(b: &RecordBatch) -> Vec<String> {
        b.column(1)
            .as_string::<i32>()
            .iter()
            .flatten()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_truncate_voids_older_changes_and_sweeps_only_when_newer() -> Result<()> {
        let c = changes(&["c", "t", "u", "c", "t"], &["1", "3", "4", "2", "5"]);
        let (rows, t) = apply_truncate(&c, None)?;
        assert_eq!(seqs(&rows), Vec::<String>::new());
        assert_eq!(t.as_deref(), Some("5"));
        let c = changes(&["c", "t", "u"], &["1", "3", "4"]);
        let (rows, t) = apply_truncate(&c, Some("2"))?;
        assert_eq!(
            (seqs(&rows), t.as_deref()),
            (vec!["4".to_string()], Some("3"))
        );
        // An older truncate than the table's is void; the table's still voids older changes.
        let (rows, t) = apply_truncate(&c, Some("3"))?;
        assert_eq!((seqs(&rows), t), (vec!["4".to_string()], None));
        Ok(())
    }
}
