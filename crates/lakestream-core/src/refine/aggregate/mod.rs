//! The aggregate kind (a gold table, `[refine.aggregate]`): one output row per group of a
//! source, kept exact incrementally (ARCHITECTURE.md "Refine: aggregate"). One run, step by
//! step, on the one commit loop:
//! 1. what the source did since the output's `txn` ([`changes`]): rows its commits added and
//!    retracted (its change data feed where a commit has one, else the rows of the files it
//!    added and removed with `dataChange=true`; compaction changes nothing). The first run reads
//!    the source's snapshot instead of replaying its history;
//! 2. fold them, signed, into one delta per touched group ([`groups`], [`fold`]);
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
mod float;
mod fold;
pub(crate) mod groups;
mod merge;
mod prune;
mod rows;
mod spec;
#[cfg(test)]
mod tests;

use super::chunk::ChunkLimits;
use super::context::{JOB_PROPERTY, RunContext, source_id_property};
use super::report::{AggregateCounts, RunCounts, RunReport, SideReport};
use crate::commit::change::keyed_merge;
use crate::commit::{Change, ChangePlanner, NewTable, Proposal, ReadScope, TableState, run};
use crate::error::{Error, Result};
use crate::refine::keyed::target;
use crate::table::TableHandle;
use crate::table::parquet_read::with_partitions;
use changes::{next_changes, read_signed};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::{Remove, Transaction};
use groups::{Evaluator, Groups};
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
    ctx.keep(output); // the next run starts from this commit
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
        let (columns, ev) = evaluator(cfg, a, output, state, consumed, &source, &partition_by)?;
        let latest = source.version().unwrap_or(0);
        let source_id = source.table_id()?;
        let mut counts = AggregateCounts::default();
        let Some(read) =
            read_delta(cfg, &source, &columns, &ev, consumed, latest, &mut counts).await?
        else {
            return Ok(None);
        };
        let end = read.end;
        self.report.sides = vec![SideReport {
            table: a.source.clone(),
            from: consumed,
            to: Some(end),
            latest,
            files: read.files,
            rows: read.rows,
            late: 0,
        }];

        // The output files that can hold a touched group, and the groups' stored states.
        let out_schema: SchemaRef = match state.version {
            // An output written before the float state columns gains them.
            Some(_) => ev.with_state_columns(&output.arrow_schema()?),
            None => target::nullable_partitions(&ev.output_schema(), &partition_by),
        };
        let stored = if state.version.is_some() && read.delta.len() > 0 {
            let wanted = merge::Touched {
                ev: &ev,
                delta: &read.delta,
                partition_by: &partition_by,
            };
            merge::read_stored(output, a, wanted, &out_schema).await?
        } else {
            merge::Stored::default()
        };

        // Merge; groups whose extreme was retracted are recomputed from the source at `end`.
        let mut merged = merge::Merged::new(counts);
        let recompute = merged.merge(&ev, &read.delta, &stored.groups)?;
        if recompute.len() > 0 {
            merged.counts.recomputed = recompute.len();
            let at_end = source_at(ctx, a, source, end, latest).await?;
            at_end.refuse_deletion_vectors()?;
            let mut fresh = Groups::default();
            let (read, _) =
                fold_snapshot(&at_end, &columns, &ev, &mut fresh, Some(&recompute)).await?;
            merged.counts.recompute_files = read;
            merged.recomputed(&recompute, &fresh, &stored.groups);
        }

        // Write the kept rows of rewritten files and the touched groups' new rows.
        let adds = merge::write_groups(
            ctx,
            cfg,
            &ev,
            &out_schema,
            &partition_by,
            &stored.kept,
            &merged.results,
        )
        .await?;
        self.report.counts = RunCounts::Aggregate(merged.counts);
        Ok(Some(proposal(
            ctx,
            cfg,
            a,
            state,
            out_schema,
            partition_by,
            adds,
            stored.removes,
            end,
            source_id,
        )))
    }
}

/// The source columns the job reads and its evaluator, once the output at `state` may fold
/// the source's changes: an existing output records what it consumed and was written by this
/// job's spec.
fn evaluator(
    cfg: &RefineJob,
    a: &AggregateConfig,
    output: &TableHandle,
    state: &TableState,
    consumed: Option<u64>,
    source: &TableHandle,
    partition_by: &[String],
) -> Result<(SchemaRef, Evaluator)> {
    let refuse = |reason: String| Error::Source {
        job: cfg.job.clone(),
        table: a.source.clone(),
        reason,
    };
    // Folding the snapshot into existing groups would count every row twice; an output
    // emptied by `--rebuild` has no groups left.
    if state.version.is_some() && consumed.is_none() && output.num_live_files()? > 0 {
        return Err(refuse(format!(
            "the output `{}` exists but records no consumption of this source (its `txn` \
             expired, or the job's source was renamed): rebuild it with `lakestream refine {} \
             --rebuild`",
            cfg.output, cfg.job
        )));
    }
    let columns = source_columns(source, a)?;
    let ev = Evaluator::new(&cfg.job, a, &columns, partition_by)?;
    if state.version.is_some() {
        same_spec(output, a, &ev).map_err(refuse)?;
    }
    Ok((columns, ev))
}

/// What the source gained in a run, folded signed into one delta per touched group.
struct Delta {
    /// The delta per touched group.
    delta: Groups,
    /// Source files read.
    files: usize,
    /// Source rows read.
    rows: usize,
    /// The source version consumed up to.
    end: u64,
}

/// Fold what the source did after `consumed` (none: its snapshot at `latest`) into one delta
/// per touched group, counting retracted rows in `counts`; `None` when it has nothing new.
async fn read_delta(
    cfg: &RefineJob,
    source: &TableHandle,
    columns: &SchemaRef,
    ev: &Evaluator,
    consumed: Option<u64>,
    latest: u64,
    counts: &mut AggregateCounts,
) -> Result<Option<Delta>> {
    let mut delta = Groups::default();
    let (files, rows_read, end) = match consumed {
        None => {
            let (files, rows) = fold_snapshot(source, columns, ev, &mut delta, None).await?;
            (files, rows, latest)
        }
        Some(after) => {
            let ch = next_changes(&cfg.job, source, after, ChunkLimits::of(cfg)).await?;
            if ch.end == after {
                return Ok(None);
            }
            let mut rows = 0;
            for f in &ch.files {
                for (batch, signs) in read_signed(&cfg.job, source, f, columns, after).await? {
                    rows += batch.num_rows();
                    counts.retracted += signs.iter().filter(|s| **s < 0).count();
                    ev.fold(&batch, &signs, &mut delta, None)?;
                }
            }
            (ch.files.len(), rows, ch.end)
        }
    };
    Ok(Some(Delta {
        delta,
        files,
        rows: rows_read,
        end,
    }))
}

/// The source at version `end` (`source` itself when that is its `latest`), for recomputing
/// groups.
async fn source_at(
    ctx: &RunContext<'_>,
    a: &AggregateConfig,
    source: TableHandle,
    end: u64,
    latest: u64,
) -> Result<TableHandle> {
    if end == latest {
        return Ok(source);
    }
    // From the kept handle when there is one: its log-read cache answers the commit files of
    // the time travel.
    let mut h = match ctx.warm {
        Some(_) => ctx.load_source(&a.source).await?,
        None => TableHandle::open(ctx.lake, &a.source)?,
    };
    h.at_version(end).await?;
    Ok(h)
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
    source
        .scan(
            &names,
            |file| {
                let keep = wanted
                    .as_ref()
                    .is_none_or(|w| w.may_hold(&file.partition_values(), &file.stats()));
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
        info: vec![],
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
