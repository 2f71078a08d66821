//! Symlink manifests for Athena/Presto/Hive (`SymlinkTextInputFormat`):
//! `_symlink_format_manifest/<partition path>/manifest` lists the absolute URIs of the live data
//! files of that partition. Incremental: a small state file remembers a fingerprint per
//! partition, so only partitions whose file set changed are rewritten, and manifests of
//! partitions that became empty are removed. (delta-rs `generate()` rewrites all of them.)

use crate::error::{Error, Result};
use crate::handle::TableHandle;
use crate::storage::Lake;
use deltalake::logstore::object_store::{ObjectStoreExt, PutPayload, path::Path};
use std::collections::BTreeMap;

const DIR: &str = "_symlink_format_manifest";
const STATE: &str = "_symlink_format_manifest/_lakestream_state.json";

/// What a manifest run did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ManifestReport {
    /// Table.
    pub table: String,
    /// Table version the manifests describe.
    pub version: u64,
    /// Partitions whose manifest was (re)written.
    pub written: usize,
    /// Partitions whose manifest was removed (no live files any more).
    pub removed: usize,
    /// Partitions left as they were.
    pub unchanged: usize,
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct State {
    version: u64,
    partitions: BTreeMap<String, u64>,
}

/// FNV-1a, stable across builds (a fingerprint stored in S3 must not change with the compiler).
fn fnv1a(parts: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(b'\n')) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Generate (incrementally) the symlink manifests of `table`.
pub async fn manifest(lake: &Lake, table: &str) -> Result<ManifestReport> {
    let h = TableHandle::open_existing(lake, table).await?;
    // A manifest lists whole Parquet files: a reader of it would see deleted rows again.
    h.refuse_deletion_vectors()?;
    let store = h.table().object_store();
    let root = lake.table_url(table)?;
    let snapshot = h.table().snapshot().map_err(|e| Error::storage(table, e))?;
    let columns = snapshot.metadata().partition_columns().to_vec();
    let mut current: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in snapshot.log_data().iter() {
        let values = f.partition_values_map();
        let dir = columns
            .iter()
            .map(|c| match values.get(c).cloned().flatten() {
                Some(v) => format!("{c}={v}"),
                None => format!("{c}=__HIVE_DEFAULT_PARTITION__"),
            })
            .collect::<Vec<_>>()
            .join("/");
        let uri = root
            .join(f.path().as_ref())
            .map(|u| u.to_string())
            .unwrap_or_else(|_| f.path().to_string());
        current.entry(dir).or_default().push(uri);
    }
    let old: State = match store.get(&Path::from(STATE)).await {
        Ok(r) => serde_json::from_slice(&r.bytes().await.map_err(|e| Error::storage(table, e))?)
            .unwrap_or_default(),
        Err(deltalake::ObjectStoreError::NotFound { .. }) => State::default(),
        Err(e) => return Err(Error::storage(table, e)),
    };
    let mut report = ManifestReport {
        table: table.to_string(),
        version: h.version().unwrap_or(0),
        ..Default::default()
    };
    let mut state = State {
        version: report.version,
        partitions: BTreeMap::new(),
    };
    let path_of = |dir: &str| {
        if dir.is_empty() {
            format!("{DIR}/manifest")
        } else {
            format!("{DIR}/{dir}/manifest")
        }
    };
    for (dir, mut uris) in current {
        uris.sort();
        let fp = fnv1a(&uris);
        if old.partitions.get(&dir) == Some(&fp) {
            report.unchanged += 1;
        } else {
            let body = uris.join("\n") + "\n";
            store
                .put(
                    &Path::from(path_of(&dir)),
                    PutPayload::from(body.into_bytes()),
                )
                .await
                .map_err(|e| Error::storage(table, e))?;
            report.written += 1;
        }
        state.partitions.insert(dir, fp);
    }
    for dir in old
        .partitions
        .keys()
        .filter(|d| !state.partitions.contains_key(*d))
    {
        match store.delete(&Path::from(path_of(dir))).await {
            Ok(()) | Err(deltalake::ObjectStoreError::NotFound { .. }) => report.removed += 1,
            Err(e) => return Err(Error::storage(table, e)),
        }
    }
    let body = serde_json::to_vec(&state).map_err(|e| Error::Config(e.to_string()))?;
    store
        .put(&Path::from(STATE), PutPayload::from(body))
        .await
        .map_err(|e| Error::storage(table, e))?;
    Ok(report)
}
