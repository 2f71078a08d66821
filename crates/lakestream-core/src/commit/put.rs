//! One conditional PUT of a [`Change`] at the version after the handle's head (a create at
//! version 0), built by delta-rs's `CommitBuilder` (the only place a Delta commit is built), and
//! the change data feed's protocol rules it follows ([`cdf_guard`], [`writable_cdf_table`]).
//! Whether the PUT landed, conflicted or must be retried is [`super::land`]'s.

use super::change::{COMMIT_ID_KEY, Change};
use crate::error::Error;
use crate::table::TableHandle;
use deltalake::DeltaTableError;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake::kernel::{Action, MetadataExt, StructType, Transaction, new_metadata};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::table::state::DeltaTableState;

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
/// rewritten files deleted and inserted again. Blind appends (their adds read as inserts),
/// removals of whole files that add nothing (their removes read as deletes of every row: a
/// rebuild's reset) and compaction (`dataChange = false`) need none.
pub fn cdf_guard(table: &str, feed_on: bool, change: &Change) -> crate::error::Result<()> {
    let feed_on = feed_on || cdf_enabled(change.properties.iter().map(|(k, v)| (k, v)));
    let rewrites =
        change.removes.iter().any(|r| r.data_change) && change.adds.iter().any(|a| a.data_change);
    if feed_on && change.cdc_files.is_empty() && rewrites {
        return Err(Error::ChangeDataFeed {
            table: table.to_string(),
            operation: change.operation.name().to_string(),
        });
    }
    Ok(())
}

/// A PUT that landed.
pub(super) struct Put {
    /// The version written.
    pub(super) version: u64,
    /// The table state after creating the table (kept, so the next commit is warm).
    pub(super) created: Option<Box<DeltaTableState>>,
}

/// One conditional PUT of the change at the version after the handle's head.
pub(super) async fn put(
    handle: &TableHandle,
    change: &Change,
    schema: &SchemaRef,
    create: Option<&NewTable>,
    commit_id: &str,
) -> std::result::Result<Put, DeltaTableError> {
    let props = commit_properties(change, commit_id);
    let struct_type: StructType = schema
        .as_ref()
        .try_into_kernel()
        // Typed, so it classifies as permanent: a schema the kernel refuses (two columns
        // differing only in case) fails the same way on every retry.
        .map_err(|e: deltalake::arrow::error::ArrowError| DeltaTableError::Arrow { source: e })?;
    if !handle.exists() {
        let Some(new) = create else {
            return Err(DeltaTableError::NotATable(handle.name().to_string()));
        };
        return put_create(handle, change, new, &struct_type, props).await;
    }
    put_next(handle, change, schema, &struct_type, props).await
}

/// The commit's properties: its `txn`s, our commit id, and no retry or log cleanup by delta-rs.
fn commit_properties(change: &Change, commit_id: &str) -> CommitProperties {
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
    CommitProperties::default()
        .with_application_transactions(txns)
        .with_max_retries(0)
        .with_cleanup_expired_logs(Some(false))
        .with_metadata(
            [(
                COMMIT_ID_KEY.to_string(),
                serde_json::Value::String(commit_id.to_string()),
            )]
            .into_iter()
            .chain(change.info.iter().cloned()),
        )
}

/// The change's file actions: adds, removes, change data files.
fn file_actions(change: &Change) -> impl Iterator<Item = Action> + '_ {
    change
        .adds
        .iter()
        .cloned()
        .map(Action::Add)
        .chain(change.removes.iter().cloned().map(Action::Remove))
        .chain(change.cdc_files.iter().cloned().map(Action::Cdc))
}

/// Create the table with the change: protocol and metadata of `new`, then the change's files,
/// PUT at version 0.
async fn put_create(
    handle: &TableHandle,
    change: &Change,
    new: &NewTable,
    struct_type: &StructType,
    props: CommitProperties,
) -> std::result::Result<Put, DeltaTableError> {
    let table = handle.table();
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
        struct_type,
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
    actions.extend(file_actions(change));
    let done = CommitBuilder::from(props)
        .with_actions(actions)
        .build(None, table.log_store(), op)
        .await?;
    Ok(Put {
        version: done.version(),
        created: Some(Box::new(done.snapshot)),
    })
}

/// The change as the next version of an existing table (a metadata action first when the
/// schema changes or the change sets properties): serialized and checked by delta-rs, PUT by us.
async fn put_next(
    handle: &TableHandle,
    change: &Change,
    schema: &SchemaRef,
    struct_type: &StructType,
    props: CommitProperties,
) -> std::result::Result<Put, DeltaTableError> {
    let table = handle.table();
    let snapshot = table.snapshot()?;
    let mut actions: Vec<Action> = Vec::new();
    let current = handle
        .arrow_schema()
        .map_err(|e| DeltaTableError::Generic(e.to_string()))?;
    if current.fields() != schema.fields() || !change.properties.is_empty() {
        let mut metadata = snapshot.metadata().clone().with_schema(struct_type)?;
        for (k, v) in &change.properties {
            metadata = metadata.add_config_key(k.clone(), v.clone())?;
        }
        actions.push(Action::Metadata(metadata));
    }
    actions.extend(file_actions(change));
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
