//! A long-lived handle on one table: the loaded `DeltaTable` plus a cache of committed `txn`
//! versions. Kept in the [`Ingestor`](crate::Ingestor) across invocations of a warm Lambda, so
//! an invocation costs no table load; `txn` versions are read once from the snapshot, then
//! advanced from each new commit's JSON (delta-rs answers each appId by replaying the log
//! segment, which is one pass per appId).
//!
//! The handle's *head* is the newest version it knows the content of. It runs ahead of the
//! delta-rs snapshot after our own commits: what we committed (the `txn`s, a new schema) is
//! applied to the handle from memory instead of being read back. A writer plans against the
//! head without asking storage ([`TableHandle::sync`]); if another writer committed meanwhile,
//! the conditional PUT of head + 1 fails and the commit engine reads what landed
//! ([`TableHandle::refresh`]) and checks it, so a stale head costs a retry, never a duplicate.
//!
//! A stale head is only safe while the table is *the same table*: an operator may delete a
//! table or re-create it at the same path. A handle kept across invocations is re-checked once
//! per invocation by [`TableHandle::revalidate`]: one HEAD of the head's commit file, compared
//! with the ETag (and size) the handle saw when it wrote or read that file. Gone or different
//! means the table is not the one the handle loaded: its head, `txn` cache and cached log
//! files are dropped and the table is loaded again from storage.

use crate::commit::TableState;
use crate::error::{Error, Result};
use crate::log_reads::LogReads;
use crate::storage::Lake;
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
use deltalake::logstore::object_store::{self, ObjectMeta, ObjectStoreExt};
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use std::collections::HashMap;
use std::sync::Arc;

/// New commits beyond which the `txn` cache is dropped rather than advanced.
const MAX_INCREMENTAL_COMMITS: u64 = 50;

/// One table, loaded lazily and refreshed incrementally.
pub struct TableHandle {
    name: String,
    table: DeltaTable,
    exists: bool,
    /// appId -> committed version (`None` = known absent), valid as of `txn_version`.
    txns: HashMap<String, Option<i64>>,
    txn_version: Option<u64>,
    /// `txns` holds every appId of the table (loaded in one log pass), so a miss means absent.
    txns_complete: bool,
    /// Newest version whose content the handle knows (>= the snapshot's after our own commits).
    head: Option<u64>,
    /// The schema as of `head` when our own commit changed it after the snapshot was loaded.
    head_schema: Option<SchemaRef>,
    /// What the head's commit file looked like when the handle wrote or read it: the proof,
    /// checked by [`revalidate`](Self::revalidate), that the table is still the one loaded.
    head_tag: Option<HeadTag>,
    /// The log-read cache in front of the table's store (absent for [`from_table`](Self::from_table)).
    log_reads: Option<Arc<LogReads>>,
}

/// The identity of one commit file: its version, ETag and size. Commit files are written once
/// (put-if-absent), so the same version with another ETag or size is another table's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HeadTag {
    version: u64,
    e_tag: Option<String>,
    size: u64,
}

impl HeadTag {
    fn of(version: u64, meta: &ObjectMeta) -> Self {
        Self {
            version,
            e_tag: meta.e_tag.clone(),
            size: meta.size,
        }
    }

    /// Whether `meta` (a HEAD of the same version's commit file) is the file this tag saw.
    /// Without an ETag on either side only the size can be compared.
    fn matches(&self, meta: &ObjectMeta) -> bool {
        self.size == meta.size
            && match (&self.e_tag, &meta.e_tag) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// `_delta_log/<20 digits>.json`, relative to the table root.
fn commit_file(version: u64) -> deltalake::Path {
    deltalake::Path::from(format!("_delta_log/{version:020}.json"))
}

impl std::fmt::Debug for TableHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableHandle")
            .field("name", &self.name)
            .field("version", &self.version())
            .field("snapshot", &self.table.version())
            .finish()
    }
}

impl TableHandle {
    /// A handle on `name` in `lake` (nothing is read yet).
    pub fn open(lake: &Lake, name: &str) -> Result<Self> {
        let url = lake.table_url(name)?;
        let build = |url: url::Url| {
            DeltaTableBuilder::from_url(url).and_then(|b| {
                b.with_storage_options(lake.storage_options().clone())
                    .build()
            })
        };
        let table = build(url.clone()).map_err(|e| Error::storage(name, e))?;
        // The log read once per process (commit files kept, checkpoints read whole); a test's
        // wrapper sits underneath, next to the network, so it sees the requests really made.
        let mut store = table.log_store().root_object_store(None);
        // No write before the endpoint is shown to honour If-None-Match (S3 lakes; once per
        // process). Beneath a test's wrapper, so request counts do not depend on test order.
        if let Some(probe) = lake.put_probe() {
            store = probe.guard(store);
        }
        if let Some(wrap) = lake.store_wrapper() {
            store = wrap(store);
        }
        let log_reads = Arc::new(LogReads::new(store));
        let table = DeltaTableBuilder::from_url(url.clone())
            .map(|b| {
                b.with_storage_options(lake.storage_options().clone())
                    .with_storage_backend(log_reads.clone(), url)
            })
            .and_then(|b| b.build())
            .map_err(|e| Error::storage(name, e))?;
        let mut handle = Self::from_table(name, table);
        handle.log_reads = Some(log_reads);
        Ok(handle)
    }

    /// Open and load a table that must exist ([`Error::TableNotFound`] otherwise).
    pub async fn open_existing(lake: &Lake, name: &str) -> Result<Self> {
        let mut h = Self::open(lake, name)?;
        if !h.refresh().await? {
            return Err(Error::TableNotFound(name.to_string()));
        }
        Ok(h)
    }

    /// A handle on an already built (not loaded) table, e.g. one over a custom object store.
    pub fn from_table(name: &str, table: DeltaTable) -> Self {
        Self {
            name: name.to_string(),
            table,
            exists: false,
            txns: HashMap::new(),
            txn_version: None,
            txns_complete: false,
            head: None,
            head_schema: None,
            head_tag: None,
            log_reads: None,
        }
    }

    /// Table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The loaded table. Its snapshot may be older than [`version`](Self::version) after our
    /// own commits: call [`refresh`](Self::refresh) before reading its files.
    pub fn table(&self) -> &DeltaTable {
        &self.table
    }

    /// Mutable access (time travel in readers).
    pub fn table_mut(&mut self) -> &mut DeltaTable {
        &mut self.table
    }

    /// The table's partition columns (empty when unpartitioned).
    pub fn partition_columns(&self) -> Result<Vec<String>> {
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| Error::storage(&self.name, e))?;
        Ok(snapshot.metadata().partition_columns().to_vec())
    }

    /// The table's id (`metaData.id`).
    pub fn table_id(&self) -> Result<String> {
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| Error::storage(&self.name, e))?;
        Ok(snapshot.metadata().id().to_string())
    }

    /// A table property (`metaData.configuration`).
    pub fn property(&self, key: &str) -> Result<Option<String>> {
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| Error::storage(&self.name, e))?;
        Ok(snapshot.metadata().configuration().get(key).cloned())
    }

    /// Whether the table existed at the last refresh.
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// The newest version the handle knows: the loaded snapshot's, or our own last commit's.
    pub fn version(&self) -> Option<u64> {
        self.head.max(self.table.version())
    }

    /// Make the handle usable for planning a write: no storage request when it is already
    /// loaded (a warm handle), else a [`refresh`](Self::refresh). A write planned on a stale
    /// head is caught by the conditional PUT of the next version, which another writer's
    /// commit occupies; the commit engine then refreshes and checks.
    pub async fn sync(&mut self) -> Result<bool> {
        if self.exists && self.table.version().is_some() {
            return Ok(true);
        }
        self.refresh().await
    }

    /// Apply our own commit at `version` from memory: its `txn`s and the schema after it.
    /// A version that does not follow the head (not expected: `land` PUTs head + 1) leaves the
    /// handle as it is; the next write's PUT then fails on the occupied version and refreshes.
    pub(crate) fn applied(
        &mut self,
        version: u64,
        txns: &[deltalake::kernel::Transaction],
        schema: &SchemaRef,
    ) {
        if self.version().map(|v| v + 1) != Some(version) {
            return;
        }
        for t in txns {
            self.txns.insert(t.app_id.clone(), Some(t.version));
        }
        if self.txn_version.is_some_and(|v| v + 1 == version) {
            self.txn_version = Some(version);
        }
        let changed = self
            .snapshot_schema()
            .is_none_or(|s| s.fields() != schema.fields());
        self.head_schema = changed.then(|| schema.clone());
        self.head = Some(version);
        self.head_tag = self.held_tag(version);
    }

    /// Replace the table with the state a commit returned (the handle of a table we created).
    pub(crate) fn adopt(&mut self, state: deltalake::table::state::DeltaTableState) {
        let version = state.version();
        self.table.state = Some(state);
        self.exists = true;
        self.head = Some(version);
        self.head_schema = None;
        self.txns.clear();
        self.txns_complete = false;
        self.txn_version = Some(version);
        self.head_tag = self.held_tag(version);
    }

    /// Prove, with one HEAD of the head's commit file, that the table in storage is still the
    /// one this handle loaded; call it once per invocation on a handle kept warm. When the file
    /// is gone (the table was deleted, or re-created with fewer versions) or is another file
    /// (re-created by someone else: another ETag or size), the warm state is dropped — head,
    /// `txn` cache, cached log files — and the next [`sync`](Self::sync) loads the table
    /// again. Returns `false` when the state was dropped. A handle that has loaded nothing is
    /// left as it is. Errors are storage errors (retryable).
    pub async fn revalidate(&mut self) -> Result<bool> {
        let Some(head) = self.version().filter(|_| self.exists) else {
            return Ok(true);
        };
        let found = match self
            .table
            .log_store()
            .object_store(None)
            .head(&commit_file(head))
            .await
        {
            Ok(meta) => Some(meta),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(Error::storage(&self.name, e)),
        };
        let same = match (&found, &self.head_tag) {
            (Some(meta), Some(tag)) => tag.version == head && tag.matches(meta),
            _ => false,
        };
        if !same {
            tracing::warn!(
                table = %self.name,
                version = head,
                found = found.is_some(),
                "the table is not the one this warm handle loaded (deleted or re-created); loading it again"
            );
            self.forget();
        }
        Ok(same)
    }

    /// Drop everything the handle knows about the table: the next use loads it from storage.
    fn forget(&mut self) {
        if let Some(l) = &self.log_reads {
            l.clear();
        }
        self.table.state = None;
        self.exists = false;
        self.txns.clear();
        self.txn_version = None;
        self.txns_complete = false;
        self.head = None;
        self.head_schema = None;
        self.head_tag = None;
    }

    /// The tag of the commit file of `version` when the log-read cache holds it.
    fn held_tag(&self, version: u64) -> Option<HeadTag> {
        let name = format!("{version:020}.json");
        let meta = self.log_reads.as_ref()?.commit_meta(&name)?;
        Some(HeadTag::of(version, &meta))
    }

    /// Note the head's tag after a load: from the log-read cache when the load read the head's
    /// commit file, else with one HEAD (a head at a checkpoint version is loaded from the
    /// checkpoint). Without a tag the next [`revalidate`](Self::revalidate) reloads the table.
    async fn note_head_tag(&mut self) {
        let Some(head) = self.head else {
            self.head_tag = None;
            return;
        };
        self.head_tag = match self.held_tag(head) {
            Some(tag) => Some(tag),
            None => match self
                .table
                .log_store()
                .object_store(None)
                .head(&commit_file(head))
                .await
            {
                Ok(meta) => Some(HeadTag::of(head, &meta)),
                Err(e) => {
                    tracing::debug!(table = %self.name, version = head, error = %e, "head commit not found after a load");
                    None
                }
            },
        };
    }

    /// Bring the handle up to the latest version in storage; `false` when there is no table.
    pub async fn refresh(&mut self) -> Result<bool> {
        let res = if self.table.version().is_some() {
            self.table.update_state().await
        } else {
            // Ask first: loading a missing table makes delta-rs log an error.
            match self.table.verify_deltatable_existence().await {
                Ok(false) => return Ok(false),
                Ok(true) => self.table.load().await,
                Err(e) => Err(e),
            }
        };
        match res {
            Ok(()) => {
                self.exists = true;
                self.head = self.table.version();
                self.head_schema = None;
                self.note_head_tag().await;
                self.advance_txns().await?;
                Ok(true)
            }
            Err(DeltaTableError::NotATable(_)) => Ok(false),
            Err(e) => Err(Error::storage(&self.name, e)),
        }
    }

    /// Apply the `txn` actions of commits after the cached version.
    async fn advance_txns(&mut self) -> Result<()> {
        let Some(latest) = self.table.version() else {
            return Ok(());
        };
        let Some(cached) = self.txn_version else {
            self.txns.clear();
            self.txns_complete = false;
            self.txn_version = Some(latest);
            return Ok(());
        };
        if latest < cached || latest - cached > MAX_INCREMENTAL_COMMITS {
            self.txns.clear();
            self.txns_complete = false;
            self.txn_version = Some(latest);
            return Ok(());
        }
        let log_store = self.table.log_store();
        for v in cached + 1..=latest {
            let Some(bytes) = log_store
                .read_commit_entry(v)
                .await
                .map_err(|e| Error::storage(&self.name, e))?
            else {
                self.txns.clear();
                self.txns_complete = false;
                break;
            };
            for (app_id, version) in txns_in_commit(&bytes) {
                self.txns.insert(app_id, Some(version));
            }
        }
        self.txn_version = Some(latest);
        Ok(())
    }

    /// Committed `txn` versions of `app_ids` as of the loaded version.
    pub async fn committed(&mut self, app_ids: &[String]) -> Result<HashMap<String, i64>> {
        let mut out = HashMap::new();
        if !self.exists {
            return Ok(out);
        }
        for id in app_ids {
            let v = match self.txns.get(id) {
                Some(v) => *v,
                None if self.txns_complete => None,
                None => {
                    let snapshot = self
                        .table
                        .snapshot()
                        .map_err(|e| Error::storage(&self.name, e))?;
                    let v = snapshot
                        .transaction_version(self.table.log_store().as_ref(), id)
                        .await
                        .map_err(|e| Error::storage(&self.name, e))?;
                    self.txns.insert(id.clone(), v);
                    v
                }
            };
            if let Some(v) = v {
                out.insert(id.clone(), v);
            }
        }
        Ok(out)
    }

    /// Load every `txn` of the table in one pass over the log (checkpoint `txn` column + the
    /// commits after it), for tables with many appIds (one per log object). Afterwards an
    /// unknown appId is known to be absent without asking delta-rs (one replay per appId).
    /// Falls back silently to per-appId lookups if the checkpoint cannot be read this way.
    pub async fn load_all_txns(&mut self) -> Result<()> {
        if self.txns_complete || !self.exists {
            return Ok(());
        }
        // Up to the head: our own commits after the snapshot carry `txn`s too.
        let Some(latest) = self.version() else {
            return Ok(());
        };
        match read_all_txns(&self.table, latest).await {
            Ok(all) => {
                self.txns = all.into_iter().map(|(k, v)| (k, Some(v))).collect();
                self.txns_complete = true;
                self.txn_version = Some(latest);
            }
            Err(e) => tracing::debug!(table = %self.name, error = %e, "txn preload skipped"),
        }
        Ok(())
    }

    /// Every `txn` of the table (appId, version), loaded in one pass; `None` when the one-pass
    /// load was not possible (then only per-appId lookups through [`committed`](Self::committed)).
    pub async fn all_txns(&mut self) -> Result<Option<Vec<(String, i64)>>> {
        self.load_all_txns().await?;
        if !self.txns_complete {
            return Ok(None);
        }
        Ok(Some(
            self.txns
                .iter()
                .filter_map(|(k, v)| v.map(|v| (k.clone(), v)))
                .collect(),
        ))
    }

    /// Refuse a table with deletion vectors ([`Error::DeletionVectors`], permanent): the
    /// loaded snapshot's protocol lists the `deletionVectors` reader feature, or a live file
    /// carries a deletion vector. Every path that reads data files as plain Parquet
    /// (compaction, the upsert's target, refine sources, redrive's lookup, `read`) calls it
    /// on the snapshot it reads, before reading or writing anything. Appends do not read data
    /// files and are not refused here. A handle that has loaded nothing passes.
    pub fn refuse_deletion_vectors(&self) -> Result<()> {
        let Ok(snapshot) = self.table.snapshot() else {
            return Ok(());
        };
        let feature = serde_json::to_value(snapshot.protocol())
            .ok()
            .and_then(|p| p.get("readerFeatures")?.as_array().cloned())
            .is_some_and(|f| f.iter().any(|f| f == "deletionVectors"));
        let files = snapshot
            .log_data()
            .iter()
            .filter(|f| f.deletion_vector_descriptor().is_some())
            .count();
        if !feature && files == 0 {
            return Ok(());
        }
        let mut found = Vec::new();
        if feature {
            found.push("the protocol lists the reader feature `deletionVectors`".to_string());
        }
        if files > 0 {
            found.push(format!(
                "{files} live data file(s) of version {} have one",
                snapshot.version()
            ));
        }
        Err(Error::DeletionVectors {
            table: self.name.clone(),
            found: found.join("; "),
        })
    }

    /// Arrow schema of the table as of [`version`](Self::version).
    pub fn arrow_schema(&self) -> Result<SchemaRef> {
        if let Some(schema) = &self.head_schema {
            return Ok(schema.clone());
        }
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| Error::storage(&self.name, e))?;
        let schema: Schema = snapshot.schema().as_ref().try_into_arrow().map_err(
            |e: deltalake::arrow::error::ArrowError| Error::Schema {
                table: self.name.clone(),
                reason: e.to_string(),
            },
        )?;
        Ok(Arc::new(schema))
    }

    /// Arrow schema of the loaded snapshot (older than the head's after our own schema change).
    pub(crate) fn snapshot_schema(&self) -> Option<SchemaRef> {
        let snapshot = self.table.snapshot().ok()?;
        let schema: Schema = snapshot.schema().as_ref().try_into_arrow().ok()?;
        Some(Arc::new(schema))
    }

    /// The state a planner plans against.
    pub async fn state(&mut self, app_ids: &[String]) -> Result<TableState> {
        if !self.exists {
            return Ok(TableState {
                version: None,
                schema: None,
                committed: HashMap::new(),
            });
        }
        Ok(TableState {
            version: self.version(),
            schema: Some(self.arrow_schema()?),
            committed: self.committed(app_ids).await?,
        })
    }
}

async fn read_all_txns(
    table: &DeltaTable,
    latest: u64,
) -> std::result::Result<HashMap<String, i64>, String> {
    use deltalake::logstore::object_store::{ObjectStoreExt, path::Path};
    use deltalake::parquet::arrow::ProjectionMask;
    use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[derive(serde::Deserialize)]
    struct LastCheckpoint {
        version: u64,
        parts: Option<u64>,
    }
    let store = table.object_store();
    let mut all = HashMap::new();
    let last: Option<LastCheckpoint> =
        match store.get(&Path::from("_delta_log/_last_checkpoint")).await {
            Ok(r) => {
                let bytes = r.bytes().await.map_err(|e| e.to_string())?;
                Some(serde_json::from_slice(&bytes).map_err(|e| e.to_string())?)
            }
            Err(deltalake::ObjectStoreError::NotFound { .. }) => None,
            Err(e) => return Err(e.to_string()),
        };
    let first_commit = match last {
        Some(cp) if cp.version <= latest => {
            let files: Vec<String> = match cp.parts {
                None => vec![format!("_delta_log/{:020}.checkpoint.parquet", cp.version)],
                Some(n) => (1..=n)
                    .map(|i| {
                        format!(
                            "_delta_log/{:020}.checkpoint.{i:010}.{n:010}.parquet",
                            cp.version
                        )
                    })
                    .collect(),
            };
            for f in files {
                let got = store
                    .get(&Path::from(f.as_str()))
                    .await
                    .map_err(|e| e.to_string())?;
                // Bounded like every whole read of the log: a larger checkpoint (many `txn`s,
                // many files) falls back to per-appId lookups instead of being held at once.
                if got.meta.size > crate::log_reads::MAX_WHOLE_BYTES {
                    return Err(format!(
                        "checkpoint part {f} has {} bytes (more than {} read whole)",
                        got.meta.size,
                        crate::log_reads::MAX_WHOLE_BYTES
                    ));
                }
                let bytes = got.bytes().await.map_err(|e| e.to_string())?;
                let builder =
                    ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| e.to_string())?;
                let mask = ProjectionMask::columns(builder.parquet_schema(), ["txn"]);
                let reader = builder
                    .with_projection(mask)
                    .build()
                    .map_err(|e| e.to_string())?;
                for batch in reader {
                    let batch = batch.map_err(|e| e.to_string())?;
                    all.extend(txns_in_checkpoint_batch(&batch)?);
                }
            }
            cp.version + 1
        }
        _ => 0,
    };
    let log_store = table.log_store();
    for v in first_commit..=latest {
        let bytes = log_store
            .read_commit_entry(v)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("commit {v} is missing"))?;
        all.extend(txns_in_commit(&bytes));
    }
    Ok(all)
}

/// `(appId, version)` of every `txn` in one batch of a checkpoint's `txn` column.
fn txns_in_checkpoint_batch(
    batch: &RecordBatch,
) -> std::result::Result<Vec<(String, i64)>, String> {
    use deltalake::arrow::array::{Array, AsArray, StructArray};
    use deltalake::arrow::compute::cast;
    use deltalake::arrow::datatypes::{DataType, Int64Type};
    let txn = batch
        .column_by_name("txn")
        .ok_or("checkpoint has no `txn` column")?;
    let txn: &StructArray = txn
        .as_struct_opt()
        .ok_or_else(|| format!("checkpoint `txn` is {}, not a struct", txn.data_type()))?;
    // Other writers may use large or view strings and other integer widths: cast, never assume.
    let column = |name: &str, to: &DataType| {
        let c = txn
            .column_by_name(name)
            .ok_or_else(|| format!("checkpoint `txn` has no `{name}`"))?;
        cast(c, to).map_err(|e| format!("checkpoint `txn.{name}`: {e}"))
    };
    let ids = column("appId", &DataType::Utf8)?;
    let versions = column("version", &DataType::Int64)?;
    let (Some(ids), Some(versions)) = (
        ids.as_string_opt::<i32>(),
        versions.as_primitive_opt::<Int64Type>(),
    ) else {
        return Err("checkpoint `txn` columns could not be cast".into());
    };
    Ok((0..txn.len())
        .filter(|&i| txn.is_valid(i) && ids.is_valid(i) && versions.is_valid(i))
        .map(|i| (ids.value(i).to_string(), versions.value(i)))
        .collect())
}

/// `(appId, version)` of every `txn` action in one commit file.
pub fn txns_in_commit(bytes: &[u8]) -> Vec<(String, i64)> {
    #[derive(serde::Deserialize)]
    struct Line {
        txn: Option<Txn>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Txn {
        app_id: String,
        version: i64,
    }
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| l.windows(6).any(|w| w == b"\"txn\":"))
        .filter_map(|l| serde_json::from_slice::<Line>(l).ok()?.txn)
        .map(|t| (t.app_id, t.version))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{ArrayRef, Int64Array, LargeStringArray, StructArray};
    use deltalake::arrow::datatypes::{DataType, Field};

    /// Another writer's checkpoint may use other Arrow types (large strings here): reading it
    /// must work or fail with an error, never panic.
    #[test]
    fn checkpoint_txns_of_other_types_do_not_panic() -> anyhow::Result<()> {
        let ids: ArrayRef = Arc::new(LargeStringArray::from(vec![Some("p/orders/0"), None]));
        let versions: ArrayRef = Arc::new(Int64Array::from(vec![Some(41), None]));
        let txn = StructArray::from(vec![
            (
                Arc::new(Field::new("appId", DataType::LargeUtf8, true)),
                ids,
            ),
            (
                Arc::new(Field::new("version", DataType::Int64, true)),
                versions,
            ),
        ]);
        let batch = RecordBatch::try_from_iter([("txn", Arc::new(txn) as ArrayRef)])?;
        let got = txns_in_checkpoint_batch(&batch).map_err(anyhow::Error::msg)?;
        assert_eq!(got, [("p/orders/0".to_string(), 41)]);
        Ok(())
    }

    #[test]
    fn txns_are_read_from_commit_json() {
        let commit = br#"{"commitInfo":{"timestamp":1}}
{"txn":{"appId":"p/orders/0","version":41,"lastUpdated":5}}
{"add":{"path":"a.parquet","size":1,"partitionValues":{},"modificationTime":1,"dataChange":true}}
{"txn":{"appId":"p/orders/1","version":7}}"#;
        assert_eq!(
            txns_in_commit(commit),
            [
                ("p/orders/0".to_string(), 41),
                ("p/orders/1".to_string(), 7)
            ]
        );
    }
}
