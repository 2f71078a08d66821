//! The keyed latest-wins upsert (the seed's processed job; CDC with deletes), copy-on-write and
//! without DataFusion (ARCHITECTURE.md "Refine: upsert"). One run, step by step:
//! 1. read what the source gained since the output's `txn` (the one chunk reader) and encode
//!    its keys and ordering values ([`incoming`]);
//! 2. keep the latest row per key by the ordering columns (ties: the greater canonical row
//!    text; [`order`]);
//! 3. drop rows no newer than the key's tombstone (CDC; [`tombstones`]) ...
//! 4. ... or than the key's row already in the output: late data never goes back in time;
//! 5. find the keys in the output: files pruned by partition values and min/max statistics of the
//!    first key column, then only key and ordering columns read ([`target`]);
//! 6. rewrite only files that lose a row (streamed row group by row group), write the new rows
//!    ([`rewrite`]), and commit removes + adds + the source `txn` in one commit on the checked
//!    commit path (read scope: the table, so a concurrent upsert, delete or compaction of a
//!    removed file makes it re-plan from the new snapshot).

mod incoming;
pub mod order;
mod rewrite;
pub mod target;
pub mod tombstones;

use super::context::{JOB_PROPERTY, RunContext, source_id_property};
use super::report::{RunCounts, RunReport, SideReport, UpsertCounts};
use super::source::read_next;
use crate::commit::{Change, ChangePlanner, NewTable, Proposal, ReadScope, TableState, run};
use crate::error::{Error, Result};
use crate::table::TableHandle;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::{Add, Remove, Transaction};
use deltalake::protocol::{DeltaOperation, MergePredicate};
use incoming::{IncomingRows, Ties};
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::upsert::UpsertConfig;
use std::sync::Arc;
use tombstones::Deletes;

/// A planned commit, with the tombstones that must be durable before it lands.
struct Plan {
    proposal: Proposal,
    tombstones: Option<Deletes>,
    report: RunReport,
}

/// What planning from one snapshot came to.
enum Planned {
    /// A commit to land.
    Commit(Box<Plan>),
    /// Nothing to commit (the source does not exist yet, or has nothing new): the report says
    /// which.
    Nothing(RunReport),
}

fn empty_report() -> RunReport {
    RunReport::new(RunCounts::Upsert(UpsertCounts::default()))
}

/// The upsert on the one commit loop: `plan` reads the source chunk and the output and writes
/// data files only; the tombstones of winning deletes are the side write, durable before the
/// output commit (and repeated after a re-plan: writing one twice is harmless).
struct UpsertPlanner<'a, 'c> {
    ctx: &'a RunContext<'c>,
    cfg: &'a RefineJob,
    u: &'a UpsertConfig,
    app: String,
    tombstones: Option<Deletes>,
    report: RunReport,
}

impl ChangePlanner for UpsertPlanner<'_, '_> {
    fn app_ids(&self) -> Vec<String> {
        vec![self.app.clone()]
    }

    async fn plan(&mut self, output: &TableHandle, state: &TableState) -> Result<Option<Proposal>> {
        let consumed = state
            .committed
            .get(&self.app)
            .and_then(|v| u64::try_from(*v).ok());
        match plan(self.ctx, self.cfg, self.u, output, state, consumed).await? {
            Planned::Commit(p) => {
                let p = *p;
                self.tombstones = p.tombstones;
                self.report = p.report;
                Ok(Some(p.proposal))
            }
            Planned::Nothing(report) => {
                self.tombstones = None;
                self.report = report;
                Ok(None)
            }
        }
    }

    async fn side_writes(&mut self, _: &Proposal) -> Result<()> {
        let Some(d) = &self.tombstones else {
            return Ok(());
        };
        d.write(
            self.ctx.lake,
            &self.cfg.job,
            self.ctx.settings,
            self.ctx.now,
        )
        .await
    }
}

/// Run the upsert once on the one commit loop (re-planned from a fresh snapshot on conflict).
pub(crate) async fn run_once(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    u: &UpsertConfig,
    mut output: TableHandle,
) -> Result<RunReport> {
    let mut planner = UpsertPlanner {
        ctx,
        cfg,
        u,
        app: ctx.app_id(&cfg.job, &u.source),
        tombstones: None,
        report: empty_report(),
    };
    let ran = run(&mut output, ctx.settings, &mut planner).await?;
    let mut report = planner.report;
    report.attempts = ran.attempts;
    if let Some(landed) = ran.landed {
        report.output_version = Some(landed.version);
        if u.op.is_some() {
            let tombs = tombstones::table_name(&cfg.job);
            tombstones::expire(
                ctx.lake,
                &tombs,
                ctx.settings,
                ctx.now,
                u.tombstone_retention,
            )
            .await?;
        }
    }
    Ok(report)
}

/// The output schema after this commit: the output's columns, then new source columns.
fn evolve(current: Option<SchemaRef>, incoming: &SchemaRef) -> SchemaRef {
    let Some(current) = current else {
        return incoming.clone();
    };
    let mut fields: Vec<deltalake::arrow::datatypes::Field> = current
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for f in incoming.fields() {
        if current.field_with_name(f.name()).is_err() {
            fields.push(f.as_ref().clone().with_nullable(true));
        }
    }
    Arc::new(deltalake::arrow::datatypes::Schema::new(fields))
}

/// Plan one commit from the output at `state` (source consumed up to `consumed`); writes data
/// files only.
async fn plan(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    u: &UpsertConfig,
    output: &TableHandle,
    state: &TableState,
    consumed: Option<u64>,
) -> Result<Planned> {
    let mut report = empty_report();
    let Some(read) = read_next(ctx, cfg, &u.source, consumed).await? else {
        report.waiting_for = Some(u.source.clone());
        return Ok(Planned::Nothing(report));
    };
    if !read.chunk.advanced() {
        return Ok(Planned::Nothing(report));
    }
    let exists = state.version.is_some();
    let partition_columns = if exists {
        output.partition_columns()?
    } else {
        cfg.partition_by.clone()
    };
    let src = IncomingRows::new(cfg, u, read, &partition_columns)?;
    let (mut incoming, index) = src.winners()?;
    let mut ties = Ties::new();
    if u.op.is_some() {
        tombstones::keep_out_deleted(ctx.lake, &src, &mut incoming).await?;
    }

    let current = if exists {
        Some(output.arrow_schema()?)
    } else {
        None
    };
    let schema = evolve(current, &src.stored_schema);
    // A new output's partition columns are nullable: Delta reads "" there as null.
    let schema = if exists {
        schema
    } else {
        target::nullable_partitions(&schema, &partition_columns)
    };
    // One writer (and object store client) for every file this run writes.
    let mut writer = crate::commit::batch_writer(
        ctx.lake,
        &cfg.output,
        schema.clone(),
        partition_columns.clone(),
    )?;
    let (mut adds, removes) = if exists {
        rewrite::replace_older_rows(
            &src,
            &index,
            &mut incoming,
            &mut ties,
            output,
            &schema,
            &mut writer,
        )
        .await?
    } else {
        (vec![], vec![])
    };
    adds.extend(rewrite::write_new_rows(&src, &incoming, &schema, &mut writer).await?);
    // Deletes that won: their tombstones are the side write, durable before the commit.
    let tombstones = Deletes::of(&src, &incoming, &mut ties)?;

    let chunk = &src.read.chunk;
    report.sides = vec![SideReport {
        table: u.source.clone(),
        from: consumed,
        to: chunk.end,
        latest: chunk.latest,
        files: chunk.files(),
        rows: src.rows.num_rows(),
        late: 0,
    }];
    report.counts = RunCounts::Upsert(incoming::counts(&incoming));
    let written = Written {
        schema,
        partition_columns,
        adds,
        removes,
    };
    let proposal = proposal(ctx, cfg, u, &src, state, written)?;
    Ok(Planned::Commit(Box::new(Plan {
        proposal,
        tombstones,
        report,
    })))
}

/// The files a plan wrote and the table they fit.
struct Written {
    /// The output schema after the commit.
    schema: SchemaRef,
    /// The output's partition columns.
    partition_columns: Vec<String>,
    /// New files: rewritten ones and new rows.
    adds: Vec<Add>,
    /// Files rewritten without rows.
    removes: Vec<Remove>,
}

/// The commit of a plan: removes + adds + the source `txn`, recorded as a merge; and how a new
/// output is created (job and source table id properties).
fn proposal(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    u: &UpsertConfig,
    src: &IncomingRows<'_>,
    state: &TableState,
    written: Written,
) -> Result<Proposal> {
    let end = src.read.chunk.end.unwrap_or(0);
    let on = u
        .key
        .iter()
        .map(|k| format!("target.{k} = source.{k}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    let change = Change {
        read_version: state.version,
        properties: vec![],
        operation: DeltaOperation::Merge {
            predicate: None,
            merge_predicate: Some(on),
            matched_predicates: vec![MergePredicate {
                action_type: "update".into(),
                predicate: Some(format!(
                    "source ordered after target by ({})",
                    u.order_by.join(", ")
                )),
            }],
            not_matched_predicates: vec![MergePredicate {
                action_type: "insert".into(),
                predicate: None,
            }],
            not_matched_by_source_predicates: vec![],
        },
        adds: written.adds,
        removes: written.removes,
        txns: vec![Transaction::new(
            ctx.app_id(&cfg.job, &u.source),
            end as i64,
        )],
        scope: ReadScope::Table,
        cdc_files: vec![],
    };
    let src_id = src
        .read
        .handle
        .table()
        .snapshot()
        .map_err(|e| Error::storage(&u.source, e))?
        .metadata()
        .id()
        .to_string();
    let create = NewTable {
        partition_columns: written.partition_columns,
        configuration: vec![
            (
                "delta.checkpointInterval".into(),
                ctx.settings.checkpoint_interval.to_string(),
            ),
            (JOB_PROPERTY.into(), cfg.job.clone()),
            (source_id_property(&u.source), src_id),
        ],
        change_data_feed: false,
    };
    Ok(Proposal {
        change,
        schema: written.schema,
        create: Some(create),
    })
}
