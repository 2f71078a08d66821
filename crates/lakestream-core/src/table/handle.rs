//! A long-lived handle on one table: the loaded `DeltaTable` plus a cache of its committed
//! `txn` versions ([`TxnCache`]). Kept warm across invocations of a Lambda
//! ([`WarmHandles`](super::WarmHandles)), so an invocation costs no table load. The rest of
//! the crate reads the table through the handle's accessors ([`snapshot`](TableHandle::snapshot),
//! [`arrow_schema`](TableHandle::arrow_schema),
//! [`partition_columns`](TableHandle::partition_columns), [`table_id`](TableHandle::table_id),
//! [`property`](TableHandle::property)), each mapping delta-rs's error to this crate's
//! [`Error`] in one place.
//!
//! The handle's *head* is the newest version it knows the content of. It runs ahead of the
//! delta-rs snapshot after our own commits: what we committed (the `txn`s, a new schema) is
//! applied to the handle from memory instead of being read back. A writer plans against the
//! head without asking storage ([`TableHandle::sync`]; the Kafka path first looks for the next
//! commit together with the identity HEAD, [`WarmHandles::take_fresh`](super::WarmHandles::take_fresh));
//! if another writer committed meanwhile,
//! the conditional PUT of head + 1 fails and the commit engine reads what landed
//! ([`TableHandle::refresh`]) and checks it, so a stale head costs a retry, never a duplicate.
//! That holds only while the table is the same table, which a warm handle proves once per
//! invocation ([`TableHandle::revalidate`], in the sibling module `identity`).

use super::identity::HeadTag;
use super::log_reads::LogReads;
use super::txns::{self, TxnCache};
use crate::error::{Error, Result};
use crate::storage::Lake;
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use deltalake::kernel::Transaction;
use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
use deltalake::table::state::DeltaTableState;
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use std::collections::HashMap;
use std::sync::Arc;

/// One table, loaded lazily and refreshed incrementally.
pub struct TableHandle {
    pub(super) name: String,
    pub(super) table: DeltaTable,
    pub(super) exists: bool,
    /// Committed `txn` versions per appId, valid as of the cache's own version.
    pub(super) txns: TxnCache,
    /// Newest version whose content the handle knows (>= the snapshot's after our own commits).
    pub(super) head: Option<u64>,
    /// The schema as of `head` when our own commit changed it after the snapshot was loaded.
    pub(super) head_schema: Option<SchemaRef>,
    /// What the head's commit file looked like when the handle wrote or read it: the proof,
    /// checked by [`revalidate`](Self::revalidate), that the table is still the one loaded.
    pub(super) head_tag: Option<HeadTag>,
    /// The log-read cache in front of the table's store (absent for [`from_table`](Self::from_table)).
    pub(super) log_reads: Option<Arc<LogReads>>,
    /// Loaded at an older version on purpose (time travel): its files may have been vacuumed,
    /// so they are read from storage, never from the process's held data files.
    pub(super) pinned: bool,
    /// Our own commits through this handle since a refresh last found another writer's
    /// commit ([`CONTENDED_FOR`] or more: the table is not contended).
    pub(super) own_since_other: u32,
    /// A refresh in this invocation since our last own commit: a contended
    /// [`sync`](TableHandle::sync) asks once (cleared by [`revalidate`](TableHandle::revalidate),
    /// the first use of a kept handle in an invocation).
    pub(super) looked: bool,
}

/// For this many of our own commits after a refresh found another writer's commit, a table is
/// *contended*: [`TableHandle::sync`] looks for a newer commit (one GET) before planning
/// instead of planning from the head. The GET costs 1/12.5 of the conditional PUT it saves
/// when it finds one (a failed PUT then reads the same commit anyway), so it pays when more
/// than ~8 % of commits would fail. The Kafka ingest path always looks, with the identity HEAD
/// ([`WarmHandles::take_fresh`](super::WarmHandles::take_fresh)): two ingest instances on one
/// topic measured 15-35 % (`make bench-fresh`); this rule is the other writers'.
pub const CONTENDED_FOR: u32 = 8;

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
            txns: TxnCache::default(),
            head: None,
            head_schema: None,
            head_tag: None,
            log_reads: None,
            pinned: false,
            own_since_other: CONTENDED_FOR,
            looked: false,
        }
    }

    /// A copy of the handle to keep warm while this one is used (and maybe committed to): the
    /// same loaded snapshot, `txn` cache and log-read cache. A copy left behind by a later
    /// commit of the original is only stale, never wrong: its next use revalidates and
    /// refreshes it from storage.
    pub fn warm_copy(&self) -> Self {
        Self {
            name: self.name.clone(),
            table: self.table.clone(),
            exists: self.exists,
            txns: self.txns.clone(),
            head: self.head,
            head_schema: self.head_schema.clone(),
            head_tag: self.head_tag.clone(),
            log_reads: self.log_reads.clone(),
            pinned: self.pinned,
            own_since_other: self.own_since_other,
            // Still looked within this invocation (the next one's `revalidate` clears it).
            looked: self.looked,
        }
    }

    /// Table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The loaded table, for the commit engine (`commit/`) only: every other reader goes
    /// through this layer's seams (commits, live files, the Parquet reader, snapshots at a
    /// version), so the crate's lints refuse it elsewhere (`clippy::disallowed_methods`, in
    /// the workspace's clippy.toml; allowed on `table` and `commit` in lib.rs). Its snapshot
    /// may be older than [`version`](Self::version) after our own commits: call
    /// [`refresh`](Self::refresh) before reading its files.
    pub(crate) fn table(&self) -> &DeltaTable {
        &self.table
    }

    /// The loaded snapshot (files, metadata, protocol, table config). It may be older than
    /// [`version`](Self::version) after our own commits. [`Error::Storage`] (retryable) when
    /// nothing is loaded: call [`refresh`](Self::refresh) or [`sync`](Self::sync) first.
    pub fn snapshot(&self) -> Result<&DeltaTableState> {
        self.table
            .snapshot()
            .map_err(|e| Error::storage(&self.name, e))
    }

    /// The table's partition columns (empty when unpartitioned).
    pub fn partition_columns(&self) -> Result<Vec<String>> {
        Ok(self.snapshot()?.metadata().partition_columns().to_vec())
    }

    /// The table's id (`metaData.id`): it changes when the table is re-created at its path.
    pub fn table_id(&self) -> Result<String> {
        Ok(self.snapshot()?.metadata().id().to_string())
    }

    /// A table property (`metaData.configuration`), `None` when it is not set.
    pub fn property(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .snapshot()?
            .metadata()
            .configuration()
            .get(key)
            .cloned())
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
    /// loaded (a warm handle) and not [contended](Self::contended) or refreshed since our last
    /// commit, else a [`refresh`](Self::refresh) (a warm one: one GET of the next commit). A
    /// write planned on a stale head is caught by the conditional PUT of the next version,
    /// which another writer's commit occupies; the commit engine then refreshes and checks.
    pub async fn sync(&mut self) -> Result<bool> {
        let loaded = self.exists && self.table.version().is_some();
        if loaded && (!self.contended() || self.looked) {
            return Ok(true);
        }
        self.refresh().await
    }

    /// Whether the loaded snapshot is the head: no commit of ours was applied from memory since
    /// the last load (files read through the handle are then the head's).
    pub fn snapshot_is_head(&self) -> bool {
        self.exists && self.table.version().is_some() && self.table.version() == self.head
    }

    /// Whether a refresh found another writer's commit within our last [`CONTENDED_FOR`]
    /// commits through this handle (two instances appending to one table).
    pub fn contended(&self) -> bool {
        self.own_since_other < CONTENDED_FOR
    }

    /// Apply our own commit at `version` from memory: its `txn`s and the schema after it.
    /// A version that does not follow the head (not expected: `land` PUTs head + 1) leaves the
    /// handle as it is; the next write's PUT then fails on the occupied version and refreshes.
    pub(crate) fn applied(&mut self, version: u64, txns: &[Transaction], schema: &SchemaRef) {
        if self.version().map(|v| v + 1) != Some(version) {
            return;
        }
        self.txns.applied(version, txns);
        self.own_since_other = self.own_since_other.saturating_add(1);
        self.looked = false;
        let changed = self
            .snapshot_schema()
            .is_none_or(|s| s.fields() != schema.fields());
        self.head_schema = changed.then(|| schema.clone());
        self.head = Some(version);
        self.head_tag = self.held_tag(version);
    }

    /// Replace the table with the state a commit returned (the handle of a table we created).
    pub(crate) fn adopt(&mut self, state: DeltaTableState) {
        let version = state.version();
        self.table.state = Some(state);
        self.exists = true;
        self.pinned = false;
        self.head = Some(version);
        self.head_schema = None;
        self.txns.reset(Some(version));
        self.head_tag = self.held_tag(version);
    }

    /// Bring the handle up to the latest version in storage; `false` when there is no table.
    ///
    /// A loaded handle first looks for the next commit with a GET (no LIST: the log-read cache
    /// answers delta-rs's listing from what it knows, [`LogReads::advance`]); nothing new costs
    /// that one GET. A cold load finds the log from `_last_checkpoint` with a HEAD and GETs, or
    /// lists it once ([`LogReads::discover`]).
    pub async fn refresh(&mut self) -> Result<bool> {
        let advanced = match self.table.version() {
            Some(_) => Some(self.advance().await?),
            None => None,
        };
        self.refresh_after(advanced).await
    }

    /// The rest of [`refresh`](Self::refresh) once the next commit was looked for: `advanced`
    /// is what [`advance`](Self::advance) found (`None`: it was not asked; a loaded table then
    /// updates through delta-rs).
    pub(super) async fn refresh_after(&mut self, advanced: Option<Option<u64>>) -> Result<bool> {
        let known = self.version();
        let res = if let Some(loaded) = self.table.version() {
            match advanced.flatten() {
                Some(newest) if newest <= loaded => Ok(()),
                _ => self.table.update_state().await,
            }
        } else {
            // Ask first: loading a missing table makes delta-rs log an error.
            match self.discover().await {
                Ok(false) => return Ok(false),
                Ok(true) => self.table.load().await,
                Err(e) => Err(e),
            }
        };
        match res {
            Ok(()) => {
                self.exists = true;
                self.pinned = false;
                self.head = self.table.version();
                // Past what we knew (our own commits included): another writer committed.
                if known.is_some_and(|k| self.head > Some(k)) {
                    self.own_since_other = 0;
                }
                self.looked = true;
                self.head_schema = None;
                self.note_head_tag().await;
                self.txns.advance(&self.table, &self.name).await?;
                Ok(true)
            }
            Err(DeltaTableError::NotATable(_)) => Ok(false),
            Err(e) => Err(Error::storage(&self.name, e)),
        }
    }

    /// The newest version the log-read cache finds ([`LogReads::advance`]); `None` without one
    /// or when it never listed the log.
    pub(super) async fn advance(&self) -> Result<Option<u64>> {
        let Some(l) = &self.log_reads else {
            return Ok(None);
        };
        l.advance().await.map_err(|e| Error::storage(&self.name, e))
    }

    /// Whether the table exists: the log-read cache's lookups (GETs from `_last_checkpoint`, or
    /// one LIST; it then answers the load's listing), else delta-rs's own check.
    async fn discover(&self) -> std::result::Result<bool, DeltaTableError> {
        let dir = deltalake::Path::from_url_path(self.table.table_url().path())
            .map(|root| root.join("_delta_log"));
        match (&self.log_reads, dir) {
            (Some(l), Ok(dir)) => Ok(l.discover(&dir).await?),
            _ => self.table.verify_deltatable_existence().await,
        }
    }

    /// Committed `txn` versions of `app_ids` as of the loaded version (absent: never
    /// committed). An appId the cache does not know is asked of delta-rs (one log replay).
    pub async fn committed(&mut self, app_ids: &[String]) -> Result<HashMap<String, i64>> {
        let mut out = HashMap::new();
        if !self.exists {
            return Ok(out);
        }
        for id in app_ids {
            let v = match self.txns.lookup(id) {
                Some(v) => v,
                None => {
                    let v = self
                        .snapshot()?
                        .transaction_version(self.table.log_store().as_ref(), id)
                        .await
                        .map_err(|e| Error::storage(&self.name, e))?;
                    self.txns.remember(id, v);
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
        if self.txns.is_complete() || !self.exists {
            return Ok(());
        }
        // Up to the head: our own commits after the snapshot carry `txn`s too.
        let Some(latest) = self.version() else {
            return Ok(());
        };
        match txns::read_all(&self.table, &self.name, latest).await {
            Ok(all) => self.txns.replace_all(all, latest),
            Err(e) => tracing::debug!(table = %self.name, error = %e, "txn preload skipped"),
        }
        Ok(())
    }

    /// Every `txn` of the table (appId, version), loaded in one pass; `None` when the one-pass
    /// load was not possible (then only per-appId lookups through [`committed`](Self::committed)).
    pub async fn all_txns(&mut self) -> Result<Option<Vec<(String, i64)>>> {
        self.load_all_txns().await?;
        Ok(self.txns.all())
    }

    /// Arrow schema of the table as of [`version`](Self::version) (after our own schema change
    /// too); [`Error::Schema`] when the Delta schema has no Arrow form.
    pub fn arrow_schema(&self) -> Result<SchemaRef> {
        if let Some(schema) = &self.head_schema {
            return Ok(schema.clone());
        }
        let schema: Schema = self
            .snapshot()?
            .schema()
            .as_ref()
            .try_into_arrow()
            .map_err(|e: deltalake::arrow::error::ArrowError| Error::Schema {
                table: self.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(Arc::new(schema))
    }

    /// Arrow schema of the loaded snapshot (older than the head's after our own schema change).
    pub(crate) fn snapshot_schema(&self) -> Option<SchemaRef> {
        let snapshot = self.table.snapshot().ok()?;
        let schema: Schema = snapshot.schema().as_ref().try_into_arrow().ok()?;
        Some(Arc::new(schema))
    }
}
