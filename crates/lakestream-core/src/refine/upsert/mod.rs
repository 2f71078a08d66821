//! The keyed latest-wins upsert (the seed's processed job; CDC with deletes), copy-on-write and
//! without DataFusion (ARCHITECTURE.md "Refine: upsert"):
//! 1. read what the source gained since the output's `txn` (the incremental source);
//! 2. keep the latest row per key by the ordering columns (ties: the greater canonical row text);
//! 3. drop rows no newer than the key's tombstone (CDC) ...
//! 4. ... or than the key's row already in the output: late data never goes back in time;
//! 5. find the keys in the output: files pruned by partition values and min/max statistics of the
//!    first key column, then only key and ordering columns read;
//! 6. rewrite only files that lose a row (streamed row group by row group), write the new rows,
//!    and commit removes + adds + the source `txn` in one commit on the checked commit path
//!    (read scope: the table, so a concurrent upsert, delete or compaction of a removed file
//!    makes it re-plan from the new snapshot).

pub mod order;
pub mod target;
pub mod tombstones;

use super::job::{RunContext, source_app_id, source_id_property};
use super::source::{ChunkLimits, next_chunk, read_version};
use super::{RunReport, SideReport};
use crate::commit::{Change, ChangePlanner, NewTable, Proposal, ReadScope, TableState, run};
use crate::error::{Error, Result};
use crate::read::with_partitions;
use crate::table::TableHandle;
use deltalake::arrow::array::{Array, AsArray, RecordBatch, UInt32Array};
use deltalake::arrow::compute::{cast, concat_batches, take_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::Transaction;
use deltalake::protocol::{DeltaOperation, MergePredicate};
use deltalake::writer::DeltaWriter;
use foldhash::HashMapExt;
use lakestream_formats::refine::upsert::UpsertConfig;
use lakestream_formats::refine::{JobKind, RefineJob};
use order::{Encoder, latest_per_key, tie_texts};
use std::collections::HashMap;
use std::sync::Arc;

/// One key's winning source row (its key and ordering values are in the run's row buffers,
/// its tie text, when needed, in a side map): 8 bytes per key.
struct Incoming {
    row: u32,
    delete: bool,
    /// A newer row (in the output or a tombstone) keeps this one out.
    older: bool,
    /// It replaces (or deletes) a row of the output.
    replaces: bool,
}

/// Tie texts of incoming rows, by index in `incoming`, computed only when needed.
type Ties = HashMap<usize, String>;

/// A planned commit, with the tombstones that must be durable before it lands.
struct Plan {
    proposal: Proposal,
    tombstones: Option<Deletes>,
    report: RunReport,
}

/// The deletes that won, to be recorded as tombstones before the output commit.
struct Deletes {
    rows: RecordBatch,
    columns: Vec<String>,
    ties: Vec<String>,
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
            Ok(p) => {
                self.tombstones = p.tombstones;
                self.report = p.report;
                Ok(Some(p.proposal))
            }
            Err(report) => {
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
        tombstones::write(
            self.ctx.lake,
            &tombstones::table_name(&self.cfg.job),
            self.ctx.settings,
            &d.rows,
            &d.columns,
            d.ties.clone(),
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
        app: source_app_id(ctx.pipeline, &cfg.job, &u.source),
        tombstones: None,
        report: RunReport::default(),
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

/// Compute the tie texts of the `which` incoming rows (indexes into `incoming`) that have none
/// yet, in one batch over `rows` (the source rows as the output stores them).
fn fill_ties(
    incoming: &[Incoming],
    ties: &mut Ties,
    mut which: Vec<usize>,
    rows: &RecordBatch,
) -> Result<()> {
    which.sort_unstable();
    which.dedup();
    which.retain(|w| !ties.contains_key(w));
    if which.is_empty() {
        return Ok(());
    }
    let idx: Vec<usize> = which.iter().map(|&w| incoming[w].row as usize).collect();
    ties.extend(which.into_iter().zip(tie_texts(rows, &idx)?));
    Ok(())
}

/// Column `name` of `schema`, or a clear error naming the job.
fn field<'s>(schema: &'s Schema, name: &str, table: &str, job: &str) -> Result<&'s Field> {
    schema.field_with_name(name).map_err(|_| Error::Schema {
        table: table.to_string(),
        reason: format!("no column `{name}` (named in refine job `{job}`)"),
    })
}

/// The output schema after this commit: the output's columns, then new source columns.
fn evolve(current: Option<SchemaRef>, incoming: &SchemaRef) -> SchemaRef {
    let Some(current) = current else {
        return incoming.clone();
    };
    let mut fields: Vec<Field> = current
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for f in incoming.fields() {
        if current.field_with_name(f.name()).is_err() {
            fields.push(f.as_ref().clone().with_nullable(true));
        }
    }
    Arc::new(Schema::new(fields))
}

/// Plan one commit from the output at `state` (source consumed up to `consumed`); writes data
/// files only. `Err(report)` when there is nothing to commit.
async fn plan(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    u: &UpsertConfig,
    output: &TableHandle,
    state: &TableState,
    consumed: Option<u64>,
) -> Result<std::result::Result<Plan, RunReport>> {
    let mut report = RunReport::default();
    let app = source_app_id(ctx.pipeline, &cfg.job, &u.source);
    let mut src = TableHandle::open(ctx.lake, &u.source)?;
    if !src.refresh().await? {
        report.waiting_for = Some(u.source.clone());
        return Ok(Err(report));
    }
    let src_schema = src.arrow_schema()?;
    let limits = ChunkLimits {
        max_files: cfg.max_files_per_run,
        max_bytes: cfg.max_mib_per_run << 20,
    };
    let chunk = next_chunk(&cfg.job, &src, consumed, limits, cfg.ignore_changes).await?;
    if !chunk.advanced() {
        return Ok(Err(report));
    }
    let mut batches = Vec::new();
    for v in &chunk.versions {
        batches.extend(read_version(&cfg.job, &src, &chunk, v, &src_schema).await?);
    }
    // In a partition column of the output, null and "" are one Delta value: one key.
    let partition_columns = if state.version.is_some() {
        output.partition_columns()?
    } else {
        cfg.partition_by.clone()
    };
    let s = target::empty_partition_values(
        &concat_batches(&src_schema, &batches)?,
        &partition_columns,
    )?;
    drop(batches);
    // The rows as the output stores them (the op column dropped unless kept).
    let op_column = u.op.as_ref().filter(|o| !o.keep).map(|o| o.column.as_str());
    let out_fields: Vec<Field> = src_schema
        .fields()
        .iter()
        .filter(|f| Some(f.name().as_str()) != op_column)
        .map(|f| f.as_ref().clone())
        .collect();
    let incoming_schema: SchemaRef = Arc::new(Schema::new(out_fields));
    let s_out = with_partitions(&incoming_schema, &s, &HashMap::new())?;

    let types = |names: &[String]| -> Result<Vec<DataType>> {
        names
            .iter()
            .map(|n| {
                Ok(field(&src_schema, n, &u.source, &cfg.job)?
                    .data_type()
                    .clone())
            })
            .collect()
    };
    let key_enc = Encoder::new(&u.key, types(&u.key)?)?;
    let order_enc = Encoder::new(&u.order_by, types(&u.order_by)?)?;
    // Keys and ordering values in arrow's row format: two buffers, no allocation per row.
    let key_rows = key_enc.rows(&s, &u.source)?;
    let order_rows = order_enc.rows(&s, &u.source)?;
    // Winners in first-seen order, and key bytes -> index in `incoming` (= in `winners`).
    let op_values = match &u.op {
        Some(op) => {
            field(&src_schema, &op.column, &u.source, &cfg.job)?;
            let col = s
                .column_by_name(&op.column)
                .ok_or_else(|| Error::Internal("op".into()))?;
            Some(cast(col, &DataType::Utf8)?)
        }
        None => None,
    };
    let is_delete = |row: usize| match (&op_values, &u.op) {
        (Some(col), Some(op)) => {
            let col = col.as_string::<i32>();
            col.is_valid(row) && op.delete.iter().any(|d| d == col.value(row))
        }
        _ => false,
    };
    let (winners, index) = latest_per_key(&key_rows, &order_rows, is_delete, |idx| {
        tie_texts(&s_out, idx)
    })?;
    let mut incoming: Vec<Incoming> = winners
        .iter()
        .map(|&row| Incoming {
            row: row as u32,
            delete: is_delete(row),
            older: false,
            replaces: false,
        })
        .collect();
    let mut ties = Ties::new();
    let order_of = |inc: &Incoming| order_rows.row(inc.row as usize).data();

    // Tombstones: a delete with greater ordering values keeps a row out; at equal ordering
    // values the delete wins over a non-delete, and a delete is never older than an equal
    // tombstone (its own, from an earlier attempt or run that did not commit the output).
    let tomb_table = tombstones::table_name(&cfg.job);
    if u.op.is_some() {
        let tombs = tombstones::load(ctx.lake, &tomb_table, &key_enc, &order_enc).await?;
        for inc in incoming.iter_mut() {
            let Some((o, _)) = tombs.get(key_rows.row(inc.row as usize).data()) else {
                continue;
            };
            let ord = order_rows.row(inc.row as usize);
            let cmp = o.as_slice().cmp(ord.data());
            if cmp.is_gt() || (cmp.is_eq() && !inc.delete) {
                inc.older = true;
            }
        }
    }

    // The output's rows for these keys.
    let exists = state.version.is_some();
    let current = if exists {
        Some(output.arrow_schema()?)
    } else {
        None
    };
    let schema = evolve(current, &incoming_schema);
    // A new output's partition columns are nullable: Delta reads "" there as null.
    let schema = if exists {
        schema
    } else {
        target::nullable_partitions(&schema, &partition_columns)
    };
    // Per candidate file: the rows (index in the file, index in `incoming`) it replaces.
    let mut drops: foldhash::HashMap<usize, Vec<(usize, usize)>> = foldhash::HashMap::new();
    let mut removes = Vec::new();
    let mut adds = Vec::new();
    // One writer (and object store client) for every file this run writes.
    let mut writer = crate::commit::batch_writer(
        ctx.lake,
        &cfg.output,
        schema.clone(),
        partition_columns.clone(),
    )?;
    if exists {
        let files = target::live_files(output, &u.key[0])?;
        let first_key = s
            .column_by_name(&u.key[0])
            .ok_or_else(|| Error::Internal("key".into()))?;
        let winners_first = deltalake::arrow::compute::take(
            first_key,
            &UInt32Array::from(winners.iter().map(|i| *i as u32).collect::<Vec<_>>()),
            None,
        )?;
        let candidates = target::candidates(&files, &u.key[0], &winners_first)?;
        drop((winners_first, winners));
        let store = output.table().object_store();
        let mut columns: Vec<String> = u.key.iter().chain(&u.order_by).cloned().collect();
        columns.dedup();
        for (fi, f) in candidates.iter().enumerate() {
            let batch = target::read_columns(&store, f, &schema, &columns, &cfg.output).await?;
            let ek = key_enc.rows(&batch, &cfg.output)?;
            let eo = order_enc.rows(&batch, &cfg.output)?;
            let mut tied = Vec::new();
            for i in 0..ek.num_rows() {
                let Some(&w) = index.get(ek.row(i).data()) else {
                    continue;
                };
                match eo.row(i).data().cmp(order_of(&incoming[w])) {
                    std::cmp::Ordering::Greater => incoming[w].older = true,
                    std::cmp::Ordering::Less => drops.entry(fi).or_default().push((i, w)),
                    // At equal ordering values a delete wins (it carries the row's last image).
                    std::cmp::Ordering::Equal if incoming[w].delete => {
                        drops.entry(fi).or_default().push((i, w))
                    }
                    std::cmp::Ordering::Equal => tied.push((i, w)),
                }
            }
            if !tied.is_empty() {
                fill_ties(
                    &incoming,
                    &mut ties,
                    tied.iter().map(|t| t.1).collect(),
                    &s_out,
                )?;
                let all = target::read_all(&store, f, &schema, &cfg.output).await?;
                let as_incoming = with_partitions(&incoming_schema, &all, &HashMap::new())?;
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
        // A key whose incoming row lost to a newer one keeps all its rows.
        for (fi, f) in candidates.iter().enumerate() {
            let Some(rows) = drops.get(&fi) else { continue };
            let mut drop = Vec::new();
            for &(i, w) in rows {
                if !incoming[w].older {
                    incoming[w].replaces = true;
                    drop.push(i);
                }
            }
            drop.sort_unstable();
            drop.dedup();
            if drop.is_empty() {
                continue;
            }
            adds.extend(
                target::rewrite_without(&mut writer, &cfg.output, &store, f, &schema, &drop)
                    .await?,
            );
            removes.push(f.remove.clone());
        }
    }

    // New rows: winners that are neither older than what the output has nor deletes.
    let mut upserts: Vec<u32> = incoming
        .iter()
        .filter(|w| !w.older && !w.delete)
        .map(|w| w.row)
        .collect();
    upserts.sort_unstable();
    if !upserts.is_empty() {
        let rows = take_record_batch(&s_out, &UInt32Array::from(upserts.clone()))?;
        let rows = with_partitions(&schema, &rows, &HashMap::new())?;
        writer
            .write(rows)
            .await
            .map_err(|e| Error::storage(&cfg.output, e))?;
        adds.extend(
            writer
                .flush()
                .await
                .map_err(|e| Error::storage(&cfg.output, e))?,
        );
    }
    // Deletes that won: their tombstones are the side write, durable before the commit.
    let mut deleted: Vec<usize> = (0..incoming.len())
        .filter(|&w| !incoming[w].older && incoming[w].delete)
        .collect();
    fill_ties(&incoming, &mut ties, deleted.clone(), &s_out)?;
    deleted.sort_by_key(|&w| incoming[w].row);
    let tombstones = if deleted.is_empty() {
        None
    } else {
        let idx = UInt32Array::from(deleted.iter().map(|&w| incoming[w].row).collect::<Vec<_>>());
        Some(Deletes {
            rows: take_record_batch(&s, &idx)?,
            columns: u.key.iter().chain(&u.order_by).cloned().collect(),
            ties: deleted
                .iter()
                .map(|w| ties.get(w).cloned().unwrap_or_default())
                .collect(),
        })
    };

    let end = chunk.end.unwrap_or(0);
    report.sides = vec![SideReport {
        table: u.source.clone(),
        from: consumed,
        to: chunk.end,
        latest: chunk.latest,
        files: chunk.files(),
        rows: s.num_rows(),
        late: 0,
    }];
    report.inserted = incoming
        .iter()
        .filter(|w| !w.older && !w.delete && !w.replaces)
        .count();
    report.updated = incoming
        .iter()
        .filter(|w| !w.older && !w.delete && w.replaces)
        .count();
    report.deleted = incoming
        .iter()
        .filter(|w| !w.older && w.delete && w.replaces)
        .count();
    report.older_ignored = incoming.iter().filter(|w| w.older).count();
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
        adds,
        removes,
        txns: vec![Transaction::new(&app, end as i64)],
        scope: ReadScope::Table,
    };
    let src_id = src
        .table()
        .snapshot()
        .map_err(|e| Error::storage(&u.source, e))?
        .metadata()
        .id()
        .to_string();
    let create = NewTable {
        partition_columns,
        configuration: vec![
            (
                "delta.checkpointInterval".into(),
                ctx.settings.checkpoint_interval.to_string(),
            ),
            ("lakestream.refine.job".into(), cfg.job.clone()),
            (source_id_property(&u.source), src_id),
        ],
    };
    Ok(Ok(Plan {
        proposal: Proposal {
            change,
            schema,
            create: Some(create),
        },
        tombstones,
        report,
    }))
}

/// Record `version` of the source as consumed without writing rows (and the source's table
/// id when it was re-created), in one commit.
pub(crate) async fn skip_to(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    table: &str,
    version: i64,
) -> Result<Option<u64>> {
    let JobKind::Upsert(u) = &cfg.kind else {
        return Err(Error::Internal("not an upsert job".into()));
    };
    if table != u.source {
        return Err(Error::Config(format!(
            "refine job `{}` does not read `{table}`",
            cfg.job
        )));
    }
    let src = TableHandle::open_existing(ctx.lake, table).await?;
    let properties = vec![
        ("lakestream.refine.job".to_string(), cfg.job.clone()),
        (source_id_property(table), src.table_id()?),
    ];
    let mut planner =
        super::SkipPlanner::new(ctx, cfg, table, version, src.arrow_schema()?, properties);
    let mut output = TableHandle::open(ctx.lake, &cfg.output)?;
    Ok(run(&mut output, ctx.settings, &mut planner)
        .await?
        .landed
        .map(|l| l.version))
}
