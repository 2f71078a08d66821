//! Refine jobs: derived tables computed from what source Delta tables gained, exactly once
//! (ARCHITECTURE.md "Refine"). Two kinds: the interval join (the seed's curated job) and the
//! keyed latest-wins upsert (the seed's processed job; CDC deletes).
//!
//! - [`source`]: the incremental Delta source (Spark's Delta-source rules, bounded chunks).
//! - [`join`]: keys, event times, the lateness rule and interval matching on Arrow batches.
//! - [`state`]: the other side's consumed rows, read from the source table itself with pruning.
//! - [`job`]: one join run on the checked commit path (output + one `txn` per source, one commit).
//! - [`upsert`]: one upsert run (copy-on-write: rewrite files that lose rows, add new rows).

pub mod job;
pub mod join;
pub mod source;
pub mod state;
pub mod upsert;

pub use job::{RunContext, output_schema, source_app_id, source_id_property};

use crate::commit::{self, ChangePlanner, Proposal, TableState};
use crate::error::{Error, Result};
use crate::table::TableHandle;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::Transaction;
use lakestream_formats::refine::{JobKind, RefineJob};

/// What one run read from a source.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SideReport {
    /// Source table.
    pub table: String,
    /// Last version consumed before the run (`None`: nothing).
    pub from: Option<u64>,
    /// Last version consumed by the run.
    pub to: Option<u64>,
    /// The source's latest version.
    pub latest: u64,
    /// New data files read.
    pub files: usize,
    /// New rows read.
    pub rows: usize,
    /// New rows that were late, or beyond processing time plus `max_future_skew` (dead-lettered,
    /// not joined).
    pub late: usize,
}

/// What one run did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunReport {
    /// Per source (left first); empty when there was nothing new.
    pub sides: Vec<SideReport>,
    /// Output rows appended (join).
    pub joined: usize,
    /// Keys inserted (upsert).
    pub inserted: usize,
    /// Keys whose row was replaced by a newer one (upsert).
    pub updated: usize,
    /// Keys deleted (upsert, CDC).
    pub deleted: usize,
    /// Source rows ignored because the output or a tombstone already had a newer row (upsert).
    pub older_ignored: usize,
    /// The output version committed.
    pub output_version: Option<u64>,
    /// Commit attempts (more than 1: a concurrent run or a storage error made it re-plan).
    pub attempts: u32,
    /// A source table does not exist yet: nothing was read.
    pub waiting_for: Option<String>,
}

/// What a job did until nothing was new (or the run budget ended).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct JobReport {
    /// The job.
    pub job: String,
    /// Each run that committed, in order.
    pub runs: Vec<RunReport>,
    /// Sources still have unread versions (the run budget ended first).
    pub more: bool,
    /// A source table does not exist yet.
    pub waiting_for: Option<String>,
}

impl JobReport {
    /// Rows read, late and consumed versions per source, over all runs.
    pub fn totals(&self) -> Vec<SideReport> {
        let mut out: Vec<SideReport> = Vec::new();
        for r in &self.runs {
            for s in &r.sides {
                match out.iter_mut().find(|o| o.table == s.table) {
                    Some(o) => {
                        o.to = s.to;
                        o.latest = s.latest;
                        o.files += s.files;
                        o.rows += s.rows;
                        o.late += s.late;
                    }
                    None => out.push(s.clone()),
                }
            }
        }
        out
    }

    /// Output rows appended over all runs.
    pub fn joined(&self) -> usize {
        self.runs.iter().map(|r| r.joined).sum()
    }

    /// Keys inserted, updated, deleted and source rows ignored as older, over all runs.
    pub fn upserted(&self) -> [usize; 4] {
        self.runs.iter().fold([0; 4], |a, r| {
            [
                a[0] + r.inserted,
                a[1] + r.updated,
                a[2] + r.deleted,
                a[3] + r.older_ignored,
            ]
        })
    }
}

/// Fail when a source was re-created since the output recorded its table id.
pub(crate) async fn check_source_ids(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    output: &TableHandle,
) -> Result<()> {
    let snapshot = output
        .table()
        .snapshot()
        .map_err(|e| Error::storage(&cfg.output, e))?;
    let recorded = snapshot.metadata().configuration();
    for table in cfg.sources() {
        let Some(expected) = recorded.get(&source_id_property(table)) else {
            continue;
        };
        let mut h = TableHandle::open(ctx.lake, table)?;
        if !h.refresh().await? {
            continue;
        }
        let s = h.table().snapshot().map_err(|e| Error::storage(table, e))?;
        let id = s.metadata().id();
        if id != expected {
            return Err(Error::Source {
                job: cfg.job.clone(),
                table: table.to_string(),
                reason: format!(
                    "the table was re-created (table id {id}, the output `{}` was built from {expected}); \
                     its versions no longer mean what the job consumed. Rebuild the output (delete it and \
                     run again) or accept the new table with `lakestream refine {} --skip-to {table}=-1`",
                    cfg.output, cfg.job
                ),
            });
        }
    }
    Ok(())
}

/// One run: read the next chunk of each source, join, append with `txn`s in one commit.
pub async fn run_once(ctx: &RunContext<'_>, cfg: &RefineJob) -> Result<RunReport> {
    let mut output = TableHandle::open(ctx.lake, &cfg.output)?;
    if output.refresh().await? {
        check_source_ids(ctx, cfg, &output).await?;
    }
    let join = match &cfg.kind {
        JobKind::Join(join) => join,
        JobKind::Upsert(upsert) => return upsert::run_once(ctx, cfg, upsert, output).await,
    };
    let mut planner = job::JoinPlanner {
        ctx,
        cfg,
        join,
        report: RunReport::default(),
        letters: vec![],
    };
    let outcome = commit::append(ctx.lake, &mut output, ctx.settings, &mut planner).await?;
    let mut report = planner.report;
    report.output_version = outcome.version;
    report.attempts = outcome.attempts;
    if outcome.version.is_none() {
        report.sides.clear();
        report.joined = 0;
    }
    Ok(report)
}

/// Run `cfg` until nothing is new, at most `max_runs` committed runs.
pub async fn run_job(ctx: &RunContext<'_>, cfg: &RefineJob, max_runs: usize) -> Result<JobReport> {
    let mut report = JobReport {
        job: cfg.job.clone(),
        ..Default::default()
    };
    loop {
        if report.runs.len() >= max_runs {
            report.more = true;
            break;
        }
        let run = run_once(ctx, cfg).await?;
        if run.waiting_for.is_some() {
            report.waiting_for = run.waiting_for;
            break;
        }
        if run.output_version.is_none() {
            break;
        }
        let done = run.sides.iter().all(|s| s.to == Some(s.latest));
        report.runs.push(run);
        if done {
            break;
        }
    }
    Ok(report)
}

/// The jobs named (all when empty) in dependency order: a job reading another job's output
/// runs after it.
pub fn in_dependency_order<'a>(
    jobs: &'a [RefineJob],
    named: &[String],
) -> Result<Vec<&'a RefineJob>> {
    for n in named {
        if !jobs.iter().any(|j| &j.job == n) {
            let known: Vec<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
            return Err(Error::Config(format!(
                "no refine job `{n}` (configured: {})",
                known.join(", ")
            )));
        }
    }
    let wanted: Vec<&RefineJob> = jobs
        .iter()
        .filter(|j| named.is_empty() || named.contains(&j.job))
        .collect();
    let mut done: Vec<&RefineJob> = Vec::new();
    while done.len() < wanted.len() {
        let next = wanted.iter().find(|j| {
            !done.iter().any(|d| d.job == j.job)
                && j.sources().iter().all(|s| {
                    wanted
                        .iter()
                        .all(|o| o.output != *s || done.iter().any(|d| d.job == o.job))
                })
        });
        match next {
            Some(j) => done.push(j),
            None => {
                return Err(Error::Config(
                    "refine jobs read each other's outputs in a cycle".into(),
                ));
            }
        }
    }
    Ok(done)
}

/// Record `version` as the last version of `table` the job consumed (`-1`: nothing), without
/// writing rows: how a job skips versions that are gone, or accepts a re-created source.
pub async fn skip_to(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    table: &str,
    version: i64,
) -> Result<Option<u64>> {
    let JobKind::Join(join) = &cfg.kind else {
        return upsert::skip_to(ctx, cfg, table, version).await;
    };
    if !cfg.sources().contains(&table) {
        return Err(Error::Config(format!(
            "refine job `{}` does not read `{table}`",
            cfg.job
        )));
    }
    let mut schemas = Vec::new();
    let mut properties = vec![("lakestream.refine.job".to_string(), cfg.job.clone())];
    for t in cfg.sources() {
        let h = TableHandle::open_existing(ctx.lake, t).await?;
        schemas.push(h.arrow_schema()?);
        properties.push((source_id_property(t), h.table_id()?));
    }
    let mut planner = SkipPlanner::new(
        ctx,
        cfg,
        table,
        version,
        output_schema(cfg, join, &schemas[0], &schemas[1])?,
        properties,
    );
    let mut output = TableHandle::open(ctx.lake, &cfg.output)?;
    Ok(commit::run(&mut output, ctx.settings, &mut planner)
        .await?
        .landed
        .map(|l| l.version))
}

/// Records a source version as consumed without writing rows — and, when the source was
/// re-created, its new table id — in one commit on the one commit loop.
pub(crate) struct SkipPlanner {
    txn: Transaction,
    /// The output schema when the skip creates the output table.
    schema: SchemaRef,
    partition_columns: Vec<String>,
    /// Properties of a created output (job name, source ids, checkpoint interval).
    create_properties: Vec<(String, String)>,
    /// The skipped source's id property and its current table id.
    source_id: (String, String),
}

impl SkipPlanner {
    /// A skip of `table` to `version` for `cfg`; `properties` holds the job name and the id
    /// property of every source (the skipped one's is updated when it changed).
    pub(crate) fn new(
        ctx: &RunContext<'_>,
        cfg: &RefineJob,
        table: &str,
        version: i64,
        schema: SchemaRef,
        mut properties: Vec<(String, String)>,
    ) -> Self {
        let key = source_id_property(table);
        let id = properties
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        properties.push((
            "delta.checkpointInterval".into(),
            ctx.settings.checkpoint_interval.to_string(),
        ));
        Self {
            txn: Transaction::new(source_app_id(ctx.pipeline, &cfg.job, table), version),
            schema,
            partition_columns: cfg.partition_by.clone(),
            create_properties: properties,
            source_id: (key, id),
        }
    }
}

impl ChangePlanner for SkipPlanner {
    async fn plan(&mut self, output: &TableHandle, state: &TableState) -> Result<Option<Proposal>> {
        let (key, id) = &self.source_id;
        let properties = match state.version {
            Some(_) if output.property(key)?.as_ref() != Some(id) => {
                vec![(key.clone(), id.clone())]
            }
            _ => vec![],
        };
        let mut change = commit::Change::append(
            state.version,
            deltalake::protocol::DeltaOperation::Write {
                mode: deltalake::protocol::SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
            vec![],
            vec![self.txn.clone()],
        );
        change.properties = properties;
        Ok(Some(Proposal {
            change,
            schema: state.schema.clone().unwrap_or_else(|| self.schema.clone()),
            create: Some(commit::NewTable {
                partition_columns: self.partition_columns.clone(),
                configuration: self.create_properties.clone(),
            }),
        }))
    }
}
