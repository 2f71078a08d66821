//! The maintenance handler: schedule inputs, every table when none is named (access-log tables
//! discovered by listing), one result per table.

mod refine_readers;

use anyhow::Context;
use lakestream_core::access_log::{AccessLogIngestor, LocalObjects};
use lakestream_core::{FixedClock, KafkaIngestor, Lake};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::notification::LogObject;
use lakestream_testkit::EXAMPLE;
use lakestream_testkit::records::{ORDER_TIME, Order};
use maintenance::{Job, JobSpec, Maintainer, Request, run};
use std::sync::Arc;

mod every_table;

const OPTIMIZE_EVENT: &str = include_str!("../../../../events/maintenance-optimize.json");
const LOGS: &[u8] =
    include_bytes!("../../../../tests/fixtures/access-logs/2026-11-29-08-00-00-A1B2C3D4E5F6.log");

/// A filesystem lake (in a temp dir) with six one-record commits to `raw/order`: six small
/// files.
async fn lake_with_six_small_files()
-> anyhow::Result<(tempfile::TempDir, PipelineConfig, Arc<FixedClock>)> {
    let dir = tempfile::tempdir()?;
    let mut cfg = PipelineConfig::from_toml(EXAMPLE)?;
    cfg.lake.root = dir.path().join("lake").to_string_lossy().into_owned();
    let clock = Arc::new(FixedClock::new(
        chrono::DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default(),
    ));
    let ing = KafkaIngestor::new(cfg.clone(), clock.clone())?;
    for off in 0..6 {
        let order = Order {
            id: 1,
            owner: "a",
            value: off,
            timestamp: &format!("\"{ORDER_TIME}\""),
        };
        ing.ingest(&[order.record(0, off, 1)]).await?;
    }
    Ok((dir, cfg, clock))
}

#[test]
fn schedule_inputs() {
    let r = Request::from_event(&serde_json::json!({"job": "optimize", "tables": ["raw/order"]}));
    assert!(
        r.is_ok_and(|r| r.job == Job::Optimize && r.tables == Some(vec!["raw/order".to_string()]))
    );
    let classic =
        serde_json::json!({"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}});
    assert!(Request::from_event(&classic).is_err_and(|e| e.to_string().contains("Input")));
    assert!(
        Request::from_event(&serde_json::json!({"job": "defrag"}))
            .is_err_and(|e| e.error_type() == "Lakestream.BadInput"
                && e.to_string().contains("optimize|vacuum"))
    );
}

/// An option of one job in another job's input is refused, naming the option and the job; the
/// sample events and the template's schedule inputs are accepted.
#[test]
fn an_option_of_another_job_is_refused_naming_it() -> anyhow::Result<()> {
    for (input, option) in [
        (
            serde_json::json!({"job": "vacuum", "min_files": 2}),
            "min_files",
        ),
        (
            serde_json::json!({"job": "checkpoint", "max_mib": 64}),
            "max_mib",
        ),
        (
            serde_json::json!({"job": "manifest", "changed_within_hours": 48}),
            "changed_within_hours",
        ),
    ] {
        let job = input["job"].as_str().unwrap_or_default().to_string();
        let err = Request::from_event(&input).err().context("refused")?;
        assert_eq!(err.error_type(), "Lakestream.BadInput");
        let msg = err.to_string();
        assert!(msg.contains(option) && msg.contains(&job), "{msg}");
    }
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml"))?;
    let mut inputs: Vec<String> = template
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Input: "))
        .filter(|i| i.contains("\"job\":") && !i.contains("drain"))
        .map(|i| {
            i.trim_start_matches("!Sub ")
                .trim_matches('\'')
                .replace("${OptimizeMaxMiB}", "256")
        })
        .collect();
    assert_eq!(inputs.len(), 4, "{inputs:?}");
    for name in ["optimize", "vacuum-dry-run", "checkpoint", "manifest"] {
        let path = format!(
            "{}/../../events/maintenance-{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        inputs.push(std::fs::read_to_string(path)?);
    }
    for input in inputs {
        let v: serde_json::Value = serde_json::from_str(&input)?;
        Request::from_event(&v).map_err(|e| anyhow::anyhow!("{input}: {e}"))?;
    }
    let r = Request::from_event(
        &serde_json::json!({"job": "optimize", "min_files": 2, "max_mib": 8, "dry_run": true}),
    )
    .map_err(anyhow::Error::msg)?;
    let JobSpec::Optimize(o) = &r.job else {
        anyhow::bail!("not optimize: {r:?}");
    };
    assert_eq!(
        (o.min_files, o.max_mib, o.changed_within_hours, r.dry_run),
        (Some(2), Some(8), None, true)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_when_none_is_named() -> anyhow::Result<()> {
    let (dir, cfg, clock) = lake_with_six_small_files().await?;
    std::fs::create_dir_all(dir.path().join("objs/raw-logs"))?;
    std::fs::write(dir.path().join("objs/raw-logs/a.log"), LOGS)?;
    let logs = AccessLogIngestor::new(cfg.clone(), clock.clone())?;
    let obj = LogObject {
        bucket: "raw-logs".into(),
        key: "a.log".into(),
        alt_key: None,
        etag: None,
        event_time: None,
    };
    logs.ingest(&[obj], &LocalObjects(dir.path().join("objs")))
        .await?;

    let lake = Lake::new(&cfg.lake)?;
    let tables = maintenance::all_tables(&cfg, &lake).await?;
    assert_eq!(
        tables,
        [
            "access_logs/datalake-prod",
            "curated/order",
            "dead_letters",
            "gold/order_hourly",
            "processed/order",
            "raw/member",
            "raw/order"
        ]
    );
    let req =
        Request::from_event(&serde_json::json!({"job": "optimize"})).map_err(anyhow::Error::msg)?;
    let results = run(&cfg, &lake, &req, clock.clone(), None).await;
    let order = results
        .iter()
        .find(|r| r.table == "raw/order")
        .map(|r| r.outcome.clone());
    let report = order.and_then(|o| o.ok()).unwrap_or_default();
    assert_eq!(
        (
            report["files_before"].as_u64(),
            report["files_after"].as_u64()
        ),
        (Some(6), Some(1))
    );
    let member = results
        .iter()
        .find(|r| r.table == "raw/member")
        .and_then(|r| r.outcome.clone().ok());
    assert_eq!(
        member.map(|m| m["skipped"].clone()),
        Some(serde_json::json!("table does not exist yet"))
    );
    let req = Request::from_event(&serde_json::json!({"job": "manifest", "tables": ["raw/order", "access_logs/datalake-prod"]}))
        .map_err(anyhow::Error::msg)?;
    let results = run(&cfg, &lake, &req, clock, None).await;
    assert!(
        results
            .iter()
            .all(|r| r.outcome.as_ref().is_ok_and(|v| v["written"] == 1)),
        "{results:?}"
    );
    Ok(())
}

/// The handler as the Lambda runs it, on the sample schedule input
/// (`events/maintenance-optimize.json`: optimize `raw/order` with `min_files` 2): one result,
/// one EMF line naming the table, and a failing table turns into `Lakestream.MaintenanceFailed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_with_the_sample_input() -> anyhow::Result<()> {
    let (_dir, cfg, clock) = lake_with_six_small_files().await?;
    let maintainer = Maintainer::new(cfg, clock)?;
    let event: serde_json::Value = serde_json::from_str(OPTIMIZE_EVENT)?;
    let response = maintenance::handle(&maintainer, &event)
        .await?
        .into_result()?;
    let json = serde_json::to_value(&response)?;
    assert_eq!(json[0]["table"], "raw/order", "{json}");
    assert_eq!(json[0]["outcome"]["Ok"]["files_after"], 1, "{json}");
    // Per table a log line (values as properties, no custom metric); per job one EMF line
    // summing them (issue 38: the custom metrics do not grow with the tables).
    let lines: Vec<serde_json::Value> = response
        .metrics_line()
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (table, job) = (&lines[0], &lines[1]);
    assert_eq!(
        (&table["Table"], &table["FilesBefore"], &table["FilesAfter"]),
        (
            &serde_json::json!("raw/order"),
            &serde_json::json!(6.0),
            &serde_json::json!(1.0)
        )
    );
    assert!(table.get("_aws").is_none(), "a per-table metric: {table}");
    let dims = &job["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0];
    assert_eq!(dims, &serde_json::json!(["Function", "Job"]), "{job}");
    assert_eq!(
        (&job["FilesBefore"], &job["Tables"], job.get("Table")),
        (&serde_json::json!(6.0), &serde_json::json!(1.0), None)
    );
    // A table name that is not a table fails that table's job, and so the invocation.
    let bad = serde_json::json!({"job": "checkpoint", "tables": ["../outside"]});
    let err = maintenance::handle(&maintainer, &bad)
        .await?
        .into_result()
        .err()
        .context("a failed table must fail the invocation")?;
    assert_eq!(err.error_type(), "Lakestream.MaintenanceFailed");
    assert!(err.to_string().starts_with("../outside: "), "{err}");
    Ok(())
}

/// `{"dry_run": true}` on every job of the function leaves the table's files and version as
/// they were (it was ignored by checkpoint and manifest, and compaction wrote).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_of_every_job_writes_nothing() -> anyhow::Result<()> {
    let (dir, cfg, clock) = lake_with_six_small_files().await?;
    let lake = Lake::new(&cfg.lake)?;
    let table_dir = dir.path().join("lake/raw/order");
    let before = lakestream_testkit::files_under(&table_dir);
    for job in ["optimize", "vacuum", "checkpoint", "manifest"] {
        let req = Request::from_event(
            &serde_json::json!({"job": job, "tables": ["raw/order"], "dry_run": true}),
        )
        .map_err(anyhow::Error::msg)?;
        let results = run(&cfg, &lake, &req, clock.clone(), None).await;
        assert!(
            results.iter().all(|r| r.outcome.is_ok()),
            "{job}: {results:?}"
        );
        assert_eq!(
            lakestream_testkit::files_under(&table_dir),
            before,
            "{job} with dry_run wrote: {results:?}"
        );
    }
    Ok(())
}
