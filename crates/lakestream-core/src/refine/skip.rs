//! `--skip-to`: record a source version as consumed without writing rows — how a job skips
//! versions that are gone (log retention, vacuum) or accepts a re-created source. One commit
//! on the one commit loop for every kind of job; only what a skip that creates the output
//! needs (its schema) depends on the kind.

use super::context::{JOB_PROPERTY, RunContext, source_id_property};
use super::join::output::output_schema;
use crate::commit::{self, ChangePlanner, Proposal, TableState};
use crate::error::{Error, Result};
use crate::table::TableHandle;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::Transaction;
use lakestream_formats::refine::{JobKind, RefineJob};

/// Record `version` as the last version of `table` the job consumed (`-1`: nothing), without
/// writing rows: how a job skips versions that are gone, or accepts a re-created source.
pub async fn skip_to(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    table: &str,
    version: i64,
) -> Result<Option<u64>> {
    if !cfg.sources().contains(&table) {
        return Err(Error::Config(format!(
            "refine job `{}` does not read `{table}`",
            cfg.job
        )));
    }
    let mut properties = vec![(JOB_PROPERTY.to_string(), cfg.job.clone())];
    // The schema of the output when the skip creates it.
    let schema = match &cfg.kind {
        JobKind::Join(join) => {
            let mut schemas = Vec::new();
            for t in cfg.sources() {
                let h = TableHandle::open_existing(ctx.lake, t).await?;
                schemas.push(h.arrow_schema()?);
                properties.push((source_id_property(t), h.table_id()?));
            }
            output_schema(cfg, join, &schemas[0], &schemas[1])?
        }
        JobKind::Cdc(_) => {
            return Err(Error::Config(format!(
                "refine job `{}`: --skip-to is not supported for CDC apply jobs (a skipped change could never be applied in order); to start again from bronze as it is now, rebuild silver: `lakestream refine {} --rebuild` (its first run reads bronze's snapshot, not the log)",
                cfg.job, cfg.job
            )));
        }
        JobKind::Aggregate(_) => {
            return Err(Error::Config(format!(
                "refine job `{}`: --skip-to is not supported for aggregates (skipped changes would leave every group inexact); rebuild it instead: `lakestream refine {} --rebuild` (its first run reads the source's snapshot)",
                cfg.job, cfg.job
            )));
        }
        JobKind::Upsert(_) => {
            let src = TableHandle::open_existing(ctx.lake, table).await?;
            properties.push((source_id_property(table), src.table_id()?));
            src.arrow_schema()?
        }
    };
    let mut planner = SkipPlanner::new(ctx, cfg, table, version, schema, properties);
    let mut output = TableHandle::open(ctx.lake, &cfg.output)?;
    Ok(commit::run(&mut output, ctx.settings, &mut planner)
        .await?
        .landed
        .map(|l| l.version))
}

/// Records a source version as consumed without writing rows — and, when the source was
/// re-created, its new table id — in one commit on the one commit loop.
struct SkipPlanner {
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
    fn new(
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
            txn: Transaction::new(ctx.app_id(&cfg.job, table), version),
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
                change_data_feed: false,
            }),
        }))
    }
}
