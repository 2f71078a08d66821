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
use crate::commit::{Change, Failure, NewTable, ReadScope, backoff, land};
use crate::error::{Error, Result};
use crate::handle::TableHandle;
use crate::read::with_partitions;
use deltalake::arrow::array::{Array, AsArray, RecordBatch, UInt32Array};
use deltalake::arrow::compute::{cast, concat_batches, take_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::Transaction;
use deltalake::protocol::{DeltaOperation, MergePredicate};
use lakestream_formats::refine::{RefineJobConfig, RefineKind, UpsertConfig};
use order::{Encoder, latest_per_key, tie_texts};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One key's winning source row.
struct Incoming {
    row: usize,
    order: Vec<u8>,
    tie: String,
    delete: bool,
    /// A newer row (in the output or a tombstone) keeps this one out.
    older: bool,
    /// It replaces (or deletes) a row of the output.
    replaces: bool,
}

/// A planned commit.
struct Plan {
    change: Change,
    schema: SchemaRef,
    create: NewTable,
    report: RunReport,
}

/// Run the upsert once: plan from the output's snapshot, land, re-plan on conflict.
pub(crate) async fn run_once(
    ctx: &RunContext<'_>,
    cfg: &RefineJobConfig,
    u: &UpsertConfig,
    mut output: TableHandle,
) -> Result<RunReport> {
    let settings = ctx.settings;
    let mut last = String::new();
    for attempt in 1..=settings.max_attempts {
        if attempt > 1 {
            tokio::time::sleep(backoff(settings, attempt, fastrand::f64())).await;
            output.refresh().await?;
        }
        let plan = match plan(ctx, cfg, u, &mut output).await? {
            Ok(plan) => plan,
            Err(report) => return Ok(report),
        };
        match land(
            &mut output,
            &plan.change,
            &plan.schema,
            Some(&plan.create),
            settings,
        )
        .await
        {
            Ok(landed) => {
                let mut report = plan.report;
                report.output_version = Some(landed.version);
                report.attempts = attempt;
                if u.op.is_some() {
                    let tombs = tombstones::table_name(&cfg.job);
                    tombstones::expire(ctx.lake, &tombs, settings, ctx.now, u.tombstone_retention)
                        .await?;
                }
                return Ok(report);
            }
            Err(Failure::Conflict(c)) => {
                tracing::info!(job = %cfg.job, attempt, reason = %c.reason, "upsert conflict, will re-plan");
                last = c.reason;
            }
            Err(Failure::Transient(e)) if attempt < settings.max_attempts => {
                tracing::warn!(job = %cfg.job, attempt, error = %e, "upsert commit failed and did not land, will retry");
            }
            Err(Failure::Transient(e) | Failure::Permanent(e)) => return Err(e),
        }
    }
    Err(Error::Contention {
        table: cfg.output.clone(),
        attempts: settings.max_attempts,
        last,
    })
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

/// Plan one commit; `Err(report)` when there is nothing to commit.
async fn plan(
    ctx: &RunContext<'_>,
    cfg: &RefineJobConfig,
    u: &UpsertConfig,
    output: &mut TableHandle,
) -> Result<std::result::Result<Plan, RunReport>> {
    let mut report = RunReport::default();
    let app = source_app_id(ctx.pipeline, &cfg.job, &u.source);
    let consumed = output
        .committed(std::slice::from_ref(&app))
        .await?
        .get(&app)
        .and_then(|v| u64::try_from(*v).ok());
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
    let s = concat_batches(&src_schema, &batches)?;
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
    let keys = key_enc.encode(&s, &u.source)?;
    let orders = order_enc.encode(&s, &u.source)?;
    let winners = latest_per_key(&keys, &orders, |idx| tie_texts(&s_out, idx))?;
    let ties = tie_texts(&s_out, &winners)?;
    let deletes: Vec<bool> = match &u.op {
        Some(op) => {
            field(&src_schema, &op.column, &u.source, &cfg.job)?;
            let col = s
                .column_by_name(&op.column)
                .ok_or_else(|| Error::Internal("op".into()))?;
            let col = cast(col, &DataType::Utf8)?;
            let col = col.as_string::<i32>();
            (0..col.len())
                .map(|i| col.is_valid(i) && op.delete.iter().any(|d| d == col.value(i)))
                .collect()
        }
        None => vec![false; s.num_rows()],
    };
    let mut incoming: HashMap<Vec<u8>, Incoming> = winners
        .iter()
        .zip(ties)
        .map(|(&row, tie)| {
            (
                keys[row].clone(),
                Incoming {
                    row,
                    order: orders[row].clone(),
                    tie,
                    delete: deletes[row],
                    older: false,
                    replaces: false,
                },
            )
        })
        .collect();

    // Tombstones: a delete newer than (or equal to) the row keeps it out.
    let tomb_table = tombstones::table_name(&cfg.job);
    if u.op.is_some() {
        let tombs = tombstones::load(ctx.lake, &tomb_table, &key_enc, &order_enc).await?;
        for (k, w) in incoming.iter_mut() {
            if let Some((o, t)) = tombs.get(k)
                && (o, t) >= (&w.order, &w.tie)
            {
                w.older = true;
            }
        }
    }

    // The output's rows for these keys.
    let exists = output.exists();
    let current = if exists {
        Some(output.arrow_schema()?)
    } else {
        None
    };
    let schema = evolve(current, &incoming_schema);
    let partition_columns = if exists {
        output
            .table()
            .snapshot()
            .map_err(|e| Error::storage(&cfg.output, e))?
            .metadata()
            .partition_columns()
            .to_vec()
    } else {
        cfg.partition_by.clone()
    };
    // Per candidate file: the rows (index, key) an incoming row replaces.
    let mut drops: HashMap<usize, Vec<(usize, Vec<u8>)>> = HashMap::new();
    let mut removes = Vec::new();
    let mut adds = Vec::new();
    if exists {
        let files = target::live_files(output, &u.key[0])?;
        let first = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                field(&src_schema, &u.key[0], &u.source, &cfg.job)?.clone(),
            ])),
            vec![
                s.column_by_name(&u.key[0])
                    .ok_or_else(|| Error::Internal("key".into()))?
                    .clone(),
            ],
        )?;
        let winners_first = take_record_batch(
            &first,
            &UInt32Array::from(winners.iter().map(|i| *i as u32).collect::<Vec<_>>()),
        )?;
        let keys_json: Vec<serde_json::Value> = super::state::row_json(&winners_first)?
            .into_iter()
            .filter_map(|m| m.get(&u.key[0]).cloned())
            .collect();
        let text = cast(winners_first.column(0), &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let keys_text: HashSet<String> = (0..text.len())
            .filter(|i| text.is_valid(*i))
            .map(|i| text.value(i).to_string())
            .collect();
        let candidates = target::candidates(&files, &u.key[0], &keys_text, &keys_json);
        let store = output.table().object_store();
        let mut columns: Vec<String> = u.key.iter().chain(&u.order_by).cloned().collect();
        columns.dedup();
        for (fi, f) in candidates.iter().enumerate() {
            let batch = target::read_columns(&store, f, &schema, &columns, &cfg.output).await?;
            let ek = key_enc.rows(&batch, &cfg.output)?;
            let eo = order_enc.rows(&batch, &cfg.output)?;
            let mut tied = Vec::new();
            for i in 0..ek.num_rows() {
                let k = ek.row(i);
                let Some(w) = incoming.get_mut(k.as_ref()) else {
                    continue;
                };
                match eo.row(i).as_ref().cmp(w.order.as_slice()) {
                    std::cmp::Ordering::Greater => w.older = true,
                    std::cmp::Ordering::Less => {
                        drops.entry(fi).or_default().push((i, k.as_ref().to_vec()))
                    }
                    std::cmp::Ordering::Equal => tied.push((i, k.as_ref().to_vec())),
                }
            }
            if !tied.is_empty() {
                let all = target::read_all(&store, f, &schema, &cfg.output).await?;
                let as_incoming = with_partitions(&incoming_schema, &all, &HashMap::new())?;
                let idx: Vec<usize> = tied.iter().map(|t| t.0).collect();
                for ((i, k), text) in tied.into_iter().zip(tie_texts(&as_incoming, &idx)?) {
                    if let Some(w) = incoming.get_mut(&k) {
                        if text >= w.tie {
                            w.older = true;
                        } else {
                            drops.entry(fi).or_default().push((i, k));
                        }
                    }
                }
            }
        }
        // A key whose incoming row lost to a newer one keeps all its rows.
        for (fi, f) in candidates.iter().enumerate() {
            let Some(rows) = drops.get(&fi) else { continue };
            let mut drop = HashSet::new();
            for (i, k) in rows {
                if let Some(w) = incoming.get_mut(k)
                    && !w.older
                {
                    w.replaces = true;
                    drop.insert(*i);
                }
            }
            if drop.is_empty() {
                continue;
            }
            adds.extend(
                target::rewrite_without(
                    ctx.lake,
                    &cfg.output,
                    &store,
                    f,
                    &schema,
                    &partition_columns,
                    &drop,
                )
                .await?,
            );
            removes.push(f.remove.clone());
        }
    }

    // New rows: winners that are neither older than what the output has nor deletes.
    let mut upserts: Vec<u32> = incoming
        .values()
        .filter(|w| !w.older && !w.delete)
        .map(|w| w.row as u32)
        .collect();
    upserts.sort_unstable();
    if !upserts.is_empty() {
        let rows = take_record_batch(&s_out, &UInt32Array::from(upserts.clone()))?;
        let rows = with_partitions(&schema, &rows, &HashMap::new())?;
        let mut writer = crate::commit::batch_writer(
            ctx.lake,
            &cfg.output,
            schema.clone(),
            partition_columns.clone(),
        )?;
        use deltalake::writer::DeltaWriter;
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
    // Deletes that won: tombstones first (harmless if this commit never lands).
    let mut deleted: Vec<&Incoming> = incoming.values().filter(|w| !w.older && w.delete).collect();
    deleted.sort_by_key(|w| w.row);
    if !deleted.is_empty() {
        let idx = UInt32Array::from(deleted.iter().map(|w| w.row as u32).collect::<Vec<_>>());
        let rows = take_record_batch(&s, &idx)?;
        let columns: Vec<String> = u.key.iter().chain(&u.order_by).cloned().collect();
        let ties = deleted.iter().map(|w| w.tie.clone()).collect();
        tombstones::write(
            ctx.lake,
            &tomb_table,
            ctx.settings,
            &rows,
            &columns,
            ties,
            ctx.now,
        )
        .await?;
    }

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
        .values()
        .filter(|w| !w.older && !w.delete && !w.replaces)
        .count();
    report.updated = incoming
        .values()
        .filter(|w| !w.older && !w.delete && w.replaces)
        .count();
    report.deleted = incoming
        .values()
        .filter(|w| !w.older && w.delete && w.replaces)
        .count();
    report.older_ignored = incoming.values().filter(|w| w.older).count();
    let on = u
        .key
        .iter()
        .map(|k| format!("target.{k} = source.{k}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    let change = Change {
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
        change,
        schema,
        create,
        report,
    }))
}

/// Record `version` of the source as consumed without writing rows.
pub(crate) async fn skip_to(
    ctx: &RunContext<'_>,
    cfg: &RefineJobConfig,
    table: &str,
    version: i64,
) -> Result<Option<u64>> {
    let RefineKind::Upsert(u) = cfg.kind()? else {
        return Err(Error::Internal("not an upsert job".into()));
    };
    if table != u.source {
        return Err(Error::Config(format!(
            "refine job `{}` does not read `{table}`",
            cfg.job
        )));
    }
    let src = TableHandle::open_existing(ctx.lake, table).await?;
    let id = src
        .table()
        .snapshot()
        .map_err(|e| Error::storage(table, e))?
        .metadata()
        .id()
        .to_string();
    let mut output = TableHandle::open(ctx.lake, &cfg.output)?;
    let exists = output.refresh().await?;
    if exists {
        let key = source_id_property(table);
        let recorded = output
            .table()
            .snapshot()
            .map_err(|e| Error::storage(&cfg.output, e))?
            .metadata()
            .configuration()
            .get(&key)
            .cloned();
        if recorded.as_ref() != Some(&id) {
            super::set_property(ctx, &mut output, &key, &id).await?;
        }
    }
    let schema = if exists {
        output.arrow_schema()?
    } else {
        src.arrow_schema()?
    };
    let change = Change {
        operation: DeltaOperation::Write {
            mode: deltalake::protocol::SaveMode::Append,
            partition_by: None,
            predicate: None,
        },
        adds: vec![],
        removes: vec![],
        txns: vec![Transaction::new(
            source_app_id(ctx.pipeline, &cfg.job, table),
            version,
        )],
        scope: ReadScope::Append,
    };
    let create = NewTable {
        partition_columns: cfg.partition_by.clone(),
        configuration: vec![(source_id_property(table), id)],
    };
    match land(&mut output, &change, &schema, Some(&create), ctx.settings).await {
        Ok(l) => Ok(Some(l.version)),
        Err(Failure::Conflict(c)) => Err(Error::Contention {
            table: cfg.output.clone(),
            attempts: 1,
            last: c.reason,
        }),
        Err(Failure::Transient(e) | Failure::Permanent(e)) => Err(e),
    }
}
