//! Symlink manifests as Athena/Hive read them (issue 24 defect 7): partition directories are
//! named the way Hive's `FileUtils.makePartName` names them (column lower-cased, column and
//! value escaped by `FileUtils.escapePathName`: `%XX` for 0x00-0x1F, 0x7F and
//! `"#%'*/:=?\{[]^`; everything else, non-ASCII included, kept; null or empty value ->
//! `__HIVE_DEFAULT_PARTITION__`), and each manifest lists exactly the data files of its
//! partition, as absolute paths a Hadoop `Path` opens (the object key, unescaped).
//!
//! The expected directory names below are written out by hand from Hive's rules, not computed
//! by the code under test; the files are checked by reading them back (their `id`s).

use anyhow::{Context, Result, bail};
use deltalake::arrow::array::AsArray;
use deltalake::arrow::datatypes::Int64Type;
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use futures::TryStreamExt;
use lakestream_core::Lake;
use lakestream_core::maintenance::manifest;
use lakestream_core::table::TableHandle;
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{Backend, EXAMPLE, TestLake, backends};
use std::collections::{BTreeMap, BTreeSet};

const EVENTS: &str = r#"
[[topics]]
topic = "events"
table = "raw/event"
partition_by = ["ts", "Tag"]
columns = [
  { name = "id", type = "int64", nullable = false },
  { name = "ts", type = "timestamp" },
  { name = "Tag", type = "string" },
]
"#;

/// (id, the record's JSON fields besides `id`).
const ROWS: &[(i64, &str)] = &[
    (1, r#""ts":"2026-01-02T03:04:05Z","Tag":"a/b=c""#),
    (2, r#""ts":"2026-01-02T03:04:05Z","Tag":"Straße ü 東京""#),
    (3, r#""ts":"2026-01-02T03:04:05Z","Tag":"""#),
    (4, r#""ts":"2026-01-02T03:04:05Z""#),
    (5, r#""Tag":"50% #1?*\"'[]^{}\\ x\ty\u007f..""#),
    (6, r#""ts":"2026-01-02T03:04:05Z","Tag":"a/b=c""#),
];

/// Hive's partition directory for each group of ids, written out from Hive's rules.
fn expected() -> BTreeMap<&'static str, BTreeSet<i64>> {
    BTreeMap::from([
        // `:` -> %3A, space kept; `/` -> %2F, `=` -> %3D; column name lower-cased.
        (
            "ts=2026-01-02 03%3A04%3A05.000000/tag=a%2Fb%3Dc",
            BTreeSet::from([1, 6]),
        ),
        // Non-ASCII and spaces are not escaped.
        (
            "ts=2026-01-02 03%3A04%3A05.000000/tag=Straße ü 東京",
            BTreeSet::from([2]),
        ),
        // Empty and null are one partition (Delta stores "" as null): Hive's default name.
        (
            "ts=2026-01-02 03%3A04%3A05.000000/tag=__HIVE_DEFAULT_PARTITION__",
            BTreeSet::from([3, 4]),
        ),
        // `%` -> %25, `#` %23, `?` %3F, `*` %2A, `"` %22, `'` %27, `[` %5B, `]` %5D, `^` %5E,
        // `{` %7B but `}` kept, `\` %5C, tab %09, DEL %7F, dots kept.
        (
            "ts=__HIVE_DEFAULT_PARTITION__/tag=50%25 %231%3F%2A%22%27%5B%5D%5E%7B}%5C x%09y%7F..",
            BTreeSet::from([5]),
        ),
    ])
}

fn event(offset: i64, fields: &str) -> SourceRecord {
    let json = format!(r#"{{"id":{offset},{fields}}}"#);
    SourceRecord::new("events", 0, offset, 1_764_400_000_000, json.as_bytes())
}

/// Every manifest under `_symlink_format_manifest/` as (partition dir, lines), found by
/// listing: on a filesystem lake by walking the directory (the names on disk), on S3 by a
/// LIST of the prefix (the object keys).
async fn manifests(lake: &TestLake, l: &Lake) -> Result<BTreeMap<String, Vec<String>>> {
    let mut out = BTreeMap::new();
    if lake.config.lake.root.starts_with("s3://") {
        let h = TableHandle::open_existing(l, "raw/event").await?;
        let store = h.object_store();
        let prefix = deltalake::Path::from("_symlink_format_manifest");
        let metas: Vec<_> = store.list(Some(&prefix)).try_collect().await?;
        for m in metas {
            let key = m.location.as_ref().to_string();
            let Some(dir) = key
                .strip_prefix("_symlink_format_manifest/")
                .and_then(|k| k.strip_suffix("/manifest"))
            else {
                continue;
            };
            let body = store.get(&m.location).await?.bytes().await?;
            out.insert(dir.to_string(), lines(&body));
        }
    } else {
        let root =
            std::path::Path::new(&lake.config.lake.root).join("raw/event/_symlink_format_manifest");
        for entry in lakestream_testkit::files_under(&root) {
            let rel = entry.strip_prefix(&root)?.to_string_lossy().into_owned();
            if let Some(dir) = rel.strip_suffix("/manifest") {
                out.insert(dir.to_string(), lines(&std::fs::read(&entry)?));
            }
        }
    }
    Ok(out)
}

fn lines(body: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(body)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The `id`s of the data file a manifest line names, read from the object the line names
/// literally (a Hadoop `Path` does not decode `%XX`).
async fn ids_of(lake: &TestLake, l: &Lake, line: &str) -> Result<Vec<i64>> {
    let bytes: bytes::Bytes = if let Some(rest) = line.strip_prefix("s3://") {
        let root = lake
            .config
            .lake
            .root
            .strip_prefix("s3://")
            .context("s3 root")?;
        let Some(key) = rest.strip_prefix(&format!("{root}/raw/event/")) else {
            bail!("{line} is not under the table {root}/raw/event/");
        };
        let h = TableHandle::open_existing(l, "raw/event").await?;
        let key = deltalake::Path::parse(key)?;
        h.object_store().get(&key).await?.bytes().await?
    } else {
        let Some(path) = line.strip_prefix("file://") else {
            bail!("{line}: not an absolute URI");
        };
        std::fs::read(path)
            .with_context(|| format!("manifest line {line}: no such file"))?
            .into()
    };
    let mut ids = Vec::new();
    for b in ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()? {
        let b = b?;
        let c = b.column_by_name("id").context("id")?;
        ids.extend(c.as_primitive::<Int64Type>().values().iter().copied());
    }
    Ok(ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_partitions_are_hive_escaped_and_list_their_files() -> Result<()> {
    for b in backends() {
        let mut lake = TestLake::new(b, "athena-manifest")?;
        lake.config.topics = PipelineConfig::from_toml(&format!("{EXAMPLE}\n{EVENTS}"))?.topics;
        let ing = lake.ingestor()?;
        // Two commits, so a partition has two files.
        let records: Vec<SourceRecord> = ROWS.iter().map(|(id, f)| event(*id, f)).collect();
        let r1 = ing.ingest(&records[..5]).await?;
        let r2 = ing.ingest(&records[5..]).await?;
        assert_eq!((r1.written, r2.written), (5, 1), "{b:?}: {r1:?} {r2:?}");
        let l = Lake::new(&lake.config.lake)?;
        // A manifest the previous (unescaped) layout wrote, and its state: replaced, not kept.
        let h = TableHandle::open_existing(&l, "raw/event").await?;
        let store = h.object_store();
        let legacy = "ts=2026-01-02 03:04:05.000000/Tag=a/b=c";
        store
            .put(
                &deltalake::Path::from(format!("_symlink_format_manifest/{legacy}/manifest")),
                b"old\n".to_vec().into(),
            )
            .await?;
        let state = format!(r#"{{"version":0,"partitions":{{"{legacy}":1}}}}"#);
        store
            .put(
                &deltalake::Path::from("_symlink_format_manifest/_lakestream_state.json"),
                state.into_bytes().into(),
            )
            .await?;
        let report = manifest(&l, "raw/event").await?;
        assert_eq!(
            report.removed, 1,
            "{b:?}: the old layout's manifest: {report:?}"
        );

        let found = manifests(&lake, &l).await?;
        let want = expected();
        assert_eq!(
            found.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{b:?}: manifest directories"
        );
        for (dir, ids) in &want {
            let mut got = BTreeSet::new();
            for line in &found[*dir] {
                let scheme = if b == Backend::S3 {
                    "s3://"
                } else {
                    "file:///"
                };
                assert!(line.starts_with(scheme), "{b:?}: {line}");
                for id in ids_of(&lake, &l, line).await? {
                    assert!(got.insert(id), "{b:?}: id {id} listed twice in {dir}");
                }
            }
            assert_eq!(&got, ids, "{b:?}: rows of the files listed in {dir}");
        }
        assert_eq!(
            found["ts=2026-01-02 03%3A04%3A05.000000/tag=a%2Fb%3Dc"].len(),
            2,
            "{b:?}: two commits, two files"
        );
        assert_eq!(report.written, 4, "{b:?}: {report:?}");

        // `ddl --manifest` declares the partitions in the directories' order, with their names.
        let ddl = lakestream_core::inspect::ddl(
            &l,
            "raw/event",
            lakestream_core::inspect::DdlForm::Manifest,
        )
        .await?;
        assert!(
            ddl.contains("PARTITIONED BY (`ts` timestamp, `tag` string)"),
            "{b:?}: {ddl}"
        );
        for dir in found.keys() {
            let keys: Vec<&str> = dir.split('/').filter_map(|s| s.split('=').next()).collect();
            assert_eq!(keys, ["ts", "tag"], "{b:?}: {dir}");
        }

        // Unchanged table: nothing rewritten; the state remembers the escaped names.
        let again = manifest(&l, "raw/event").await?;
        assert_eq!((again.written, again.unchanged), (0, 4), "{b:?}: {again:?}");
    }
    Ok(())
}
