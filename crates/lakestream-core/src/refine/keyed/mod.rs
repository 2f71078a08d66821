//! The keyed machinery shared by the keyed refine kinds (the upsert, the CDC SCD1 apply, and
//! parts of it by SCD2 and the aggregate), copy-on-write and without DataFusion (ARCHITECTURE.md
//! "Refine: upsert"). One keyed run, step by step:
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
//!
//! The upsert (`refine/upsert/`) and the CDC apply (SCD1, `refine/cdc/scd1.rs`) share [`plan`]
//! (the CDC apply with a [`Sweep`] for truncates and the dropped / written rows for the change
//! data feed) and the commit loop of `run.rs`. The upsert, CDC and aggregate folders import
//! from here, never from each other.

pub(crate) mod expiry;
pub(crate) mod incoming;
pub mod order;
pub mod pending;
pub(crate) mod rewrite;
mod run;
pub mod target;
pub(crate) mod tombstone_table;
pub mod tombstones;
pub(crate) mod unchanged;
pub mod values;

use super::context::{JOB_PROPERTY, RunContext, source_id_property};
use super::report::{RunCounts, RunReport, SideReport, UpsertCounts};
use crate::commit::change::keyed_merge;
use crate::commit::{Change, NewTable, Proposal, ReadScope, TableState};
use crate::error::Result;
use crate::table::TableHandle;
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::{Add, Remove, Transaction};
use incoming::{IncomingRows, Ties};

/// A keyed run's writer holds the rows it keeps from the files it rewrites (and its new rows)
/// until this much is written, then flushes: one data PUT per partition for a small table's
/// run, memory bounded for a large one (each partition's open file holds its row group in
/// memory until the flush).
pub const REWRITE_FLUSH_BYTES: usize = 32 << 20;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::upsert::UpsertConfig;
use rewrite::Sweep;
pub(crate) use run::{Expiry, KeyedPlan, run_keyed};
use std::sync::Arc;
pub(crate) use tombstones::Deletes;

/// A planned commit of a keyed run (upsert or CDC apply), with its winning deletes (their
/// tombstones go in the commit or before it lands).
pub(crate) struct Plan {
    /// The commit.
    pub proposal: Proposal,
    /// Deletes that won (their tombstones: in the commit, or the side write).
    pub tombstones: Option<Deletes>,
    /// The tombstone table, as the plan loaded it, holds the output's anchor: tombstones of
    /// the output's commits may be pending ([`pending`]).
    pub anchored: bool,
    /// What the run did.
    pub report: RunReport,
}

/// What planning from one snapshot came to.
pub(crate) enum Planned {
    /// A commit to land.
    Commit(Box<Plan>),
    /// Nothing to commit (the source does not exist yet, or has nothing new): the report says
    /// which.
    Nothing(RunReport),
}

/// An empty report of a keyed run.
pub(crate) fn empty_report() -> RunReport {
    RunReport::new(RunCounts::Upsert(UpsertCounts::default()))
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

/// The output's rows a plan replaced and the rows it wrote (the change data feed's old and new
/// images; `dropped` only when the [`Sweep`] keeps them).
pub struct Images {
    /// Rows dropped from the output, in the output's schema.
    pub dropped: Vec<RecordBatch>,
    /// Rows written for the winners, in the output's schema.
    pub written: Option<RecordBatch>,
    /// The output's schema after the commit.
    pub schema: SchemaRef,
}

/// Plan one commit of the encoded source rows `src` into the output at `state` (the source
/// consumed up to `consumed`), sweeping per `sweep`; writes data files only.
pub(crate) async fn plan(
    ctx: &RunContext<'_>,
    src: &IncomingRows<'_>,
    output: &TableHandle,
    state: &TableState,
    consumed: Option<u64>,
    sweep: &Sweep,
) -> Result<(Plan, Images)> {
    let (cfg, u) = (src.cfg, src.u);
    let mut report = empty_report();
    let exists = state.version.is_some();
    let partition_columns = if exists {
        output.partition_columns()?
    } else {
        cfg.partition_by.clone()
    };
    let (mut incoming, index) = src.winners()?;
    let mut ties = Ties::new();
    let who = sweep.positions.as_ref();
    let tombs = tombstones::keep_out_deleted(ctx, src, &mut incoming, who, output).await?;

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
    // The rewritten files' rows and the new rows go out together (flushed early past
    // REWRITE_FLUSH_BYTES).
    let mut writer = crate::commit::batch_writer(
        ctx.lake,
        &cfg.output,
        schema.clone(),
        partition_columns.clone(),
    )?;
    let replaced = if exists {
        let out = rewrite::Output {
            handle: output,
            schema: &schema,
            writer: &mut writer,
        };
        rewrite::replace_older_rows(src, &index, &mut incoming, &mut ties, out, sweep).await?
    } else {
        rewrite::Replaced::default()
    };
    // CDC, an incremental run: a change that may be older than a forgotten delete stays out.
    if let Some(who) = &sweep.positions
        && consumed.is_some()
    {
        tombstones::keep_out_forgotten(ctx, src, &mut incoming, who, tombs.as_ref()).await?;
    }
    let cdc_values = (&replaced.resolved, sweep.values.as_ref());
    let (new_files, new_rows) =
        rewrite::write_new_rows(src, &incoming, &schema, &mut writer, cdc_values).await?;
    let mut adds = replaced.adds;
    adds.extend(new_files);
    // Deletes that won: their tombstones go in the commit or before it (`run.rs`).
    let tombstones = Deletes::of(src, &incoming, &mut ties)?;

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
        schema: schema.clone(),
        partition_columns,
        adds,
        removes: replaced.removes,
    };
    let proposal = proposal(ctx, cfg, u, src, state, written)?;
    let images = Images {
        dropped: replaced.dropped,
        written: new_rows,
        schema,
    };
    Ok((
        Plan {
            proposal,
            tombstones,
            anchored: tombs.as_ref().is_some_and(|t| t.anchored),
            report,
        },
        images,
    ))
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
    let change = Change {
        read_version: state.version,
        properties: vec![],
        operation: keyed_merge(
            &u.key,
            format!("source ordered after target by ({})", u.order_by.join(", ")),
        ),
        adds: written.adds,
        removes: written.removes,
        txns: vec![Transaction::new(
            ctx.app_id(&cfg.job, &u.source),
            end as i64,
        )],
        scope: ReadScope::Table,
        cdc_files: vec![],
        info: vec![],
    };
    let src_id = src.read.handle.table_id()?;
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
