//! Tables with deletion vectors (issue 23, defect 6). Spark and Databricks delete rows by
//! attaching a deletion vector to a data file instead of rewriting it; Lakestream reads data
//! files as plain Parquet, so every path that reads them (compaction, the upsert's target
//! rewrite, the refine sources, redrive's lookup, `read`) would bring the deleted rows back.
//! Each of them must refuse such a table with a permanent error that says why and what to do,
//! and write nothing.
//!
//! The deletion vector is written into the log by hand, as Spark writes it: a protocol upgrade
//! to reader 3 / writer 7 with the `deletionVectors` feature, and the file removed and added
//! again with a `deletionVector` descriptor (one row deleted).

use anyhow::{Context, Result, bail};
use deltalake::logstore::CommitOrBytes;
use futures::TryStreamExt;
use lakestream_core::commit::CommitSettings;
use lakestream_core::maintenance::{CompactOptions, compact};
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::table::TableHandle;
use lakestream_core::{FixedClock, Lake, Redrive, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{EXAMPLE, TestLake, backends};
use std::sync::Arc;

const CDC: &str = r#"
[[topics]]
topic = "cdc"
table = "raw/cdc"
columns = [
  { name = "id", type = "int64", nullable = false },
  { name = "v", type = "string" },
  { name = "ts", type = "timestamp", nullable = false },
]

[[refine]]
job = "latest"
output = "silver/cdc"
[refine.upsert]
source = "raw/cdc"
key = ["id"]
order_by = ["ts"]

[[refine]]
job = "latest2"
output = "silver/cdc2"
[refine.upsert]
source = "raw/cdc"
key = ["id"]
order_by = ["ts"]
"#;

fn config(lake: &TestLake) -> Result<PipelineConfig> {
    let mut cfg = PipelineConfig::from_toml(&format!("{EXAMPLE}\n{CDC}"))?;
    cfg.lake = lake.config.lake.clone();
    cfg.commit = lake.config.commit.clone();
    Ok(cfg)
}

fn order(off: i64) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":{off},"order_owner":"o1","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#
    );
    SourceRecord::new("orders", 0, off, 1_649_067_330_000, json.as_bytes())
}

fn cdc(off: i64, id: i64) -> SourceRecord {
    let json = format!(r#"{{"id":{id},"v":"v{off}","ts":"2026-01-01T10:00:{off:02}Z"}}"#);
    SourceRecord::new("cdc", 0, off, 0, json.as_bytes())
}

/// Give the first live file of `table` a deletion vector, as a Spark DELETE does.
async fn add_deletion_vector(lake: &Lake, table: &str) -> Result<()> {
    let h = TableHandle::open_existing(lake, table).await?;
    let snapshot = h.snapshot()?;
    let file = snapshot.log_data().iter().next().context("a live file")?;
    let remove = serde_json::to_value(file.remove_action(true))?;
    #[allow(deprecated)] // the one way to get the add action of a live file
    let mut add = serde_json::to_value(file.add_action())?;
    add["deletionVector"] = serde_json::json!({
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 1
    });
    let lines = [
        serde_json::json!({"commitInfo": {"timestamp": 1_764_400_000_000i64, "operation": "DELETE",
            "operationParameters": {"predicate": "[\"(order_id = 1)\"]"}, "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}}),
        serde_json::json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}}),
        serde_json::json!({ "remove": remove }),
        serde_json::json!({ "add": add }),
    ];
    let entry = lines.map(|l| l.to_string()).join("\n");
    let version = h.version().context("version")? + 1;
    h.log_store()
        .write_commit_entry(
            version,
            CommitOrBytes::LogBytes(entry.into_bytes().into()),
            uuid::Uuid::new_v4(),
        )
        .await?;
    Ok(())
}

/// Every object of the tables a test touches (log and data), to show a refused operation
/// wrote nothing.
async fn objects(lake: &Lake) -> Result<Vec<String>> {
    let mut all = Vec::new();
    for table in TABLES {
        let h = TableHandle::open(lake, table)?;
        let store = h.object_store();
        let found: Vec<String> = store
            .list(None)
            .map_ok(|m| format!("{table}/{}", m.location))
            .try_collect()
            .await?;
        all.extend(found);
    }
    all.sort();
    Ok(all)
}

const TABLES: [&str; 7] = [
    "raw/order",
    "raw/member",
    "raw/cdc",
    "silver/cdc",
    "silver/cdc2",
    "curated/order",
    "dead_letters",
];

/// The error must be a permanent refusal naming the table, the reason and the way out.
fn refused<T: std::fmt::Debug>(
    what: &str,
    table: &str,
    r: lakestream_core::Result<T>,
) -> Result<()> {
    match r {
        Err(e) => {
            let msg = e.to_string();
            assert!(!e.is_retryable(), "{what}: retryable: {msg}");
            for needle in [table, "deletion vectors", "REORG TABLE", "APPLY (PURGE)"] {
                assert!(msg.contains(needle), "{what}: `{needle}` not in: {msg}");
            }
            Ok(())
        }
        Ok(v) => bail!("{what}: expected a deletion-vector refusal for {table}, got {v:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_read_and_redrive_refuse_a_table_with_deletion_vectors() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "dv-raw")?;
        let l = Lake::new(&lake.config.lake)?;
        let ing = lake.ingestor()?;
        for off in 0..4 {
            ing.ingest(&[order(off)]).await?;
        }
        add_deletion_vector(&l, "raw/order").await?;
        let before = objects(&l).await?;

        let opts = CompactOptions {
            min_small_files: 2,
            ..Default::default()
        };
        refused(
            "compaction",
            "raw/order",
            compact(&l, "raw/order", &opts, chrono::Utc::now(), &|_, _| {}).await,
        )?;
        refused(
            "read",
            "raw/order",
            read::read_table(&l, "raw/order", None).await,
        )?;
        let batch: Vec<SourceRecord> = (0..6).map(order).collect();
        refused(
            "redrive",
            "raw/order",
            ing.redrive(Redrive {
                records: &batch,
                id: "req-dv",
                allow_duplicates: false,
            })
            .await,
        )?;
        assert_eq!(objects(&l).await?, before, "{b:?}: nothing written");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refine_sources_and_the_upsert_target_refuse_deletion_vectors() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "dv-refine")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let settings = CommitSettings::from(&cfg.commit);
        let clock =
            FixedClock::new(chrono::DateTime::from_timestamp(1_764_400_000, 0).context("ts")?);
        let ing = lakestream_core::KafkaIngestor::new(cfg.clone(), Arc::new(clock))?;
        let run = |name: String| {
            let (cfg, l, settings) = (&cfg, &l, &settings);
            async move {
                let job = cfg.refine_job(&name).context("job")?;
                let ctx = RunContext::new(cfg, l, settings, chrono::Utc::now());
                anyhow::Ok(run_job(&ctx, job, 10).await)
            }
        };

        // The upsert's target: built from clean data, then given a deletion vector.
        for off in 0..3 {
            ing.ingest(&[cdc(off, off)]).await?;
        }
        run("latest".into()).await??;
        add_deletion_vector(&l, "silver/cdc").await?;
        ing.ingest(&[cdc(3, 1)]).await?; // an update of key 1: its file must be rewritten
        let before = objects(&l).await?;
        refused("upsert target", "silver/cdc", run("latest".into()).await?)?;
        assert_eq!(objects(&l).await?, before, "{b:?}: upsert wrote nothing");

        // The upsert's source (a second job, whose output does not exist yet).
        add_deletion_vector(&l, "raw/cdc").await?;
        let before = objects(&l).await?;
        refused("upsert source", "raw/cdc", run("latest2".into()).await?)?;
        assert_eq!(objects(&l).await?, before, "{b:?}: upsert wrote nothing");

        // The join's sources.
        let member = SourceRecord::new(
            "members",
            0,
            0,
            1_649_067_330_000,
            br#"{"order_owner":"o1","membership":"gold","timestamp":"2022-04-04T10:00:00Z"}"#,
        );
        ing.ingest(&[order(0), order(1), member]).await?;
        add_deletion_vector(&l, "raw/order").await?;
        let before = objects(&l).await?;
        refused("join source", "raw/order", run("curated".into()).await?)?;
        assert_eq!(objects(&l).await?, before, "{b:?}: the join wrote nothing");
    }
    Ok(())
}
