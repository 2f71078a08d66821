//! Landing one [`Change`]: a single conditional PUT of the next log entry, checked by us.
//!
//! delta-rs is asked to commit with `max_retries = 0`, so it writes exactly the version after the
//! snapshot we hand it and never rebases on its own. When that version is taken, we read every
//! commit in between: our own commit id there means our write landed (a retried PUT answered
//! "already exists", or an error after the upload); otherwise [`check`] decides whether the
//! change may be rebased onto the newer version or must be re-planned. Creating a table is the
//! same PUT at version 0, so the loser of a create race goes through the same check.

use super::change::{COMMIT_ID_KEY, Change, CommitSummary, Conflict, check_all};
use super::{CommitSettings, classify::ErrorClass};
use crate::error::{Error, Result};
use crate::table::TableHandle;
use deltalake::DeltaTableError;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake::kernel::{Action, MetadataExt, StructType, Transaction, new_metadata};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::table::state::DeltaTableState;
use futures::{StreamExt, TryStreamExt};

/// What a change needs when it creates the table (the table does not exist at its base).
#[derive(Debug, Clone)]
pub struct NewTable {
    /// Partition columns.
    pub partition_columns: Vec<String>,
    /// Table properties.
    pub configuration: Vec<(String, String)>,
    /// Create the table with Delta's change data feed: protocol writer version 4 and
    /// `delta.enableChangeDataFeed = true`. Every later commit that rewrites rows must then
    /// carry [`Change::cdc_files`] (see [`cdf_guard`]).
    pub change_data_feed: bool,
}

/// The table property that turns Delta's change data feed on.
pub const ENABLE_CDF: &str = "delta.enableChangeDataFeed";

/// Whether a table configuration has the change data feed on.
pub fn cdf_enabled<'a>(mut configuration: impl Iterator<Item = (&'a String, &'a String)>) -> bool {
    configuration.any(|(k, v)| k == ENABLE_CDF && v.eq_ignore_ascii_case("true"))
}

/// The change data feed's protocol rule: on a table with the feed on (or turned on by this
/// change), a commit that removes files with `dataChange = true` (a copy-on-write rewrite or a
/// delete) must write change data files, else readers of the feed see every row of the
/// rewritten files deleted and inserted again. Blind appends (their adds read as inserts) and
/// compaction (`dataChange = false`) need none.
pub fn cdf_guard(table: &str, feed_on: bool, change: &Change) -> crate::error::Result<()> {
    let feed_on = feed_on || cdf_enabled(change.properties.iter().map(|(k, v)| (k, v)));
    if feed_on && change.cdc_files.is_empty() && change.removes.iter().any(|r| r.data_change) {
        return Err(Error::ChangeDataFeed {
            table: table.to_string(),
            operation: change.operation.name().to_string(),
        });
    }
    Ok(())
}

/// A change landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Landed {
    /// The version it landed at.
    pub version: u64,
    /// Established by reading the log after an error or an "already exists".
    pub resolved_from_log: bool,
    /// Newer versions the change was rebased over without re-planning.
    pub rebases: u32,
}

/// Why a change did not land.
#[derive(Debug)]
pub enum Failure {
    /// A concurrent commit invalidated the plan: re-plan from a fresh snapshot.
    Conflict(Conflict),
    /// Storage failed and the change is not in the log: retry later (same or re-planned).
    Transient(Error),
    /// Retrying cannot help (validation, unsupported protocol, ...).
    Permanent(Error),
}

/// Land `change` on the table behind `handle`. The change is checked against every commit after
/// its [`read_version`](Change::read_version) — whatever the handle saw in between — then PUT
/// at the version after the handle's head. On success the handle is advanced from memory (no
/// read of what was just written). `schema` is the table schema after the change; a metadata
/// action is written when it differs from the base snapshot's or the change sets properties
/// (or the table is created with it when `create` is given and the table does not exist).
pub(crate) async fn land(
    handle: &mut TableHandle,
    change: &Change,
    schema: &SchemaRef,
    create: Option<&NewTable>,
    settings: &CommitSettings,
    commit_id: &str,
) -> std::result::Result<Landed, Failure> {
    let name = handle.name().to_string();
    let feed_on = handle.exists()
        && handle.snapshot().is_ok_and(|s| {
            let c = s.metadata().configuration();
            cdf_enabled(c.iter())
        });
    cdf_guard(&name, feed_on, change).map_err(Failure::Permanent)?;
    // The newest version the change has been checked against (its read version at first).
    let mut checked = change.read_version;
    let mut rebases = 0u32;
    loop {
        // Bring the check up to the handle's head: a warm handle that moved since the plan
        // (our own earlier commits, a refresh after an error) is never trusted unchecked.
        let head = if handle.exists() {
            handle.version()
        } else {
            None
        };
        if change.read_version.is_some() && head.is_none() {
            // Planned on a table that is gone now (deleted, maybe about to be re-created):
            // nothing the plan read holds any more.
            return Err(Failure::Conflict(Conflict {
                version: 0,
                reason: "the table was deleted after the change was planned".into(),
                ..Default::default()
            }));
        }
        if head.is_some() && head > checked {
            match read_and_check(handle, change, checked, commit_id).await? {
                Checked::Ours(version) => {
                    return Ok(Landed {
                        version,
                        resolved_from_log: true,
                        rebases,
                    });
                }
                Checked::Clear => checked = head,
            }
        }
        let err = match put(handle, change, schema, create, commit_id).await {
            Ok(put) => {
                match put.created {
                    Some(state) => handle.adopt(*state),
                    None => handle.applied(put.version, &change.txns, schema),
                }
                checkpoint_if_due(handle, put.version).await;
                return Ok(Landed {
                    version: put.version,
                    resolved_from_log: false,
                    rebases,
                });
            }
            Err(e) => e,
        };
        let class = super::classify::classify(&err);
        if class == ErrorClass::Permanent {
            return Err(Failure::Permanent(Error::rejected(&name, err)));
        }
        // Conflict or unknown outcome: learn what landed (ours, maybe) after what we checked.
        if let Err(e) = handle.refresh().await {
            return Err(Failure::Transient(e));
        }
        let head = handle.version();
        if head.is_some() && head > checked {
            match read_and_check(handle, change, checked, commit_id).await {
                Ok(Checked::Ours(version)) => {
                    tracing::info!(table = %name, version, error = %crate::redact::scrub(&err.to_string()), "our commit landed despite the error");
                    return Ok(Landed {
                        version,
                        resolved_from_log: true,
                        rebases,
                    });
                }
                Ok(Checked::Clear) => checked = head,
                // Not ours and conflicting: a transient error still re-plans (nothing landed).
                Err(f) => return Err(f),
            }
        }
        if class == ErrorClass::Transient {
            return Err(Failure::Transient(Error::storage(&name, err)));
        }
        rebases += 1;
        if rebases as usize > settings.inner_retries {
            return Err(Failure::Conflict(Conflict {
                version: handle.version().unwrap_or_default(),
                reason: format!("still behind after {rebases} rebases: {err}"),
                gone: Default::default(),
                contended: true,
            }));
        }
        tracing::debug!(table = %name, read = ?change.read_version, to = ?handle.version(), "rebased over non-conflicting commits");
    }
}

/// What the commits after the checked version say about a change.
enum Checked {
    /// Our own commit is among them, at this version.
    Ours(u64),
    /// None is ours and none conflicts.
    Clear,
}

/// Read the commits after `after` up to the handle's head and check `change` against all of
/// them (our own commit id among them means the change already landed).
async fn read_and_check(
    handle: &TableHandle,
    change: &Change,
    after: Option<u64>,
    commit_id: &str,
) -> std::result::Result<Checked, Failure> {
    let winners = since(handle, after).await.map_err(Failure::Transient)?;
    if let Some(mine) = winners
        .iter()
        .find(|w| w.commit_id.as_deref() == Some(commit_id))
    {
        return Ok(Checked::Ours(mine.version));
    }
    check_all(change, &winners).map_err(Failure::Conflict)?;
    Ok(Checked::Clear)
}

/// Write a checkpoint when `version` is due by the table's `delta.checkpointInterval`
/// (delta-rs's post-commit rule). The kernel builds a checkpoint by replaying the log from
/// storage, so the handle is refreshed first (it reads the commits after its snapshot, which
/// it would read anyway on its next refresh). Failing here does not undo the commit: it is
/// logged, and the maintenance job's checkpoint step writes a missed checkpoint.
async fn checkpoint_if_due(handle: &mut TableHandle, version: u64) {
    use deltalake::table::config::TablePropertiesExt;
    let interval = match handle.snapshot() {
        Ok(s) => s.table_config().checkpoint_interval().get(),
        Err(_) => return,
    };
    if !(version + 1).is_multiple_of(interval) {
        return;
    }
    let written = async {
        handle.refresh().await?;
        deltalake::checkpoints::create_checkpoint(handle.table(), None)
            .await
            .map_err(|e| Error::storage(handle.name(), e))
    }
    .await;
    if let Err(e) = written {
        tracing::warn!(table = %handle.name(), version, error = %e.redacted(), "checkpoint not written; the maintenance job will write it");
    }
}

/// Commit files read at once when checking what landed after a base version.
const LOG_READ_CONCURRENCY: usize = 16;

/// Summarize the commits after `base` (all of them when the table was new) up to the handle's
/// head, read from storage.
async fn since(handle: &TableHandle, base: Option<u64>) -> Result<Vec<CommitSummary>> {
    if !handle.exists() {
        return Ok(vec![]);
    }
    let Some(latest) = handle.version() else {
        return Ok(vec![]);
    };
    let first = base.map_or(0, |b| b + 1);
    let log_store = handle.table().log_store();
    let name = handle.name();
    let out: Vec<CommitSummary> = futures::stream::iter(first..=latest)
        .map(|v| {
            let log_store = log_store.clone();
            async move {
                let bytes = log_store
                    .read_commit_entry(v)
                    .await
                    .map_err(|e| Error::storage(name, e))?
                    .ok_or_else(|| {
                        Error::storage(
                            name,
                            DeltaTableError::Generic(format!(
                                "commit {v} is missing from the log; cannot check for conflicts"
                            )),
                        )
                    })?;
                Ok::<_, Error>(CommitSummary::parse(v, &bytes))
            }
        })
        .buffered(LOG_READ_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(out)
}

/// A PUT that landed.
struct Put {
    version: u64,
    /// The table state after creating the table (kept, so the next commit is warm).
    created: Option<Box<DeltaTableState>>,
}

/// One conditional PUT of the change at the version after the handle's head.
async fn put(
    handle: &TableHandle,
    change: &Change,
    schema: &SchemaRef,
    create: Option<&NewTable>,
    commit_id: &str,
) -> std::result::Result<Put, DeltaTableError> {
    let table = handle.table();
    // `lastUpdated` is wall-clock commit time: delta-rs expires `txn`s against the wall clock
    // (`delta.setTransactionRetentionDuration`), so an injected clock must not reach it.
    let now_ms = chrono::Utc::now().timestamp_millis();
    let txns: Vec<Transaction> = change
        .txns
        .iter()
        .map(|t| Transaction::new_with_last_update(&t.app_id, t.version, Some(now_ms)))
        .collect();
    // Expired-log cleanup LISTs the whole `_delta_log` after every commit (delta-rs's default):
    // the maintenance job's checkpoint step does it instead, once per table and schedule.
    let props = CommitProperties::default()
        .with_application_transactions(txns)
        .with_max_retries(0)
        .with_cleanup_expired_logs(Some(false))
        .with_metadata([(
            COMMIT_ID_KEY.to_string(),
            serde_json::Value::String(commit_id.to_string()),
        )]);
    let struct_type: StructType = schema
        .as_ref()
        .try_into_kernel()
        // Typed, so it classifies as permanent: a schema the kernel refuses (two columns
        // differing only in case) fails the same way on every retry.
        .map_err(|e: deltalake::arrow::error::ArrowError| DeltaTableError::Arrow { source: e })?;
    let files = change
        .adds
        .iter()
        .cloned()
        .map(Action::Add)
        .chain(change.removes.iter().cloned().map(Action::Remove))
        .chain(change.cdc_files.iter().cloned().map(Action::Cdc));
    if !handle.exists() {
        let Some(new) = create else {
            return Err(DeltaTableError::NotATable(handle.name().to_string()));
        };
        // Writer version 4 is the change data feed's (it also names invariants, check
        // constraints and generated columns, none of which a table created here has).
        let writer = if new.change_data_feed { 4 } else { 2 };
        let protocol: Action = serde_json::from_value(serde_json::json!(
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": writer}}
        ))?;
        let feed = new
            .change_data_feed
            .then(|| (ENABLE_CDF.to_string(), "true".to_string()));
        let metadata = new_metadata(
            &struct_type,
            new.partition_columns.iter(),
            new.configuration
                .iter()
                .chain(&change.properties)
                .chain(feed.iter())
                .map(|(k, v)| (k, v)),
        )?
        .with_name(handle.name().replace('/', "_"))?;
        let (Action::Protocol(p), m) = (protocol, metadata) else {
            return Err(DeltaTableError::Generic("protocol action".into()));
        };
        let op = DeltaOperation::Create {
            mode: SaveMode::ErrorIfExists,
            location: table.log_store().root_url().clone(),
            protocol: p.clone(),
            metadata: m.clone(),
        };
        let mut actions = vec![Action::Protocol(p), Action::Metadata(m)];
        actions.extend(files);
        let done = CommitBuilder::from(props)
            .with_actions(actions)
            .build(None, table.log_store(), op)
            .await?;
        return Ok(Put {
            version: done.version(),
            created: Some(Box::new(done.snapshot)),
        });
    }
    let snapshot = table.snapshot()?;
    let mut actions: Vec<Action> = Vec::new();
    let current = handle
        .arrow_schema()
        .map_err(|e| DeltaTableError::Generic(e.to_string()))?;
    if current.fields() != schema.fields() || !change.properties.is_empty() {
        let mut metadata = snapshot.metadata().clone().with_schema(&struct_type)?;
        for (k, v) in &change.properties {
            metadata = metadata.add_config_key(k.clone(), v.clone())?;
        }
        actions.push(Action::Metadata(metadata));
    }
    actions.extend(files);
    let operation: DeltaOperation = change.operation.clone();
    // delta-rs serializes the commit and checks the protocol; the PUT is ours: delta-rs's own
    // commit future LISTs the log before the PUT and rebuilds the snapshot after it (a LIST and
    // two GETs of what we just wrote), and we hold both already. A change data feed table
    // (writer version 4) is checked here instead: built without the `datafusion` feature,
    // delta-rs's checker refuses writer version 4 outright, though all it asks of this writer
    // is the change files (written by the caller, guarded by [`cdf_guard`]) and the features
    // checked by [`writable_cdf_table`].
    let checked_here = writable_cdf_table(snapshot, &change.removes)?;
    let prepared = CommitBuilder::from(props)
        .with_actions(actions)
        .build(
            (!checked_here).then_some(snapshot as _),
            table.log_store(),
            operation,
        )
        .into_prepared_commit_future()
        .await?;
    let version = handle.version().map_or(0, |v| v + 1);
    let entry = prepared.commit_or_bytes().clone();
    let log_store = table.log_store();
    let operation_id = uuid::Uuid::new_v4();
    match log_store
        .write_commit_entry(version, entry.clone(), operation_id)
        .await
    {
        Ok(()) => Ok(Put {
            version,
            created: None,
        }),
        Err(e @ TransactionError::VersionAlreadyExists(_)) => Err(e.into()),
        Err(e) => {
            // A temporary commit file (log stores without conditional PUT) is removed; the
            // engine then reads the log to learn whether the entry landed.
            let _ = log_store
                .abort_commit_entry(version, entry, operation_id)
                .await;
            Err(e.into())
        }
    }
}

/// Whether the table is a change data feed table this writer may commit to with delta-rs's
/// protocol check skipped: reader version 1, writer version 4, and none of writer version 4's
/// other features in use (check constraints, column invariants, generated columns). An
/// append-only table refuses removes with `dataChange = true` like delta-rs would.
fn writable_cdf_table(
    snapshot: &DeltaTableState,
    removes: &[deltalake::kernel::Remove],
) -> std::result::Result<bool, DeltaTableError> {
    let (protocol, metadata) = (snapshot.protocol(), snapshot.metadata());
    if protocol.min_reader_version() != 1 || protocol.min_writer_version() != 4 {
        return Ok(false);
    }
    let config = metadata.configuration();
    let schema = metadata.schema_string();
    let other_features = config.keys().any(|k| k.starts_with("delta.constraints."))
        || schema.contains("delta.invariants")
        || schema.contains("delta.generationExpression");
    if other_features {
        return Ok(false);
    }
    let append_only = config
        .get("delta.appendOnly")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if append_only && removes.iter().any(|r| r.data_change) {
        return Err(TransactionError::DeltaTableAppendOnly.into());
    }
    Ok(true)
}
