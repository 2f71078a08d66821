//! The schedule maintains every table the pipeline writes (issue 24, defect 5): refine outputs
//! (the join's `curated/order` gains a file a run; the upsert's outputs keep rewritten files),
//! the CDC job's tombstone table, and the `single`-layout access-log table, next to the topic
//! tables. Compacting a refine output that a downstream job reads changes nothing downstream
//! (the source reader skips `dataChange=false` commits).

use lakestream_core::access_log::{AccessLogIngestor, LocalObjects};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{JobReport, RunContext, in_dependency_order, run_job};
use lakestream_core::{FixedClock, KafkaIngestor, Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::notification::LogObject;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::records::{self, Order};
use lakestream_testkit::{EXAMPLE, cdc_config};
use maintenance::{JobResult, Request, run};
use std::sync::Arc;

const LOGS: &[u8] =
    include_bytes!("../../../../tests/fixtures/access-logs/2026-11-29-08-00-00-A1B2C3D4E5F6.log");

/// The tables the schedule must reach besides the topic tables.
const DERIVED: [&str; 6] = [
    "_lakestream/sensors/tombstones",
    "access_logs",
    "curated/order",
    "gold/order_hourly",
    "processed/order",
    "silver/cdc",
];

struct Pipeline {
    dir: tempfile::TempDir,
    cfg: PipelineConfig,
    lake: Lake,
    clock: Arc<FixedClock>,
}

impl Pipeline {
    async fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let text = EXAMPLE.replace("layout = \"per_bucket\"", "layout = \"single\"");
        anyhow::ensure!(text != EXAMPLE, "example config layout changed");
        let mut cfg = PipelineConfig::from_toml(&format!("{text}\n{}", cdc_config("sensors")))?;
        cfg.lake.root = dir.path().join("lake").to_string_lossy().into_owned();
        // Checkpoints every 2 commits: the CDC apply consolidates its tombstones from silver's
        // commits into the tombstone table at each (small files, for the compaction below).
        cfg.commit.checkpoint_interval = 2;
        // 2026-01-01T12:00:00Z: the rows below are an hour or two old.
        let clock = Arc::new(FixedClock::new(
            chrono::DateTime::from_timestamp(1_767_268_800, 0).unwrap_or_default(),
        ));
        let lake = Lake::new(&cfg.lake)?;
        Ok(Self {
            dir,
            cfg,
            lake,
            clock,
        })
    }

    /// Round `k`: a membership, an order an hour inside it, a CDC insert of key `k` and a
    /// delete of key `k - 1` (a tombstone), an access-log object; then every refine job.
    async fn round(&self, k: i64) -> anyhow::Result<Vec<JobReport>> {
        let ing = KafkaIngestor::new(self.cfg.clone(), self.clock.clone())?;
        let t = |m: i64| format!("2026-01-01T10:{:02}:00Z", m);
        let order = Order {
            id: k,
            owner: "a",
            value: k,
            timestamp: &format!("\"{}\"", t(5 * k + 1)),
        };
        let mut cdc = vec![format!(
            r#"{{"id":{k},"v":"v{k}","ts":"{}","op":"I"}}"#,
            t(5 * k)
        )];
        if k > 0 {
            cdc.push(format!(
                r#"{{"id":{},"v":"","ts":"{}","op":"D"}}"#,
                k - 1,
                t(5 * k + 1)
            ));
        }
        let mut records = vec![
            records::member(0, k, "a", &format!("m{k}"), &t(5 * k), 1),
            order.record(0, k, 1),
        ];
        for (i, c) in cdc.iter().enumerate() {
            records.push(SourceRecord::new(
                "cdc",
                0,
                2 * k + i as i64,
                1,
                c.as_bytes(),
            ));
        }
        let report = ing.ingest(&records).await?;
        anyhow::ensure!(report.dead_lettered == 0, "{report:?}");

        let objs = self.dir.path().join("objs/raw-logs");
        std::fs::create_dir_all(&objs)?;
        std::fs::write(objs.join(format!("{k}.log")), LOGS)?;
        let logs = AccessLogIngestor::new(self.cfg.clone(), self.clock.clone())?;
        let obj = LogObject {
            bucket: "raw-logs".into(),
            key: format!("{k}.log"),
            alt_key: None,
            etag: None,
            event_time: None,
        };
        logs.ingest(&[obj], &LocalObjects(self.dir.path().join("objs")))
            .await?;
        self.refine().await
    }

    async fn refine(&self) -> anyhow::Result<Vec<JobReport>> {
        let settings = CommitSettings::from(&self.cfg.commit);
        let ctx = RunContext::new(
            &self.cfg,
            &self.lake,
            &settings,
            lakestream_core::Clock::now(self.clock.as_ref()),
        );
        let mut out = Vec::new();
        for job in in_dependency_order(&self.cfg.refine, &[])? {
            out.push(run_job(&ctx, job, 1000).await?);
        }
        Ok(out)
    }

    async fn job(&self, input: serde_json::Value) -> anyhow::Result<Vec<JobResult>> {
        let req = Request::from_event(&input).map_err(anyhow::Error::msg)?;
        Ok(run(&self.cfg, &self.lake, &req, self.clock.clone(), None).await)
    }

    /// Every row of `table` as sorted JSON text.
    async fn rows(&self, table: &str) -> anyhow::Result<Vec<String>> {
        let batch = read::read_table(&self.lake, table, None).await?;
        let mut buf = Vec::new();
        let mut w = arrow_json::LineDelimitedWriter::new(&mut buf);
        w.write(&batch)?;
        w.finish()?;
        let mut rows: Vec<String> = String::from_utf8(buf)?.lines().map(String::from).collect();
        rows.sort();
        Ok(rows)
    }
}

/// The report of `table` in `results`, which must have succeeded.
fn report_of(results: &[JobResult], table: &str) -> anyhow::Result<serde_json::Value> {
    let r = results.iter().find(|r| r.table == table).ok_or_else(|| {
        let seen: Vec<&str> = results.iter().map(|r| r.table.as_str()).collect();
        anyhow::anyhow!("`{table}` was not maintained; the job ran on {seen:?}")
    })?;
    r.outcome
        .clone()
        .map_err(|e| anyhow::anyhow!("{table}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_compacts_and_checkpoints_refine_outputs_tombstones_and_single_access_logs()
-> anyhow::Result<()> {
    let p = Pipeline::new().await?;
    for k in 0..4 {
        p.round(k).await?;
    }
    let mut before = Vec::new();
    for t in DERIVED {
        before.push(p.rows(t).await?);
    }

    let results = p
        .job(serde_json::json!({"job": "optimize", "min_files": 2}))
        .await?;
    for t in DERIVED {
        let r = report_of(&results, t)?;
        if t == "silver/cdc" {
            // Each run deletes the key the previous one inserted: one file, nothing to compact.
            assert_eq!(r["files_before"], 1, "{r}");
            continue;
        }
        if t == "gold/order_hourly" {
            // Each gold run rewrites the day partitions it touches whole: one file per partition.
            assert_eq!(r["files_before"], r["files_after"], "{r}");
            continue;
        }
        let (b, a) = (r["files_before"].as_u64(), r["files_after"].as_u64());
        assert!(
            matches!((b, a), (Some(b), Some(a)) if a < b),
            "{t} not compacted: {r}"
        );
    }
    for (t, rows) in DERIVED.iter().zip(&before) {
        assert_eq!(&p.rows(t).await?, rows, "{t} changed by compaction");
    }

    // The downstream upsert reads the compacted join output: the compaction's files are not
    // new rows (the source reader skips `dataChange=false` commits), only what the join added.
    let reports = p.round(4).await?;
    let joined = reports
        .iter()
        .find(|r| r.job == "curated")
        .map(JobReport::joined);
    let read_by_processed = reports
        .iter()
        .find(|r| r.job == "processed")
        .and_then(|r| r.totals().first().map(|s| s.rows));
    assert!(joined.is_some_and(|j| j > 0), "{reports:?}");
    assert_eq!(read_by_processed, joined, "{reports:?}");
    let processed = p.rows("processed/order").await?;
    assert_eq!(processed.len(), 5, "{processed:?}");
    let results = p
        .job(serde_json::json!({"job": "optimize", "min_files": 2}))
        .await?;
    report_of(&results, "processed/order")?;

    let results = p.job(serde_json::json!({"job": "checkpoint"})).await?;
    for t in DERIVED {
        report_of(&results, t)?;
        let last = p
            .dir
            .path()
            .join("lake")
            .join(t)
            .join("_delta_log/_last_checkpoint");
        assert!(last.is_file(), "{t} has no checkpoint");
    }
    for job in ["manifest", "vacuum"] {
        let results = p.job(serde_json::json!({"job": job})).await?;
        for t in DERIVED {
            report_of(&results, t)?;
        }
        if job == "manifest" {
            for t in DERIVED {
                let m = p
                    .dir
                    .path()
                    .join("lake")
                    .join(t)
                    .join("_symlink_format_manifest");
                assert!(m.is_dir(), "{t} has no manifest");
            }
        }
    }
    let mut all = maintenance::all_tables(&p.cfg, &p.lake).await?;
    all.retain(|t| !t.starts_with("raw/") && t != "dead_letters");
    assert_eq!(all, DERIVED);
    Ok(())
}

/// On a lake nothing has written yet, the list is the configured tables (no access-log
/// directory to list yet) and every job skips them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_lake_lists_the_configured_tables() -> anyhow::Result<()> {
    let p = Pipeline::new().await?;
    let mut cfg = p.cfg.clone();
    cfg.access_logs.layout = lakestream_formats::config::AccessLogLayout::PerBucket;
    let tables = maintenance::all_tables(&cfg, &p.lake).await?;
    assert_eq!(
        tables,
        [
            "_lakestream/sensors/tombstones",
            "curated/order",
            "dead_letters",
            "gold/order_hourly",
            "processed/order",
            "raw/cdc",
            "raw/member",
            "raw/order",
            "silver/cdc"
        ]
    );
    let req =
        Request::from_event(&serde_json::json!({"job": "optimize"})).map_err(anyhow::Error::msg)?;
    let results = run(&cfg, &p.lake, &req, p.clock.clone(), None).await;
    assert_eq!(results.len(), tables.len());
    for r in &results {
        let v = r.outcome.clone().map_err(anyhow::Error::msg)?;
        assert_eq!(v["skipped"], "table does not exist yet", "{}", r.table);
    }
    Ok(())
}
