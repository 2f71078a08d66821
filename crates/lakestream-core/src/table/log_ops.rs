//! The table's own log operations and storage, for maintenance: the last checkpoint's version,
//! writing a checkpoint, cleaning up expired log files, the tombstones (files removed but still
//! referenced by the log), a vacuum plan, and the table's object store for what is not a read
//! of its log or data files (listing the table, deleting vacuumed files, side files such as
//! manifests). Reads of commits and data files go through [`commits`](super::commits) and
//! [`parquet_read`](super::parquet_read).

use super::handle::TableHandle;
use crate::error::{Error, Result};
use crate::partition_path::decode;
use deltalake::logstore::object_store::{ObjectStoreExt, path::Path};
use deltalake::logstore::{LogStoreRef, ObjectStoreRef};
use deltalake::operations::vacuum::VacuumBuilder;
use futures::TryStreamExt;
use std::collections::HashSet;

impl TableHandle {
    /// The table root's object store (relative paths), for listing the table, deleting files
    /// and side files; not for reading the log or data files (the seams of this layer do).
    pub fn object_store(&self) -> ObjectStoreRef {
        self.table.object_store()
    }

    /// The table's log store, for writers that commit outside the commit engine (tests that
    /// play another engine); readers use [`commits`](Self::commits).
    pub fn log_store(&self) -> LogStoreRef {
        self.table.log_store()
    }

    /// A writer of data files in the table's layout (its schema, partitioning and store) that
    /// stages files without committing them: the caller commits the `add`s it returns.
    pub fn file_writer(&self) -> Result<deltalake::writer::RecordBatchWriter> {
        deltalake::writer::RecordBatchWriter::for_table(&self.table)
            .map(|w| w.with_writer_properties(super::parquet_write::writer_properties()))
            .map_err(|e| Error::storage(&self.name, e))
    }

    /// The version of the last checkpoint (from `_delta_log/_last_checkpoint`), if any.
    pub async fn last_checkpoint(&self) -> Result<Option<u64>> {
        #[derive(serde::Deserialize)]
        struct Last {
            version: u64,
        }
        match self
            .table
            .object_store()
            .get(&Path::from("_delta_log/_last_checkpoint"))
            .await
        {
            Ok(r) => {
                let bytes = r.bytes().await.map_err(|e| Error::storage(&self.name, e))?;
                Ok(serde_json::from_slice::<Last>(&bytes)
                    .ok()
                    .map(|l| l.version))
            }
            Err(deltalake::ObjectStoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::storage(&self.name, e)),
        }
    }

    /// Write a checkpoint of the loaded snapshot.
    pub async fn create_checkpoint(&self) -> Result<()> {
        deltalake::checkpoints::create_checkpoint(&self.table, None)
            .await
            .map_err(|e| Error::storage(&self.name, e))
    }

    /// Remove log files older than `cutoff_millis` and older than the checkpoint at `keep`
    /// (delta-rs's expired-log cleanup); the number removed.
    pub async fn cleanup_expired_logs(&self, keep: u64, cutoff_millis: i64) -> Result<usize> {
        deltalake::checkpoints::cleanup_expired_logs_for(
            keep,
            self.table.log_store().as_ref(),
            cutoff_millis,
            None,
        )
        .await
        .map_err(|e| Error::storage(&self.name, e))
    }

    /// The loaded snapshot's tombstones (removed files the log still references), as paths
    /// relative to the table root, percent-decoded.
    pub async fn tombstones(&self) -> Result<HashSet<String>> {
        self.snapshot()?
            .all_tombstones(self.table.log_store().as_ref())
            .map_ok(|t| decode(t.path().as_ref().trim_start_matches('/')))
            .try_collect()
            .await
            .map_err(|e| Error::storage(&self.name, e))
    }

    /// delta-rs's vacuum of the loaded snapshot, to plan with (a dry run: deleting and its
    /// commits are the caller's).
    pub fn vacuum_plan(&self) -> VacuumBuilder {
        self.table.clone().vacuum()
    }
}
