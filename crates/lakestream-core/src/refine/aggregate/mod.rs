//! The aggregate kind (a gold table, `[refine.aggregate]`): one output row per group of a
//! source, kept exact incrementally (ARCHITECTURE.md "Refine: aggregate"). One run, step by
//! step, on the one commit loop:
//! 1. what the source did since the output's `txn` ([`changes`]): rows its commits added and
//!    retracted (its change data feed where a commit has one, else the rows of the files it
//!    added and removed with `dataChange=true`; compaction changes nothing). The first run reads
//!    the source's snapshot instead of replaying its history;
//! 2. fold them, signed, into one delta per touched group ([`groups`]);
//! 3. read the output files that can hold touched groups (pruned by partition values,
//!    [`prune`]) and merge each touched group's stored state with its delta: counts and sums
//!    add up, a group with no rows left goes, and a group whose `min`/`max` lost its extreme is
//!    recomputed from the source at the version consumed, reading only files that can hold it
//!    (partition values and statistics);
//! 4. rewrite only the output files holding touched groups, write the new groups, and commit
//!    removes + adds + the source `txn` in one commit (read scope: the table, so a concurrent
//!    run or compaction of the output makes it re-plan; a replay finds its `txn` and writes
//!    nothing).

pub(crate) mod changes;
mod filter;
pub(crate) mod groups;
mod prune;
mod rows;
mod spec;

use super::context::{JOB_PROPERTY, RunContext, source_id_property};
use super::report::{AggregateCounts, RunCounts, RunReport, SideReport};
use super::source::ChunkLimits;
use crate::commit::change::keyed_merge;
use crate::commit::{Change, ChangePlanner, NewTable, Proposal, ReadScope, TableState, run};
use crate::error::{Error, Result};
use crate::read::with_partitions;
use crate::refine::keyed::target;
use crate::table::TableHandle;
use changes::{next_changes, read_signed};
use deltalake::arrow::array::{BooleanArray, RecordBatch};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::{Remove, Transaction};
use deltalake::writer::DeltaWriter;
use groups::{Evaluator, Groups, Outcome};
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::aggregate::AggregateConfig;
use prune::Wanted;
use spec::{SPEC_PROPERTY, same_spec, source_columns, spec};

/// Run the aggregate once on the one commit loop (re-planned from a fresh snapshot on
/// conflict).
pub(crate) async fn run_once(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    a: &AggregateConfig,
    mut output: TableHandle,
) -> Result<RunReport> {
    let mut planner = AggregatePlanner {
        ctx,
        cfg,
        a,
        app: ctx.app_id(&cfg.job, &a.source),
        report: empty_report(),
    };
    let ran = run(&mut output, ctx.settings, &mut planner).await?;
    let mut report = planner.report;
    report.attempts = ran.attempts;
    report.output_version = ran.landed.map(|l| l.version);
    Ok(report)
}

fn empty_report() -> RunReport {
    RunReport::new(RunCounts::Aggregate(AggregateCounts::default()))
}

struct AggregatePlanner<'a, 'c> {
    ctx: &'a RunContext<'c>,
    cfg: &'a RefineJob,
    a: &'a AggregateConfig,
    app: String,
    report: RunReport,
}

impl ChangePlanner for AggregatePlanner<'_, '_> {
    fn app_ids(&self) -> Vec<String> {
        vec![self.app.clone()]
    }

    async fn plan(&mut self, output: &TableHandle, state: &TableState) -> Result<Option<Proposal>> {
        self.report = empty_report();
        let consumed = state
            .committed
            .get(&self.app)
            .and_then(|v| u64::try_from(*v).ok());
        let (ctx, cfg, a) = (self.ctx, self.cfg, self.a);
        let source = ctx.load_source_at_least(&a.source, consumed).await?;
        if !source.exists() {
            self.report.waiting_for = Some(a.source.clone());
            return Ok(None);
        }
        let partition_by = if state.version.is_some() {
            output.partition_columns()?
        } else {
            cfg.partition_by.clone()
        };
        let refuse = |reason: String| Error::Source {
            job: cfg.job.clone(),
            table: a.source.clone(),
            reason,
        };
        if state.version.is_some() && consumed.is_none() {
            // Folding the snapshot into existing groups would count every row twice.
            return Err(refuse(format!(
                "the output `{}` exists but records no consumption of this source (its `txn` \
                 expired, or the job's source was renamed): rebuild it (delete the output table \
                 and run the job again)",
                cfg.output
            )));
        }
        let columns = source_columns(&source, a)?;
        let ev = Evaluator::new(&cfg.job, a, &columns, &partition_by)?;
        if state.version.is_some() {
            same_spec(output, a, &ev).map_err(refuse)?;
        }
        let latest = source.version().unwrap_or(0);
        let source_id = source.table_id()?;
        let mut delta = Groups::default();
        let mut counts = AggregateCounts::default();
        let (files, rows_read, end) = match consumed {
            None => {
                let (files, rows) = fold_snapshot(&source, &columns, &ev, &mut delta, None).await?;
                (files, rows, latest)
            }
            Some(after) => {
                let ch = next_changes(&cfg.job, &source, after, ChunkLimits::of(cfg)).await?;
                if ch.end == after {
                    return Ok(None);
                }
                let mut rows = 0;
                for f in &ch.files {
                    for (batch, signs) in read_signed(&cfg.job, &source, f, &columns, after).await?
                    {
                        rows += batch.num_rows();
                        counts.retracted += signs.iter().filter(|s| **s < 0).count();
                        ev.fold(&batch, &signs, &mut delta, None)?;
                    }
                }
                (ch.files.len(), rows, ch.end)
            }
        };
        self.report.sides = vec![SideReport {
            table: a.source.clone(),
            from: consumed,
            to: Some(end),
            latest,
            files,
            rows: rows_read,
            late: 0,
        }];

        // The output files that can hold a touched group, and the groups' stored states.
        let out_schema: SchemaRef = match state.version {
            Some(_) => output.arrow_schema()?,
            None => target::nullable_partitions(&ev.output_schema(), &partition_by),
        };
        let mut stored = Groups::default();
        let mut kept: Vec<RecordBatch> = Vec::new();
        let mut removes: Vec<Remove> = Vec::new();
        if state.version.is_some() && delta.len() > 0 {
            let names: Vec<String> = a.group_by.iter().map(|g| g.name.clone()).collect();
            let wanted = Wanted::new(
                &ev,
                &names,
                &delta.keys,
                |c| partition_by.iter().any(|p| p == c),
                true,
            )?;
            let store = output.table().object_store();
            let first = names[0].clone();
            for f in target::live_files(output, &first)? {
                if !wanted.may_hold(&f.partitions, &None) {
                    continue;
                }
                let batch = target::read_all(&store, &f, &out_schema, &cfg.output).await?;
                let (keys, accs) = ev.stored(&batch)?;
                let mut keep = Vec::with_capacity(batch.num_rows());
                for (i, acc) in accs.into_iter().enumerate() {
                    let key = keys.row(i);
                    let touched = delta.get(key.data()).is_some();
                    keep.push(!touched);
                    if touched {
                        stored.put(key.data().to_vec(), acc);
                    }
                }
                if keep.iter().all(|k| *k) {
                    continue;
                }
                kept.push(filter_record_batch(&batch, &BooleanArray::from(keep))?);
                removes.push(f.remove.clone());
            }
        }

        // Merge; groups whose extreme was retracted are recomputed from the source at `end`.
        let mut results: Vec<(Vec<u8>, groups::Acc)> = Vec::new();
        let mut recompute = Groups::default();
        for (key, d) in delta.keys.iter().zip(&delta.accs) {
            let old = stored.get(key);
            match ev.merge(old, d)? {
                Outcome::Keep(acc) => {
                    if old.is_some() {
                        counts.updated += 1;
                    } else {
                        counts.inserted += 1;
                    }
                    results.push((key.clone(), acc));
                }
                Outcome::Gone => {
                    if old.is_some() {
                        counts.deleted += 1;
                    }
                }
                Outcome::Recompute => recompute.put(key.clone(), ev.fresh()),
            }
        }
        if recompute.len() > 0 {
            counts.recomputed = recompute.len();
            let at_end = if end == latest {
                source
            } else {
                // From the kept handle when there is one: its log-read cache answers the
                // commit files of the time travel.
                let mut h = match ctx.warm {
                    Some(_) => ctx.load_source(&a.source).await?,
                    None => TableHandle::open(ctx.lake, &a.source)?,
                };
                h.table_mut()
                    .load_version(end)
                    .await
                    .map_err(|e| Error::storage(&a.source, e))?;
                h
            };
            at_end.refuse_deletion_vectors()?;
            let mut fresh = Groups::default();
            let (read, _) =
                fold_snapshot(&at_end, &columns, &ev, &mut fresh, Some(&recompute)).await?;
            counts.recompute_files = read;
            for key in &recompute.keys {
                let had = stored.get(key).is_some();
                match fresh.get(key).filter(|acc| acc.rows > 0) {
                    Some(acc) => {
                        if had {
                            counts.updated += 1;
                        } else {
                            counts.inserted += 1;
                        }
                        results.push((key.clone(), acc.clone()));
                    }
                    None if had => counts.deleted += 1,
                    None => {}
                }
            }
        }

        // Write the kept rows of rewritten files and the touched groups' new rows.
        let mut adds = Vec::new();
        let new_rows = {
            let keys: Vec<&[u8]> = results.iter().map(|(k, _)| k.as_slice()).collect();
            let accs: Vec<&groups::Acc> = results.iter().map(|(_, a)| a).collect();
            ev.to_batch(&keys, &accs)?
        };
        if new_rows.num_rows() > 0 || !kept.is_empty() {
            let mut writer = crate::commit::batch_writer(
                ctx.lake,
                &cfg.output,
                out_schema.clone(),
                partition_by.clone(),
            )?;
            for b in kept.iter().chain(std::iter::once(&new_rows)) {
                if b.num_rows() == 0 {
                    continue;
                }
                let b = with_partitions(&out_schema, b, &Default::default())?;
                writer
                    .write(b)
                    .await
                    .map_err(|e| Error::storage(&cfg.output, e))?;
            }
            adds = writer
                .flush()
                .await
                .map_err(|e| Error::storage(&cfg.output, e))?;
        }
        self.report.counts = RunCounts::Aggregate(counts);
        Ok(Some(proposal(
            ctx,
            cfg,
            a,
            state,
            out_schema,
            partition_by,
            adds,
            removes,
            end,
            source_id,
        )))
    }
}

/// Fold every live row of `source` (at its loaded version) into `groups` (only those of
/// `only`, reading only files that can hold them): the files and rows read.
async fn fold_snapshot(
    source: &TableHandle,
    columns: &SchemaRef,
    ev: &Evaluator,
    groups: &mut Groups,
    only: Option<&Groups>,
) -> Result<(usize, usize)> {
    let names: Vec<&str> = columns.fields().iter().map(|f| f.name().as_str()).collect();
    let partition_columns = source.partition_columns()?;
    let wanted = match only {
        Some(o) => {
            let group_names: Vec<String> =
                ev.exprs().iter().map(|e| e.column().to_string()).collect();
            Some(Wanted::new(
                ev,
                &group_names,
                &o.keys,
                |c| partition_columns.iter().any(|p| p == c),
                false,
            )?)
        }
        None => None,
    };
    let files = std::cell::Cell::new(0usize);
    let mut rows = 0usize;
    crate::read::scan_live_files(
        source,
        &names,
        |parts, stats| {
            let keep = wanted.as_ref().is_none_or(|w| w.may_hold(parts, stats));
            if keep {
                files.set(files.get() + 1);
            }
            keep
        },
        |batch, parts| {
            let b = with_partitions(columns, batch, parts)?;
            rows += b.num_rows();
            ev.fold(&b, &vec![1; b.num_rows()], groups, only)
        },
    )
    .await?;
    Ok((files.get(), rows))
}

/// The commit: removes + adds + the source `txn`, recorded as a merge; how a new output is
/// created (job and source table id properties).
#[allow(clippy::too_many_arguments)]
fn proposal(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    a: &AggregateConfig,
    state: &TableState,
    schema: SchemaRef,
    partition_columns: Vec<String>,
    adds: Vec<deltalake::kernel::Add>,
    removes: Vec<Remove>,
    end: u64,
    source_id: String,
) -> Proposal {
    let groups: Vec<String> = a.group_by.iter().map(|g| g.name.clone()).collect();
    let change = Change {
        read_version: state.version,
        properties: vec![],
        operation: keyed_merge(&groups, "group touched by the source's changes".into()),
        adds,
        removes,
        txns: vec![Transaction::new(
            ctx.app_id(&cfg.job, &a.source),
            end as i64,
        )],
        scope: ReadScope::Table,
        cdc_files: vec![],
    };
    let create = NewTable {
        partition_columns,
        configuration: vec![
            (
                "delta.checkpointInterval".into(),
                ctx.settings.checkpoint_interval.to_string(),
            ),
            (JOB_PROPERTY.into(), cfg.job.clone()),
            (source_id_property(&a.source), source_id),
            (SPEC_PROPERTY.into(), spec(a)),
        ],
        change_data_feed: false,
    };
    Proposal {
        change,
        schema,
        create: Some(create),
    }
}
