//! Symlink manifests for Athena/Presto/Hive (`SymlinkTextInputFormat`):
//! `_symlink_format_manifest/<partition path>/manifest` lists the absolute paths of the live
//! data files of that partition. Incremental: a small state file remembers a fingerprint per
//! partition, so only partitions whose file set changed are rewritten, and manifests of
//! partitions that became empty are removed. (delta-rs `generate()` rewrites all of them.)
//!
//! The partition path is the one Hive (and so Athena's `MSCK REPAIR TABLE`) reads back:
//! `FileUtils.makePartName`, i.e. `<column lower-cased>=<value>` per partition column, both
//! escaped by `FileUtils.escapePathName` ([`escape_path_name`]), a null or empty value written
//! `__HIVE_DEFAULT_PARTITION__` (Athena reads it as NULL, so `""` and null are one partition
//! there). The key is written as is (`%3A` in the object key, never `%253A`). Each line is the
//! data file's object key under the table's absolute location, unescaped, as Delta's own
//! manifest generator writes it: a Hadoop `Path` takes its text literally.

use crate::error::{Error, Result};
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::logstore::object_store::{ObjectStoreExt, PutPayload, path::Path};
use std::collections::{BTreeMap, HashMap};
use url::Url;

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

/// Hive's name for a null or empty partition value.
pub const HIVE_DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// How partition paths of the state file were written: 0 (absent) = before Hive escaping, when
/// keys went through `Path::from` (which percent-encodes `%`, non-ASCII and more on its own).
const ESCAPING: u8 = 1;

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct State {
    version: u64,
    #[serde(default)]
    escaping: u8,
    partitions: BTreeMap<String, u64>,
}

/// Whether Hive's `FileUtils.escapePathName` escapes `c`: the ASCII controls 0x00-0x1F, DEL
/// and `"#%'*/:=?\{[]^` (Hive's `charToEscape`; Spark's `ExternalCatalogUtils` has the same
/// list). Everything else, spaces and non-ASCII included, is kept.
fn hive_escapes(c: char) -> bool {
    matches!(
        c,
        '\u{0}'
            ..='\u{1f}'
                | '\u{7f}'
                | '"'
                | '#'
                | '%'
                | '\''
                | '*'
                | '/'
                | ':'
                | '='
                | '?'
                | '\\'
                | '{'
                | '['
                | ']'
                | '^'
    )
}

/// Hive's `FileUtils.escapePathName(value)`: each escaped character as `%XX` (upper-case hex),
/// a null or empty value as `__HIVE_DEFAULT_PARTITION__`.
pub fn escape_path_name(value: Option<&str>) -> String {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return HIVE_DEFAULT_PARTITION.to_string();
    };
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if hive_escapes(c) {
            out += &format!("%{:02X}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// Hive's `FileUtils.makePartName`: `col=value` per partition column, in the table's order,
/// column names lower-cased (Athena's `MSCK REPAIR TABLE` finds only lower-case keys).
pub fn hive_partition_path(columns: &[String], values: &HashMap<String, Option<String>>) -> String {
    columns
        .iter()
        .map(|c| {
            let value = values.get(c).cloned().flatten();
            format!(
                "{}={}",
                escape_path_name(Some(&c.to_lowercase())),
                escape_path_name(value.as_deref())
            )
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The absolute path of a data file (`rel`: its decoded path in the table) as a manifest line:
/// scheme, bucket and the table's path unescaped, so the line is the object key itself.
fn absolute(root: &Url, rel: &str) -> String {
    let path = crate::partition_path::decode(root.path());
    let sep = if path.ends_with('/') { "" } else { "/" };
    format!(
        "{}://{}{path}{sep}{rel}",
        root.scheme(),
        root.host_str().unwrap_or_default()
    )
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
    let store = h.object_store();
    let root = lake.table_url(table)?;
    let columns = h.partition_columns()?;
    let mut current: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in h.live_files()? {
        let dir = hive_partition_path(&columns, &f.partition_values());
        current
            .entry(dir)
            .or_default()
            .push(absolute(&root, &f.path()));
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
        escaping: ESCAPING,
        partitions: BTreeMap::new(),
    };
    let name_of = |dir: &str| {
        if dir.is_empty() {
            format!("{DIR}/manifest")
        } else {
            format!("{DIR}/{dir}/manifest")
        }
    };
    // The key as written (an escaped partition path holds no `/` of a value, no control
    // character and no `.`/`..` segment, so it always parses).
    let path_of = |dir: &str| {
        Path::parse(name_of(dir)).map_err(|e| {
            Error::Config(format!(
                "table `{table}`: manifest path for partition `{dir}`: {e}"
            ))
        })
    };
    for (dir, mut uris) in current {
        uris.sort();
        let fp = fnv1a(&uris);
        if old.partitions.get(&dir) == Some(&fp) {
            report.unchanged += 1;
        } else {
            let body = uris.join("\n") + "\n";
            store
                .put(&path_of(&dir)?, PutPayload::from(body.into_bytes()))
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
        // Manifests of the state before escaping were written through `Path::from`.
        let path = if old.escaping == 0 {
            Path::from(name_of(dir))
        } else {
            path_of(dir)?
        };
        match store.delete(&path).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hive_escaping_of_every_ascii_character() {
        // Hive's charToEscape, written out: 0x00-0x1F, 0x7F and these.
        let escaped: Vec<char> = (0u8..128)
            .map(char::from)
            .filter(|c| escape_path_name(Some(&c.to_string())) != c.to_string())
            .collect();
        let mut want: Vec<char> = (0u8..0x20).map(char::from).collect();
        want.extend([
            '"', '#', '%', '\'', '*', '/', ':', '=', '?', '[', '\\', ']', '^', '{', '\u{7f}',
        ]);
        want.sort_unstable();
        assert_eq!(escaped, want);
        assert_eq!(escape_path_name(Some("\u{1}")), "%01");
        assert_eq!(
            escape_path_name(Some("2026-01-02 03:04:05")),
            "2026-01-02 03%3A04%3A05"
        );
        assert_eq!(escape_path_name(Some("ü}~ <>|")), "ü}~ <>|");
        assert_eq!(escape_path_name(Some("")), HIVE_DEFAULT_PARTITION);
        assert_eq!(escape_path_name(None), HIVE_DEFAULT_PARTITION);
    }

    #[test]
    fn manifest_lines_are_unescaped_absolute_paths() {
        let root = Url::parse("s3://b/my%20lake/raw/order/").expect("url");
        assert_eq!(
            absolute(&root, "d=a%3Ab/part-0.parquet"),
            "s3://b/my lake/raw/order/d=a%3Ab/part-0.parquet"
        );
        let root = Url::parse("file:///tmp/l/t/").expect("url");
        assert_eq!(absolute(&root, "x.parquet"), "file:///tmp/l/t/x.parquet");
    }
}
