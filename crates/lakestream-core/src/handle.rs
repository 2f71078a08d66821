//! A long-lived handle on one table: the loaded `DeltaTable` plus a cache of committed `txn`
//! versions. Kept in the [`Ingestor`](crate::Ingestor) across invocations of a warm Lambda, so
//! an invocation costs an incremental log refresh, not a full table load; and `txn` versions
//! are read once from the snapshot, then advanced from each new commit's JSON (delta-rs
//! answers each appId by replaying the log segment, which is one pass per appId).

use crate::commit::TableState;
use crate::error::{Error, Result};
use crate::storage::Lake;
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
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
}

impl std::fmt::Debug for TableHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableHandle")
            .field("name", &self.name)
            .field("version", &self.table.version())
            .finish()
    }
}

impl TableHandle {
    /// A handle on `name` in `lake` (nothing is read yet).
    pub fn open(lake: &Lake, name: &str) -> Result<Self> {
        let url = lake.table_url(name)?;
        let table = DeltaTableBuilder::from_url(url)
            .and_then(|b| {
                b.with_storage_options(lake.storage_options().clone())
                    .build()
            })
            .map_err(|e| Error::storage(name, e))?;
        Ok(Self {
            name: name.to_string(),
            table,
            exists: false,
            txns: HashMap::new(),
            txn_version: None,
        })
    }

    /// Table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The loaded table.
    pub fn table(&self) -> &DeltaTable {
        &self.table
    }

    /// Mutable access (time travel in readers).
    pub fn table_mut(&mut self) -> &mut DeltaTable {
        &mut self.table
    }

    /// Whether the table existed at the last refresh.
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// Current loaded version.
    pub fn version(&self) -> Option<u64> {
        self.table.version()
    }

    /// Bring the handle up to the latest version; `false` when there is no table yet.
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
            self.txn_version = Some(latest);
            return Ok(());
        };
        if latest < cached || latest - cached > MAX_INCREMENTAL_COMMITS {
            self.txns.clear();
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

    /// Arrow schema of the loaded table.
    pub fn arrow_schema(&self) -> Result<SchemaRef> {
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

    /// The state a planner plans against.
    pub async fn state(&mut self, app_ids: &[String]) -> Result<TableState> {
        if !self.exists {
            return Ok(TableState {
                schema: None,
                committed: HashMap::new(),
            });
        }
        Ok(TableState {
            schema: Some(self.arrow_schema()?),
            committed: self.committed(app_ids).await?,
        })
    }
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
