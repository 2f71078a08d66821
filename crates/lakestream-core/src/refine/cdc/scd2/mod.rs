//! SCD type 2 apply (ARCHITECTURE.md "CDC lakehouse"): one silver row per change, with
//! `__START_AT` / `__END_AT` / `__END_SEQ`, rebuilt for the touched keys only. One run:
//! 1. read what bronze gained since the silver `txn` ([`read_changes`]);
//! 2. find the touched keys' silver rows: files pruned by key statistics like the upsert's
//!    target search ([`target`]); a truncate touches every key (every file is read);
//! 3. rebuild their history ([`history`]) and compare it with the old rows: the keys whose
//!    rows changed, and the change feed rows;
//! 4. rewrite only the files holding changed keys (copy-on-write: their other rows are kept),
//!    write the rebuilt rows and the change data files, and commit removes + adds + `cdc`
//!    files + the source `txn` in one commit on the one commit loop (read scope: the table);
//!    a truncate records `lakestream.cdc.truncated_at`. Silver is created with the feed on.
//!    A run that only inserts (new keys, no file rewritten) writes no change data file:
//!    readers derive its feed from its adds ([`derivable_from_actions`]).

mod compare;
pub mod history;
#[cfg(test)]
mod history_tests;
pub mod keys;
mod silver_files;
mod stored;
mod timeline;

use super::changes::{ChangeRead, read_changes};
use crate::commit::{
    CHANGE_TYPE, Change, ChangePlanner, NewTable, Proposal, ReadScope, TableState, change_schema,
    derivable_from_actions, run, write_change_data,
};
use crate::error::{Error, Result};
use crate::refine::cdc::positions::unranked;
use crate::refine::context::{JOB_PROPERTY, RunContext, source_id_property};
use crate::refine::keyed::tombstones;
use crate::refine::keyed::values::Toast;
use crate::refine::rebuild::voided_truncates;
use crate::refine::report::{RunCounts, RunReport, SideReport, UpsertCounts};
use crate::table::TableHandle;
use deltalake::arrow::array::{ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray};
use deltalake::arrow::compute::{cast, concat_batches, filter_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::{Add, Remove, Transaction};
use deltalake::protocol::DeltaOperation;
use history::Truncate;
use keys::KeyCodec;
use lakestream_formats::config::{bronze, silver};
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::cdc::CdcApply;
use std::collections::HashSet;
use std::sync::Arc;

/// The SCD2 apply on the one commit loop: `plan` reads bronze and silver and writes files only.
struct Scd2Planner<'a, 'c> {
    ctx: &'a RunContext<'c>,
    cfg: &'a RefineJob,
    apply: &'a CdcApply,
    app: String,
    report: RunReport,
    /// Deletes and truncates to store before the commit (`stored`), with their columns.
    pending: Option<(RecordBatch, Vec<String>)>,
    /// The side table holds rows older than the retention: expire after the commit.
    expire_due: bool,
}

impl ChangePlanner for Scd2Planner<'_, '_> {
    fn app_ids(&self) -> Vec<String> {
        vec![self.app.clone()]
    }

    async fn plan(&mut self, output: &TableHandle, state: &TableState) -> Result<Option<Proposal>> {
        let consumed = state
            .committed
            .get(&self.app)
            .and_then(|v| u64::try_from(*v).ok());
        self.report = RunReport::new(RunCounts::Upsert(UpsertCounts::default()));
        self.pending = None;
        self.expire_due = false;
        let voided = voided_truncates(output)?;
        let Some(read) = read_changes(self.ctx, self.cfg, self.apply, (consumed, &voided)).await?
        else {
            self.report.waiting_for = Some(self.apply.source.clone());
            return Ok(None);
        };
        if !read.read.chunk.advanced() {
            return Ok(None);
        }
        plan(self, output, state, consumed, read).await.map(Some)
    }

    async fn side_writes(&mut self, _: &Proposal) -> Result<()> {
        let Some((rows, columns)) = &self.pending else {
            return Ok(());
        };
        let seqs = cast(
            rows.column_by_name(bronze::SEQ)
                .ok_or_else(|| Error::Internal("stored rows without `__seq`".into()))?,
            &DataType::Utf8,
        )?;
        let ties = seqs
            .as_string::<i32>()
            .iter()
            .map(|s| s.unwrap_or_default().to_string())
            .collect();
        let table = tombstones::table_name(&self.cfg.job);
        let ctx = self.ctx;
        let dates = stored::dates(rows, &ctx.now.format("%Y-%m-%d").to_string())?;
        tombstones::write_in(ctx, &table, rows, (columns, ties), dates).await
    }
}

/// Run the SCD2 apply once (re-planned from a fresh snapshot on conflict).
pub(crate) async fn run_once(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    apply: &CdcApply,
    mut output: TableHandle,
) -> Result<RunReport> {
    let mut planner = Scd2Planner {
        ctx,
        cfg,
        apply,
        app: ctx.app_id(&cfg.job, &apply.source),
        report: RunReport::new(RunCounts::Upsert(UpsertCounts::default())),
        pending: None,
        expire_due: false,
    };
    let ran = run(&mut output, ctx.settings, &mut planner).await?;
    ctx.keep(output); // the next run starts from this commit
    let mut report = planner.report;
    report.attempts = ran.attempts;
    report.output_version = ran.landed.map(|l| l.version);
    // Only when the side table loaded for the plan has a partition past the retention: no
    // second load of it per commit.
    if ran.landed.is_some() && planner.expire_due {
        // Stored deletes older than the retention go, recording the side table's horizon
        // (`stored`); truncates are in a partition that never expires.
        stored::expire(
            ctx,
            &tombstones::table_name(&cfg.job),
            apply.tombstone_retention,
        )
        .await?;
    }
    Ok(report)
}

/// The silver schema of `changes`: keys and row columns, `__seq`, `__START_AT`, `__END_AT`,
/// `__END_SEQ`; after the existing silver columns when there are some.
fn silver_schema(current: Option<SchemaRef>, changes: &SchemaRef) -> SchemaRef {
    let ts = crate::schema::timestamp_type();
    let mut fields: Vec<Field> = current
        .as_ref()
        .map(|c| c.fields().iter().map(|f| f.as_ref().clone()).collect())
        .unwrap_or_default();
    let mut incoming: Vec<Field> = changes
        .fields()
        .iter()
        .filter(|f| !super::changes::KEPT.contains(&f.name().as_str()))
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    incoming.extend([
        Field::new(silver::SEQ, DataType::Utf8, true),
        Field::new(silver::START_AT, ts.clone(), true),
        Field::new(silver::END_AT, ts, true),
        Field::new(silver::END_SEQ, DataType::Utf8, true),
    ]);
    for f in incoming {
        if !fields.iter().any(|c| c.name() == f.name()) {
            fields.push(f);
        }
    }
    Arc::new(Schema::new(fields))
}

/// The changes without truncates, and the truncates.
fn split_truncates(changes: &RecordBatch) -> Result<(RecordBatch, Vec<Truncate>)> {
    let op = cast(
        changes
            .column_by_name(bronze::OP)
            .ok_or_else(|| Error::Internal("changes without `__op`".into()))?,
        &DataType::Utf8,
    )?;
    let is_t: Vec<bool> = op
        .as_string::<i32>()
        .iter()
        .map(|o| o == Some(bronze::OP_TRUNCATE))
        .collect();
    if !is_t.contains(&true) {
        return Ok((changes.clone(), vec![]));
    }
    let one = RecordBatch::try_new(changes.schema(), changes.columns().to_vec())?;
    let keep = BooleanArray::from(is_t.iter().map(|t| !t).collect::<Vec<_>>());
    let only_t = BooleanArray::from(is_t);
    let t = filter_record_batch(&one, &only_t)?;
    let seqs = cast(
        t.column_by_name(bronze::SEQ)
            .ok_or_else(|| Error::Internal("changes without `__seq`".into()))?,
        &DataType::Utf8,
    )?;
    let pick = |name: &str| -> Result<Vec<Option<i64>>> {
        match t.column_by_name(name) {
            Some(c) => Ok(cast(
                c,
                &DataType::Timestamp(deltalake::arrow::datatypes::TimeUnit::Microsecond, None),
            )?
            .as_primitive::<deltalake::arrow::datatypes::TimestampMicrosecondType>()
            .iter()
            .collect()),
            None => Ok(vec![None; t.num_rows()]),
        }
    };
    let (ts, ing) = (pick(bronze::SOURCE_TS)?, pick(bronze::INGESTED_AT)?);
    let truncates = seqs
        .as_string::<i32>()
        .iter()
        .zip(ts.into_iter().zip(ing))
        .map(|(s, (a, b))| Truncate {
            seq: s.unwrap_or_default().to_string(),
            at: a.or(b),
        })
        .collect();
    Ok((filter_record_batch(&one, &keep)?, truncates))
}

/// Plan one commit (files written, nothing committed).
async fn plan(
    p: &mut Scd2Planner<'_, '_>,
    output: &TableHandle,
    state: &TableState,
    consumed: Option<u64>,
    read: ChangeRead,
) -> Result<Proposal> {
    let (changes, truncates) = split_truncates(&read.changes)?;
    let schema = silver_schema(state.schema.clone(), &read.changes.schema());
    let codec = KeyCodec::new(&schema, &read.keys)?;
    let incoming: HashSet<Vec<u8>> = codec.encode(&changes)?.into_iter().collect();

    // The silver rows of the touched keys, per file read.
    let files = match state.version {
        Some(_) => {
            let touched = silver_files::Touched {
                keys: &read.keys,
                changes: &changes,
                truncates: &truncates,
                codec: &codec,
            };
            silver_files::read_silver(output, touched, &schema).await?
        }
        None => Vec::new(),
    };
    let old = silver_files::old_rows(&files, &incoming, &truncates, &schema)?;
    // A stored version starts no earlier than its change's commit: a change at a lower position
    // committed after it proves the positions went back.
    let who = super::changes::who(p.cfg, p.apply);
    super::positions::check(&changes, Some((&old, silver::START_AT)), &read.keys, who)?;
    // A first run (a new or rebuilt silver) reads all of bronze, the forgotten deletes too:
    // nothing is kept out by the horizon then.
    let incremental = state.version.is_some() && consumed.is_some();
    let (side, changes, kept_out) =
        side_table(p, (output, incremental), &codec, &old, &changes).await?;
    let cutoff = stored::cutoff(p.ctx.now, p.apply.tombstone_retention);
    p.expire_due = side.oldest.as_deref().is_some_and(|d| d < cutoff.as_str());
    let kept = &side.stored;
    check_truncates(&changes, &truncates, kept, who)?;
    let toast = p.apply.toast_placeholder.as_deref().map(Toast::new);
    let run = history::RunChanges {
        changes: &changes,
        truncates: &truncates,
        toast: toast.as_ref(),
    };
    let rebuilt = history::rebuild(&schema, &codec, &old, run, kept)?;
    p.pending = stored::to_store(&codec, &rebuilt, &truncates, kept)?.map(|rows| {
        let schema = rows.schema();
        let columns = schema.fields().iter().map(|f| f.name().clone()).collect();
        (rows, columns)
    });

    // Rewrite the files holding changed keys; write the changed keys' rows.
    let (adds, removes) = silver_files::write_changed(p, &schema, &files, &codec, &rebuilt).await?;
    let cdc_files = write_feed(p, &schema, &rebuilt.feed, (&adds, &removes)).await?;

    let chunk = &read.read.chunk;
    p.report.sides = vec![SideReport {
        table: p.apply.source.clone(),
        from: consumed,
        to: chunk.end,
        latest: chunk.latest,
        files: chunk.files(),
        rows: read.changes.num_rows(),
        late: 0,
    }];
    p.report.counts = RunCounts::Upsert(UpsertCounts {
        inserted: rebuilt.inserted,
        updated: rebuilt.closed,
        older_ignored: kept_out,
        ..Default::default()
    });
    let change = Change {
        read_version: state.version,
        operation: DeltaOperation::Merge {
            predicate: None,
            merge_predicate: Some(format!("SCD2 history of {} key(s)", rebuilt.changed.len())),
            matched_predicates: vec![],
            not_matched_predicates: vec![],
            not_matched_by_source_predicates: vec![],
        },
        adds,
        removes,
        txns: vec![Transaction::new(&p.app, chunk.end.unwrap_or(0) as i64)],
        scope: ReadScope::Table,
        properties: truncated_at(output, &truncates)
            .into_iter()
            .chain(super::positions::resets_property(
                output,
                &p.apply.position_resets,
            )?)
            .collect(),
        cdc_files,
        info: vec![],
    };
    proposal(p, &read, change, schema)
}

/// `Err` when a change ranks below a truncate (the run's or a stored one) but was committed
/// after it: the positions went back.
fn check_truncates(
    changes: &RecordBatch,
    truncates: &[Truncate],
    kept: &[history::Stored],
    who: (&str, &str, Option<&str>),
) -> Result<()> {
    let all: Vec<(&str, Option<i64>)> = truncates
        .iter()
        .map(|t| (t.seq.as_str(), t.at))
        .chain(
            kept.iter()
                .filter(|k| k.key.is_none())
                .map(|k| (k.seq.as_str(), k.at)),
        )
        .collect();
    super::positions::check_truncates(changes, &all, who)
}

/// The job's side table (truncates an operator voided left out) and the run's `changes`
/// without those its horizon keeps out (an `incremental` run only), with their count.
async fn side_table(
    p: &Scd2Planner<'_, '_>,
    (output, incremental): (&TableHandle, bool),
    codec: &KeyCodec,
    old: &RecordBatch,
    changes: &RecordBatch,
) -> Result<(stored::Side, RecordBatch, usize)> {
    let tombs = tombstones::table_name(&p.cfg.job);
    let mut side = stored::load(p.ctx, &tombs, codec).await?;
    let voided = voided_truncates(output)?;
    side.stored
        .retain(|s| s.key.is_some() || !voided.iter().any(|v| v == unranked(&s.seq)));
    let (job, table, family) = super::changes::who(p.cfg, p.apply);
    let who: super::positions::Who = (job.into(), table.into(), family.map(Into::into));
    if !incremental {
        return Ok((side, changes.clone(), 0));
    }
    let (changes, kept_out) = stored::keep_out(changes, old, &side, codec, &who)?;
    Ok((side, changes, kept_out))
}

/// The commit's `lakestream.cdc.truncated_at` property: the newest of `truncates`, when newer
/// than the one the silver records.
fn truncated_at(output: &TableHandle, truncates: &[Truncate]) -> Vec<(String, String)> {
    let mut properties = Vec::new();
    if let Some(t) = truncates.iter().map(|t| &t.seq).max() {
        let recorded = output.snapshot().ok().and_then(|s| {
            s.metadata()
                .configuration()
                .get(silver::TRUNCATED_AT_PROPERTY)
                .cloned()
        });
        if recorded.as_ref().is_none_or(|r| r < t) {
            properties.push((silver::TRUNCATED_AT_PROPERTY.to_string(), t.clone()));
        }
    }
    properties
}

/// The commit of `change` in `schema`, and how a new silver is created (job and source table
/// id properties, the change data feed on).
fn proposal(
    p: &Scd2Planner<'_, '_>,
    read: &ChangeRead,
    change: Change,
    schema: SchemaRef,
) -> Result<Proposal> {
    let src_id = read.read.handle.table_id()?;
    Ok(Proposal {
        change,
        schema,
        create: Some(NewTable {
            partition_columns: vec![],
            configuration: vec![
                (
                    "delta.checkpointInterval".into(),
                    p.ctx.settings.checkpoint_interval.to_string(),
                ),
                (JOB_PROPERTY.into(), p.cfg.job.clone()),
                (source_id_property(&p.apply.source), src_id),
            ],
            change_data_feed: true,
        }),
    })
}

/// The change feed rows as change data files; none for a commit that only inserts (new keys'
/// first versions, no file rewritten): readers derive its rows from its adds.
async fn write_feed(
    p: &Scd2Planner<'_, '_>,
    schema: &SchemaRef,
    feed: &[(crate::commit::ChangeType, RecordBatch)],
    (adds, removes): (&[Add], &[Remove]),
) -> Result<Vec<deltalake::kernel::AddCDCFile>> {
    let with_type = change_schema(schema);
    let mut parts = Vec::new();
    for (kind, rows) in feed {
        let mut cols: Vec<ArrayRef> = rows.columns().to_vec();
        cols.push(Arc::new(StringArray::from(vec![
            kind.as_str();
            rows.num_rows()
        ])));
        parts.push(RecordBatch::try_new(with_type.clone(), cols)?);
    }
    let all = concat_batches(&with_type, &parts)?;
    debug_assert!(all.schema().index_of(CHANGE_TYPE).is_ok());
    if derivable_from_actions(adds, removes, &all) {
        return Ok(vec![]);
    }
    write_change_data(p.ctx.lake, &p.cfg.output, schema.clone(), &[], &all).await
}
