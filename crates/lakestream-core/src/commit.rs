//! The commit engine: one conflict-safe, idempotent Delta append per table per invocation.
//!
//! Protocol (see ARCHITECTURE.md "Commit protocol"):
//! 1. Load (or refresh) the table; read the committed `txn` version of each appId involved.
//! 2. Ask the [`Planner`] what to write given that state: it drops records at or below the
//!    committed versions and decodes the rest against the table's *current* schema.
//! 3. Write the Parquet files, then commit data + `txn` actions (+ new metadata on schema
//!    evolution) in one Delta commit. On S3 the log entry is written with `If-None-Match: *`.
//! 4. Conflict (another writer took the version, changed metadata, or committed our appIds):
//!    back off with full jitter and go to 1: a replay then finds its offsets committed and
//!    writes nothing. Unknown outcome (an error after the PUT may have landed): refresh and look
//!    for our `txn` versions or our commit id in the log before deciding.

use crate::error::{Error, Result};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake::kernel::{Action, Add, MetadataExt, StructType, Transaction};
use deltalake::operations::create::CreateBuilder;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::{DeltaTable, DeltaTableError, TableProperty};
use std::collections::HashMap;
use std::time::Duration;

use crate::handle::TableHandle;
use crate::storage::Lake;

/// Retry and checkpoint settings of the engine.
#[derive(Debug, Clone)]
pub struct CommitSettings {
    /// `delta.checkpointInterval` set on tables this engine creates.
    pub checkpoint_interval: u32,
    /// Outer attempts (reload + re-plan + backoff).
    pub max_attempts: u32,
    /// delta-rs's own immediate retries inside one attempt (cheap append-vs-append rebases).
    pub inner_retries: usize,
    /// First backoff.
    pub base_backoff: Duration,
    /// Backoff ceiling.
    pub max_backoff: Duration,
}

impl From<&crate::config::CommitConfig> for CommitSettings {
    fn from(c: &crate::config::CommitConfig) -> Self {
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
    /// Current Arrow schema, `None` when the table does not exist yet.
    pub schema: Option<SchemaRef>,
    /// Committed `txn` version per appId asked for (absent = never committed).
    pub committed: HashMap<String, i64>,
}

/// What to write on this attempt.
#[derive(Debug)]
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
}

/// Decides what to write given the table's state; called once per attempt.
#[allow(async_fn_in_trait)]
pub trait Planner {
    /// The appIds whose committed versions the plan needs.
    fn app_ids(&self) -> Vec<String>;
    /// Plan the write; `None` means nothing to write (e.g. everything already committed).
    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>>;
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

/// Append to `name` under the commit protocol described in the module docs.
pub async fn append(
    lake: &Lake,
    handle: &mut TableHandle,
    settings: &CommitSettings,
    planner: &mut impl Planner,
    now_ms: i64,
) -> Result<CommitOutcome> {
    let name = handle.name().to_string();
    let name = name.as_str();
    let mut outcome = CommitOutcome::default();
    let commit_id = format!("{:032x}", fastrand::u128(..));
    let mut last_conflict = String::new();
    let mut staged: Option<(SchemaRef, Vec<Transaction>, Vec<Add>)> = None;
    for attempt in 1..=settings.max_attempts {
        outcome.attempts = attempt;
        if attempt > 1 {
            tokio::time::sleep(backoff(settings, attempt, fastrand::f64())).await;
        }
        let exists = handle.refresh().await?;
        let read_version = handle.version();
        let state = handle.state(&planner.app_ids()).await?;
        let table = handle.table();
        let Some(plan) = planner.plan(&state).await? else {
            return Ok(outcome);
        };
        if plan.batch.num_rows() == 0 {
            return Ok(outcome);
        }
        let schema_changed = state
            .schema
            .as_ref()
            .is_none_or(|s| s.fields() != plan.schema.fields());
        let adds = match staged.take() {
            Some((s, t, adds)) if s == plan.schema && t == plan.txns => adds,
            _ => write_files(lake, name, table, exists, &plan).await?,
        };
        let result = commit(handle, exists, &plan, &adds, settings, &commit_id, now_ms).await;
        let done = |version: Option<u64>, resolved_from_log: bool, outcome: &CommitOutcome| {
            CommitOutcome {
                version,
                files: adds.len(),
                bytes: adds.iter().map(|a| a.size.max(0) as u64).sum(),
                rows: plan.batch.num_rows(),
                attempts: outcome.attempts,
                conflicts: outcome.conflicts,
                resolved_from_log,
                schema_changed,
            }
        };
        match result {
            Ok(version) => return Ok(done(Some(version), false, &outcome)),
            Err(e) if is_conflict(&e) => {
                outcome.conflicts += 1;
                last_conflict = e.to_string();
                tracing::info!(table = name, attempt, error = %e, "commit conflict, will re-plan");
                staged = Some((plan.schema, plan.txns, adds));
            }
            Err(e) => {
                tracing::warn!(table = name, attempt, error = %e, "commit outcome unknown, reading the log");
                handle.refresh().await?;
                if landed(handle, read_version, &plan.txns, &commit_id).await? {
                    return Ok(done(handle.version(), true, &outcome));
                }
                if attempt == settings.max_attempts {
                    return Err(Error::storage(name, e));
                }
                staged = Some((plan.schema, plan.txns, adds));
            }
        }
    }
    Err(Error::Contention {
        table: name.to_string(),
        attempts: settings.max_attempts,
        last: last_conflict,
    })
}

async fn write_files(
    lake: &Lake,
    name: &str,
    table: &DeltaTable,
    exists: bool,
    plan: &Planned,
) -> Result<Vec<Add>> {
    let partition_columns = if exists {
        let snapshot = table.snapshot().map_err(|e| Error::storage(name, e))?;
        snapshot.metadata().partition_columns().to_vec()
    } else {
        plan.partition_columns.clone()
    };
    let url = lake.table_url(name)?;
    let mut writer = RecordBatchWriter::try_new(
        url.as_str(),
        plan.schema.clone(),
        Some(partition_columns),
        Some(lake.storage_options().clone()),
    )
    .map_err(|e| Error::storage(name, e))?;
    writer
        .write(plan.batch.clone())
        .await
        .map_err(|e| match e {
            DeltaTableError::ObjectStore { .. } | DeltaTableError::Io { .. } => {
                Error::storage(name, e)
            }
            other => Error::Schema {
                table: name.to_string(),
                reason: other.to_string(),
            },
        })?;
    writer.flush().await.map_err(|e| Error::storage(name, e))
}

#[allow(clippy::too_many_arguments)]
async fn commit(
    handle: &TableHandle,
    exists: bool,
    plan: &Planned,
    adds: &[Add],
    settings: &CommitSettings,
    commit_id: &str,
    now_ms: i64,
) -> std::result::Result<u64, DeltaTableError> {
    let table = handle.table();
    let name = handle.name();
    let txns: Vec<Transaction> = plan
        .txns
        .iter()
        .map(|t| Transaction::new_with_last_update(&t.app_id, t.version, Some(now_ms)))
        .collect();
    let props = CommitProperties::default()
        .with_application_transactions(txns)
        .with_max_retries(settings.inner_retries)
        .with_metadata([(
            "lakestream.commitId".to_string(),
            serde_json::Value::String(commit_id.to_string()),
        )]);
    let struct_type: StructType = plan.schema.as_ref().try_into_kernel().map_err(
        |e: deltalake::arrow::error::ArrowError| DeltaTableError::Generic(e.to_string()),
    )?;
    let add_actions = adds.iter().cloned().map(Action::Add);
    if !exists {
        let created = CreateBuilder::new()
            .with_log_store(table.log_store())
            .with_table_name(name.replace('/', "_"))
            .with_columns(struct_type.fields().cloned())
            .with_partition_columns(plan.partition_columns.clone())
            .with_configuration_property(
                TableProperty::CheckpointInterval,
                Some(settings.checkpoint_interval.to_string()),
            )
            .with_configuration(
                plan.table_properties
                    .iter()
                    .map(|(k, v)| (k.clone(), Some(v.clone()))),
            )
            .with_save_mode(SaveMode::ErrorIfExists)
            .with_actions(add_actions)
            .with_commit_properties(props)
            .await?;
        return Ok(created.version().unwrap_or(0));
    }
    let snapshot = table.snapshot()?;
    let current = handle
        .arrow_schema()
        .map_err(|e| DeltaTableError::Generic(e.to_string()))?;
    let mut actions: Vec<Action> = Vec::with_capacity(adds.len() + 1);
    if current.fields() != plan.schema.fields() {
        let metadata = snapshot.metadata().clone().with_schema(&struct_type)?;
        actions.push(Action::Metadata(metadata));
    }
    actions.extend(add_actions);
    let partition_by = snapshot.metadata().partition_columns().to_vec();
    let op = DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: (!partition_by.is_empty()).then_some(partition_by),
        predicate: None,
    };
    let done = CommitBuilder::from(props)
        .with_actions(actions)
        .build(Some(snapshot), table.log_store(), op)
        .await?;
    Ok(done.version())
}

/// Conflicts are resolved by reloading and re-planning; everything else is "outcome unknown".
fn is_conflict(e: &DeltaTableError) -> bool {
    match e {
        DeltaTableError::VersionAlreadyExists(_) => true,
        DeltaTableError::Transaction { source } => matches!(
            source,
            TransactionError::CommitConflict(_)
                | TransactionError::MaxCommitAttempts(_)
                | TransactionError::VersionAlreadyExists(_)
        ),
        DeltaTableError::CommitValidation { .. } => false,
        other => other.to_string().contains("already exists"),
    }
}

/// Did our commit (or an identical replay) land? True when every `txn` version we meant to
/// commit is committed, or when a version after `read_version` carries our commit id.
async fn landed(
    handle: &mut TableHandle,
    read_version: Option<u64>,
    txns: &[Transaction],
    commit_id: &str,
) -> Result<bool> {
    let Some(latest) = handle.version() else {
        return Ok(false);
    };
    if !txns.is_empty() {
        let ids: Vec<String> = txns.iter().map(|t| t.app_id.clone()).collect();
        let committed = handle.committed(&ids).await?;
        if txns
            .iter()
            .all(|t| committed.get(&t.app_id).is_some_and(|v| *v >= t.version))
        {
            return Ok(true);
        }
    }
    let name = handle.name();
    let table = handle.table();
    let log_store = table.log_store();
    let first = read_version.map_or(0, |v| v + 1);
    for v in first..=latest {
        let entry = log_store
            .read_commit_entry(v)
            .await
            .map_err(|e| Error::storage(name, e))?;
        if entry.is_some_and(|b| {
            b.windows(commit_id.len())
                .any(|w| w == commit_id.as_bytes())
        }) {
            return Ok(true);
        }
    }
    Ok(false)
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
