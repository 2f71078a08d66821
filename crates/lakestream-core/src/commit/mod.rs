//! The commit engine: every change to a table — create, append, dead letters, compaction, and
//! later upsert/delete/join output — goes through one checked path.
//!
//! Protocol (see ARCHITECTURE.md "Commit protocol"):
//! 1. Load the table (a warm handle is used as is: its head already includes our own last
//!    commit); read the committed `txn` version of each appId involved.
//! 2. Ask the [`Planner`] what to write given that state: it drops records at or below the
//!    committed versions and decodes the rest against the table's *current* schema.
//! 3. Write the Parquet files, then [`land`] the [`Change`] (data + `txn` actions + new metadata
//!    on schema evolution) as one conditional PUT of the next log entry.
//! 4. Version taken: read every commit in between. Our own commit id there means it landed;
//!    otherwise the conflict table ([`change::check`]) decides between rebasing (no re-plan) and
//!    re-planning from a fresh snapshot after a full-jitter backoff (a replay then finds its
//!    offsets committed and writes nothing). Storage errors read the log the same way before
//!    retrying; permanent errors stop at once.

pub mod change;
pub mod change_data;
pub mod classify;
pub mod entry;
pub mod land;
mod put;
pub mod run;

pub use change::{Change, Conflict, ReadScope};
pub use change_data::{
    CHANGE_TYPE, ChangeType, change_schema, derivable_from_actions, write_change_data,
    write_empty_change_data,
};
pub use land::{Failure, Landed};
pub use put::{ENABLE_CDF, NewTable, cdf_enabled, cdf_guard};
pub use run::{ChangePlanner, Decision, Fixed, Proposal, Ran, run};

use crate::error::{Error, Result};
use deltalake::DeltaTableError;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::{Add, Transaction};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use std::collections::HashMap;
use std::time::Duration;

use crate::storage::Lake;
use crate::table::TableHandle;

/// Retry and checkpoint settings of the engine.
#[derive(Debug, Clone)]
pub struct CommitSettings {
    /// `delta.checkpointInterval` set on tables this engine creates.
    pub checkpoint_interval: u32,
    /// Outer attempts (reload + re-plan + backoff).
    pub max_attempts: u32,
    /// Rebases onto newer, non-conflicting commits inside one attempt (our check, no re-plan).
    pub inner_retries: usize,
    /// First backoff.
    pub base_backoff: Duration,
    /// Backoff ceiling.
    pub max_backoff: Duration,
}

impl From<&lakestream_formats::config::CommitConfig> for CommitSettings {
    fn from(c: &lakestream_formats::config::CommitConfig) -> Self {
        Self {
            checkpoint_interval: c.checkpoint_interval,
            max_attempts: c.max_attempts,
            inner_retries: 3,
            base_backoff: Duration::from_millis(c.base_backoff_ms),
            max_backoff: Duration::from_millis(c.max_backoff_ms),
        }
    }
}

/// The state a [`Planner`] plans against.
#[derive(Debug)]
pub struct TableState {
    /// The version planned from (`None`: the table does not exist yet); a change planned on
    /// this state carries it as its [`Change::read_version`].
    pub version: Option<u64>,
    /// Current Arrow schema, `None` when the table does not exist yet.
    pub schema: Option<SchemaRef>,
    /// Committed `txn` version per appId asked for (absent = never committed).
    pub committed: HashMap<String, i64>,
    /// The table's properties (its `metaData` configuration).
    pub properties: HashMap<String, String>,
}

impl TableState {
    /// What `handle` knows as of its head: version, schema and the committed `txn` versions
    /// of `app_ids` (asked of the log only for appIds its cache does not know). Empty when the
    /// table does not exist yet.
    pub async fn read(handle: &mut TableHandle, app_ids: &[String]) -> Result<Self> {
        if !handle.exists() {
            return Ok(Self {
                version: None,
                schema: None,
                committed: HashMap::new(),
                properties: HashMap::new(),
            });
        }
        Ok(Self {
            version: handle.version(),
            schema: Some(handle.arrow_schema()?),
            committed: handle.committed(app_ids).await?,
            properties: handle.snapshot()?.metadata().configuration().clone(),
        })
    }
}

/// What to write on this attempt.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Rows to append (schema compatible with `schema`).
    pub batch: RecordBatch,
    /// The table schema after this commit.
    pub schema: SchemaRef,
    /// Partition columns (used when the table is created).
    pub partition_columns: Vec<String>,
    /// `txn` actions committed with the data.
    pub txns: Vec<Transaction>,
    /// Table properties set when this commit creates the table.
    pub table_properties: Vec<(String, String)>,
    /// Table properties this commit sets on an existing table (a `metaData` action).
    pub set_properties: Vec<(String, String)>,
    /// Commit the `txn`s (or `set_properties`) even when there are no rows (a refine run that
    /// consumed source versions but produced nothing still records how far it read).
    pub commit_if_empty: bool,
}

/// Decides what to write given the table's state; called once per attempt.
#[allow(async_fn_in_trait)]
pub trait Planner {
    /// The appIds whose committed versions the plan needs.
    fn app_ids(&self) -> Vec<String>;
    /// Plan the write; `None` means nothing to write (e.g. everything already committed).
    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>>;
    /// Writes to other tables the last plan needs durable before its commit (e.g. the join's
    /// late rows into dead letters); run by the loop after each plan, so idempotent.
    async fn side_writes(&mut self) -> Result<()> {
        Ok(())
    }
    /// The plan asks about many appIds (one per object or per record): load every `txn` of
    /// the table in one pass instead of one log replay per unknown appId.
    fn wants_all_txns(&self) -> bool {
        false
    }
}

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitOutcome {
    /// Version committed (or found committed), `None` when nothing was written.
    pub version: Option<u64>,
    /// Data files added.
    pub files: usize,
    /// Bytes of data files added.
    pub bytes: u64,
    /// Rows appended.
    pub rows: usize,
    /// Attempts used (1 = first try).
    pub attempts: u32,
    /// Conflicts seen (outer retries caused by other writers).
    pub conflicts: u32,
    /// The outcome of an ambiguous commit was established by reading the log.
    pub resolved_from_log: bool,
    /// The commit changed the table schema (or created the table).
    pub schema_changed: bool,
}

/// Backoff before attempt `attempt` (2, 3, ...): full jitter over an exponential ceiling.
pub fn backoff(settings: &CommitSettings, attempt: u32, jitter: f64) -> Duration {
    let exp = attempt.saturating_sub(2).min(20);
    let ceiling = settings
        .base_backoff
        .saturating_mul(1u32 << exp)
        .min(settings.max_backoff);
    ceiling.mul_f64(jitter.clamp(0.0, 1.0))
}

/// Append to the table behind `handle`: the batch [`Planner`] is adapted to the one commit
/// loop ([`run()`]) — its rows are written to data files and committed with its `txn`s.
pub async fn append(
    lake: &Lake,
    handle: &mut TableHandle,
    settings: &CommitSettings,
    planner: &mut impl Planner,
) -> Result<CommitOutcome> {
    let mut adapter = AppendPlanner {
        lake,
        inner: planner,
        checkpoint_interval: settings.checkpoint_interval,
        staged: None,
        rows: 0,
        schema_changed: false,
    };
    let ran = run::run(handle, settings, &mut adapter).await?;
    let mut outcome = CommitOutcome {
        attempts: ran.attempts,
        conflicts: ran.conflicts,
        ..Default::default()
    };
    if let (Some(landed), Some(p)) = (ran.landed, ran.proposal) {
        outcome.version = Some(landed.version);
        outcome.files = p.change.adds.len();
        outcome.bytes = p.change.adds.iter().map(|a| a.size.max(0) as u64).sum();
        outcome.rows = adapter.rows;
        outcome.resolved_from_log = landed.resolved_from_log;
        outcome.schema_changed = adapter.schema_changed;
    }
    Ok(outcome)
}

/// A batch [`Planner`] as a [`ChangePlanner`]: rows -> data files -> an append change.
struct AppendPlanner<'a, P> {
    lake: &'a Lake,
    inner: &'a mut P,
    checkpoint_interval: u32,
    /// Files written on an earlier attempt, reusable only for exactly the same rows and txns.
    staged: Option<(RecordBatch, Vec<Transaction>, Vec<Add>)>,
    rows: usize,
    schema_changed: bool,
}

impl<P: Planner> ChangePlanner for AppendPlanner<'_, P> {
    async fn side_writes(&mut self, _: &Proposal) -> Result<()> {
        self.inner.side_writes().await
    }

    fn app_ids(&self) -> Vec<String> {
        self.inner.app_ids()
    }

    fn wants_all_txns(&self) -> bool {
        self.inner.wants_all_txns()
    }

    async fn plan(&mut self, handle: &TableHandle, state: &TableState) -> Result<Option<Proposal>> {
        let Some(plan) = self.inner.plan(state).await? else {
            return Ok(None);
        };
        // Properties the table already has are not set again (a `metaData` action conflicts
        // with every concurrent writer).
        let set_properties: Vec<(String, String)> = plan
            .set_properties
            .iter()
            .filter(|(k, v)| state.properties.get(k) != Some(v))
            .cloned()
            .collect();
        let txns_only = plan.commit_if_empty && !plan.txns.is_empty();
        let properties_only = plan.commit_if_empty && !set_properties.is_empty();
        if plan.batch.num_rows() == 0 && !txns_only && !properties_only {
            return Ok(None);
        }
        let exists = state.version.is_some();
        self.schema_changed = state
            .schema
            .as_ref()
            .is_none_or(|s| s.fields() != plan.schema.fields());
        let adds = match self.staged.take() {
            Some((batch, txns, adds)) if batch == plan.batch && txns == plan.txns => adds,
            _ => write_files(self.lake, handle, exists, &plan).await?,
        };
        self.staged = Some((plan.batch.clone(), plan.txns.clone(), adds.clone()));
        self.rows = plan.batch.num_rows();
        let partition_by = if exists {
            handle.partition_columns()?
        } else {
            plan.partition_columns.clone()
        };
        let mut change = Change::append(
            state.version,
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: (!partition_by.is_empty()).then_some(partition_by),
                predicate: None,
            },
            adds,
            plan.txns.clone(),
        );
        change.properties = set_properties;
        let mut configuration = vec![(
            "delta.checkpointInterval".to_string(),
            self.checkpoint_interval.to_string(),
        )];
        configuration.extend(plan.table_properties.iter().cloned());
        Ok(Some(Proposal {
            change,
            schema: plan.schema,
            create: Some(NewTable {
                partition_columns: plan.partition_columns,
                configuration,
                change_data_feed: false,
            }),
        }))
    }
}

/// A Parquet writer for new data files of `name` (delta-rs's, with its statistics).
pub(crate) fn batch_writer(
    lake: &Lake,
    name: &str,
    schema: SchemaRef,
    partition_columns: Vec<String>,
) -> Result<RecordBatchWriter> {
    let url = lake.table_url(name)?;
    batch_writer_at(lake, name, url.as_str(), schema, partition_columns)
}

/// [`batch_writer`] writing below `url` (a directory of table `name`, e.g. its
/// `_change_data/`): returned paths are relative to `url`.
pub(crate) fn batch_writer_at(
    lake: &Lake,
    name: &str,
    url: &str,
    schema: SchemaRef,
    partition_columns: Vec<String>,
) -> Result<RecordBatchWriter> {
    RecordBatchWriter::try_new(
        url,
        schema,
        Some(partition_columns),
        Some(lake.storage_options().clone()),
    )
    .map(|w| w.with_writer_properties(crate::table::parquet_write::writer_properties()))
    .map_err(|e| Error::storage(name, e))
}

async fn write_files(
    lake: &Lake,
    handle: &TableHandle,
    exists: bool,
    plan: &Planned,
) -> Result<Vec<Add>> {
    let (name, table) = (handle.name(), handle.table());
    if plan.batch.num_rows() == 0 {
        return Ok(vec![]);
    }
    let partition_columns = if exists {
        handle.partition_columns()?
    } else {
        plan.partition_columns.clone()
    };
    // The table's own object store when the schema is the loaded snapshot's (the common case):
    // one long-lived client and connection pool per warm handle instead of one per commit.
    let same_schema = exists
        && handle
            .snapshot_schema()
            .is_some_and(|s| s.fields() == plan.schema.fields());
    let mut writer = if same_schema {
        RecordBatchWriter::for_table(table)
            .map(|w| w.with_writer_properties(crate::table::parquet_write::writer_properties()))
            .map_err(|e| Error::storage(name, e))?
    } else {
        batch_writer(lake, name, plan.schema.clone(), partition_columns)?
    };
    crate::table::parquet_write::write_sliced(&mut writer, &plan.batch)
        .await
        .map_err(|e| match e {
            DeltaTableError::ObjectStore { .. } | DeltaTableError::Io { .. } => {
                Error::data_put(name, e)
            }
            other => Error::Schema {
                table: name.to_string(),
                reason: other.to_string(),
            },
        })?;
    writer.flush().await.map_err(|e| Error::data_put(name, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let s = CommitSettings {
            checkpoint_interval: 10,
            max_attempts: 10,
            inner_retries: 3,
            base_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(1000),
        };
        assert_eq!(backoff(&s, 2, 1.0), Duration::from_millis(50));
        assert_eq!(backoff(&s, 3, 1.0), Duration::from_millis(100));
        assert_eq!(backoff(&s, 6, 1.0), Duration::from_millis(800));
        assert_eq!(backoff(&s, 9, 1.0), Duration::from_millis(1000));
        assert_eq!(backoff(&s, 9, 0.0), Duration::ZERO);
        assert_eq!(backoff(&s, 40, 0.5), Duration::from_millis(500));
    }
}
