//! The committed `txn` versions of a table (appId -> version: how far each writer got), as a
//! [`TableHandle`](super::TableHandle) knows them. delta-rs answers one appId at a time by
//! replaying the log segment, one pass per appId; a table written per log object has
//! thousands. So the handle keeps a [`TxnCache`]: versions read once, then advanced from each
//! new commit's JSON ([`txns_in_commit`]), or all of them read in one pass over the checkpoint's
//! `txn` column and the commits after it ([`read_all`]).
//!
//! Another writer's checkpoint may use other Arrow types than delta-rs's: the columns are cast,
//! never assumed, and a checkpoint that cannot be read this way is an [`Error::TxnLog`] (the
//! handle then falls back to per-appId lookups), never a panic.

use super::commits::read_commit;
use crate::error::{Error, Result};
use crate::table::log_reads::MAX_WHOLE_BYTES;
use deltalake::DeltaTable;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Transaction;
use std::collections::HashMap;

/// New commits beyond which the cache is dropped rather than advanced.
const MAX_INCREMENTAL_COMMITS: u64 = 50;

/// appId -> committed version, valid as of one table version.
#[derive(Debug, Default, Clone)]
pub(super) struct TxnCache {
    /// appId -> committed version (`None` = known absent), valid as of `as_of`.
    known: HashMap<String, Option<i64>>,
    /// The table version `known` describes (`None`: nothing cached yet).
    as_of: Option<u64>,
    /// `known` holds every appId of the table (loaded in one log pass), so a miss means absent.
    complete: bool,
}

impl TxnCache {
    /// Drop every cached version; the cache then describes `as_of` (`None`: nothing).
    pub(super) fn reset(&mut self, as_of: Option<u64>) {
        self.known.clear();
        self.complete = false;
        self.as_of = as_of;
    }

    /// The cached answer for `app_id`: `Some(version)` when known (`Some(None)`: known absent),
    /// `None` when the log must be asked.
    pub(super) fn lookup(&self, app_id: &str) -> Option<Option<i64>> {
        match self.known.get(app_id) {
            Some(v) => Some(*v),
            None if self.complete => Some(None),
            None => None,
        }
    }

    /// Remember what the log answered for `app_id`.
    pub(super) fn remember(&mut self, app_id: &str, version: Option<i64>) {
        self.known.insert(app_id.to_string(), version);
    }

    /// Whether every appId of the table is cached (a miss means absent).
    pub(super) fn is_complete(&self) -> bool {
        self.complete
    }

    /// Apply the `txn`s of our own commit at `version`, which follows the handle's head.
    pub(super) fn applied(&mut self, version: u64, txns: &[Transaction]) {
        for t in txns {
            self.known.insert(t.app_id.clone(), Some(t.version));
        }
        if self.as_of.is_some_and(|v| v + 1 == version) {
            self.as_of = Some(version);
        }
    }

    /// Replace the cache with every `txn` of the table as of `as_of` (from [`read_all`]).
    pub(super) fn replace_all(&mut self, all: HashMap<String, i64>, as_of: u64) {
        self.known = all.into_iter().map(|(k, v)| (k, Some(v))).collect();
        self.complete = true;
        self.as_of = Some(as_of);
    }

    /// Every cached `(appId, version)`; `None` unless the cache is complete.
    pub(super) fn all(&self) -> Option<Vec<(String, i64)>> {
        self.complete.then(|| {
            self.known
                .iter()
                .filter_map(|(k, v)| v.map(|v| (k.clone(), v)))
                .collect()
        })
    }

    /// Bring the cache up to `table`'s loaded version by applying the `txn` actions of the
    /// commits after it; dropped instead when nothing was cached, the table went back, more
    /// than [`MAX_INCREMENTAL_COMMITS`] landed or a commit file is gone.
    pub(super) async fn advance(&mut self, table: &DeltaTable, name: &str) -> Result<()> {
        let Some(latest) = table.version() else {
            return Ok(());
        };
        let Some(cached) = self.as_of else {
            self.reset(Some(latest));
            return Ok(());
        };
        if latest < cached || latest - cached > MAX_INCREMENTAL_COMMITS {
            self.reset(Some(latest));
            return Ok(());
        }
        let log_store = table.log_store();
        for v in cached + 1..=latest {
            let Some(bytes) = read_commit(&log_store, name, v).await? else {
                self.known.clear();
                self.complete = false;
                break;
            };
            for (app_id, version) in txns_in_commit(&bytes) {
                self.known.insert(app_id, Some(version));
            }
        }
        self.as_of = Some(latest);
        Ok(())
    }
}

/// Every `txn` of `table` (named `name`) as of `latest`, in one pass: the `txn` column of the
/// last checkpoint at or below `latest`, then the commits after it. Errors: storage errors
/// (retryable), [`Error::TxnLog`] when a checkpoint part is too large to read whole or not in
/// the protocol's shape, or a commit file is missing.
pub(super) async fn read_all(
    table: &DeltaTable,
    name: &str,
    latest: u64,
) -> Result<HashMap<String, i64>> {
    use deltalake::logstore::object_store::{ObjectStoreExt, path::Path};
    use deltalake::parquet::arrow::ProjectionMask;
    use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[derive(serde::Deserialize)]
    struct LastCheckpoint {
        version: u64,
        parts: Option<u64>,
    }
    let unreadable = |reason: String| Error::TxnLog {
        table: name.to_string(),
        reason,
    };
    let store = table.object_store();
    let mut all = HashMap::new();
    let last: Option<LastCheckpoint> =
        match store.get(&Path::from("_delta_log/_last_checkpoint")).await {
            Ok(r) => {
                let bytes = r.bytes().await.map_err(|e| Error::storage(name, e))?;
                Some(serde_json::from_slice(&bytes).map_err(|e| {
                    unreadable(format!("`_delta_log/_last_checkpoint` is not valid: {e}"))
                })?)
            }
            Err(deltalake::ObjectStoreError::NotFound { .. }) => None,
            Err(e) => return Err(Error::storage(name, e)),
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
                    .map_err(|e| Error::storage(name, e))?;
                // Bounded like every whole read of the log: a larger checkpoint (many `txn`s,
                // many files) falls back to per-appId lookups instead of being held at once.
                if got.meta.size > MAX_WHOLE_BYTES {
                    return Err(unreadable(format!(
                        "checkpoint part {f} has {} bytes (more than {MAX_WHOLE_BYTES} read whole)",
                        got.meta.size
                    )));
                }
                let bytes = got.bytes().await.map_err(|e| Error::storage(name, e))?;
                let parquet = |e: deltalake::parquet::errors::ParquetError| {
                    unreadable(format!("checkpoint part {f} is not readable Parquet: {e}"))
                };
                let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(parquet)?;
                let mask = ProjectionMask::columns(builder.parquet_schema(), ["txn"]);
                let reader = builder.with_projection(mask).build().map_err(parquet)?;
                for batch in reader {
                    let batch = batch.map_err(|e| {
                        unreadable(format!("checkpoint part {f} is not readable Parquet: {e}"))
                    })?;
                    all.extend(txns_in_checkpoint_batch(name, &batch)?);
                }
            }
            cp.version + 1
        }
        _ => 0,
    };
    let log_store = table.log_store();
    for v in first_commit..=latest {
        let bytes = read_commit(&log_store, name, v)
            .await?
            .ok_or_else(|| unreadable(format!("commit {v} is missing")))?;
        all.extend(txns_in_commit(&bytes));
    }
    Ok(all)
}

/// `(appId, version)` of every `txn` in one batch of a checkpoint's `txn` column of `table`;
/// [`Error::TxnLog`] when the column is missing or not castable to a string and an integer.
fn txns_in_checkpoint_batch(table: &str, batch: &RecordBatch) -> Result<Vec<(String, i64)>> {
    use deltalake::arrow::array::{Array, AsArray, StructArray};
    use deltalake::arrow::compute::cast;
    use deltalake::arrow::datatypes::{DataType, Int64Type};
    let unreadable = |reason: String| Error::TxnLog {
        table: table.to_string(),
        reason,
    };
    let txn = batch
        .column_by_name("txn")
        .ok_or_else(|| unreadable("checkpoint has no `txn` column".into()))?;
    let txn: &StructArray = txn.as_struct_opt().ok_or_else(|| {
        unreadable(format!(
            "checkpoint `txn` is {}, not a struct",
            txn.data_type()
        ))
    })?;
    // Other writers may use large or view strings and other integer widths: cast, never assume.
    let column = |name: &str, to: &DataType| {
        let c = txn
            .column_by_name(name)
            .ok_or_else(|| unreadable(format!("checkpoint `txn` has no `{name}`")))?;
        cast(c, to).map_err(|e| unreadable(format!("checkpoint `txn.{name}`: {e}")))
    };
    let ids = column("appId", &DataType::Utf8)?;
    let versions = column("version", &DataType::Int64)?;
    let (Some(ids), Some(versions)) = (
        ids.as_string_opt::<i32>(),
        versions.as_primitive_opt::<Int64Type>(),
    ) else {
        return Err(unreadable(
            "checkpoint `txn` columns could not be cast".into(),
        ));
    };
    Ok((0..txn.len())
        .filter(|&i| txn.is_valid(i) && ids.is_valid(i) && versions.is_valid(i))
        .map(|i| (ids.value(i).to_string(), versions.value(i)))
        .collect())
}

/// `(appId, version)` of every `txn` action in one commit file; lines that are not valid
/// `txn` actions are skipped.
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
    use std::sync::Arc;

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
        let got = txns_in_checkpoint_batch("raw/order", &batch)?;
        assert_eq!(got, [("p/orders/0".to_string(), 41)]);
        Ok(())
    }

    /// A checkpoint without a `txn` struct is a typed, non-retryable [`Error::TxnLog`] naming
    /// the table, not a panic.
    #[test]
    fn a_checkpoint_without_txn_is_a_typed_error() -> anyhow::Result<()> {
        let other: ArrayRef = Arc::new(Int64Array::from(vec![Some(1)]));
        let batch = RecordBatch::try_from_iter([("add", other.clone())])?;
        let missing = txns_in_checkpoint_batch("raw/order", &batch);
        assert!(
            matches!(&missing, Err(Error::TxnLog { table, reason })
                if table == "raw/order" && reason.contains("no `txn` column")),
            "{missing:?}"
        );
        let batch = RecordBatch::try_from_iter([("txn", other)])?;
        let flat = txns_in_checkpoint_batch("raw/order", &batch);
        assert!(
            matches!(&flat, Err(e @ Error::TxnLog { reason, .. })
                if reason.contains("not a struct") && !e.is_retryable()),
            "{flat:?}"
        );
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
