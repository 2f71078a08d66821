//! The function's `handle` as the Lambda runs it, without the runtime: the sample SQS event
//! (`events/sqs-s3-notifications.json`) over a directory standing in for the raw-logs bucket,
//! and the sample scheduled event (`events/scheduled-drain.json`) with and without a queue.

use crate::drain_reserve::FakeQueue;
use crate::{EB_LINE, GZIP, PLAIN};
use anyhow::Context;
use lakestream_core::FixedClock;
use lakestream_core::access_log::LocalObjects;
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::EXAMPLE;
use s3_log_ingest::handler::{LogIngest, LogResponse, handle};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SCHEDULED: &str = include_str!("../../../../events/scheduled-drain.json");

/// A filesystem lake and the three log objects the sample event names, under
/// `objects/raw-logs/`.
fn deps(
    dir: &std::path::Path,
    queue: Option<FakeQueue>,
) -> anyhow::Result<LogIngest<LocalObjects, FakeQueue>> {
    let logs = dir.join("objects/raw-logs/logs");
    std::fs::create_dir_all(&logs)?;
    std::fs::write(logs.join("2026-11-29-08-00-00-A1B2C3D4E5F6"), PLAIN)?;
    std::fs::write(logs.join("2026-11-29-09-00-00-F6E5D4C3B2A1.gz"), GZIP)?;
    std::fs::write(logs.join("2026-11-29-10-00-00-0A1B2C3D4E5F"), EB_LINE)?;
    let mut cfg = PipelineConfig::from_toml(EXAMPLE)?;
    cfg.lake.root = dir.join("lake").to_string_lossy().into_owned();
    let clock =
        FixedClock::new(chrono::DateTime::from_timestamp(1_795_939_200, 0).unwrap_or_default());
    Ok(LogIngest::new(
        cfg,
        Arc::new(clock),
        LocalObjects(dir.join("objects")),
        queue,
    )?)
}

fn forever() -> Duration {
    Duration::from_secs(900)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_sqs_event_is_acknowledged_whole() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let deps = deps(dir.path(), None)?;
    let event: serde_json::Value = serde_json::from_str(crate::SQS_EVENT)?;
    let response = handle(&deps, event, forever).await?;
    // What Lambda gets is the partial batch response alone: the deleted object is dead-lettered
    // and acknowledged like the others, so nothing is retried.
    assert_eq!(
        serde_json::to_value(&response)?,
        serde_json::json!({"batchItemFailures": []})
    );
    let LogResponse::Sqs(sqs) = &response else {
        anyhow::bail!("an SQS event must be answered as one: {response:?}");
    };
    assert_eq!((sqs.report.acknowledged, sqs.report.test_events), (5, 1));
    let metrics: serde_json::Value = serde_json::from_str(&response.metrics_line())?;
    assert_eq!(metrics["Function"], "s3-log-ingest");
    assert_eq!(metrics["MessagesAcknowledged"], 5.0);
    assert_eq!(
        metrics["RowsWritten"],
        sqs.report.objects.rows_written as f64
    );
    assert!(sqs.report.objects.rows_written > 0, "{:?}", sqs.report);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_event_drains_the_queue() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let queue = FakeQueue {
        left: Mutex::new(3),
        elapsed: Arc::new(Mutex::new(Duration::ZERO)),
    };
    let deps = deps(dir.path(), Some(queue))?;
    let event: serde_json::Value = serde_json::from_str(SCHEDULED)?;
    let response = handle(&deps, event, forever).await?;
    let json = serde_json::to_value(&response)?;
    assert_eq!(
        (&json["received"], &json["deleted"], &json["queue_empty"]),
        (
            &serde_json::json!(3),
            &serde_json::json!(3),
            &serde_json::json!(true)
        ),
        "{json}"
    );
    let metrics: serde_json::Value = serde_json::from_str(&response.metrics_line())?;
    assert_eq!(metrics["DrainDeleted"], 3.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_event_without_a_queue_is_a_config_error() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let deps = deps(dir.path(), None)?;
    let event: serde_json::Value = serde_json::from_str(SCHEDULED)?;
    let err = handle(&deps, event, forever)
        .await
        .err()
        .context("a drain without LAKESTREAM_QUEUE_URL must fail")?;
    assert_eq!(err.error_type(), "Lakestream.Config");
    assert!(err.to_string().contains("LAKESTREAM_QUEUE_URL"), "{err}");
    Ok(())
}

#[test]
fn no_bucket_to_read_from_fails_at_start() -> anyhow::Result<()> {
    let mut cfg = PipelineConfig::from_toml(EXAMPLE)?;
    cfg.access_logs.source_buckets.clear();
    let clock = Arc::new(FixedClock::new(chrono::Utc::now()));
    let err = LogIngest::<LocalObjects, FakeQueue>::new(cfg, clock, LocalObjects(".".into()), None)
        .err()
        .context("no source bucket must fail the start")?;
    assert!(err.to_string().contains("LAKESTREAM_LOG_BUCKETS"), "{err}");
    Ok(())
}

/// Issue 26: the sample DMS event (`events/sqs-s3-dms.json`): a full load, a CDC file and a
/// plain JSON-lines file of two families, notified through the access-log queue, land in
/// their bronze tables; nothing is retried, a redelivery adds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_dms_event_lands_in_bronze() -> anyhow::Result<()> {
    const DMS_EVENT: &str = include_str!("../../../../events/sqs-s3-dms.json");
    let dir = tempfile::tempdir()?;
    let landing = dir.path().join("objects/landing");
    for (key, body) in [
        (
            "dms/dbo/items/LOAD00000001.csv",
            &include_bytes!("../../../../tests/fixtures/dms/LOAD00000001.csv")[..],
        ),
        (
            "dms/dbo/items/20261129-113401000.csv",
            &include_bytes!("../../../../tests/fixtures/dms/20261129-113401000.csv")[..],
        ),
        (
            "files/shop/orders/orders.jsonl",
            &include_bytes!("../../../../tests/fixtures/dms/orders.jsonl")[..],
        ),
    ] {
        let path = landing.join(key);
        std::fs::create_dir_all(path.parent().context("parent")?)?;
        std::fs::write(path, body)?;
    }
    let mut cfg = PipelineConfig::from_toml(&format!(
        "{EXAMPLE}\n{}",
        r#"
[[cdc]]
family = "erp"
source = "dms"
location = "s3://landing/dms/"
timestamp_column = "ts"
columns = { "dbo.items" = ["ts timestamp", "id int64", "name string", "amount decimal(10,2)", "active boolean"] }

[[cdc]]
family = "shop"
source = "files"
location = "s3://landing/files/"
"#
    ))?;
    cfg.lake.root = dir.path().join("lake").to_string_lossy().into_owned();
    let lake = lakestream_core::Lake::new(&cfg.lake)?;
    let clock =
        FixedClock::new(chrono::DateTime::from_timestamp(1_795_939_200, 0).unwrap_or_default());
    let deps: LogIngest<LocalObjects, FakeQueue> = LogIngest::new(
        cfg,
        Arc::new(clock),
        LocalObjects(dir.path().join("objects")),
        None,
    )?;
    for round in 0..2 {
        let event: serde_json::Value = serde_json::from_str(DMS_EVENT)?;
        let response = handle(&deps, event, forever).await?;
        assert_eq!(
            serde_json::to_value(&response)?,
            serde_json::json!({"batchItemFailures": []})
        );
        let LogResponse::Sqs(sqs) = &response else {
            anyhow::bail!("{response:?}");
        };
        let expected = if round == 0 { 3 + 4 + 2 } else { 0 };
        assert_eq!(
            sqs.report.objects.rows_written, expected,
            "{:?}",
            sqs.report
        );
    }
    let items = lakestream_core::read::read_table(&lake, "bronze/erp/dbo/items", None).await?;
    assert_eq!(items.num_rows(), 7);
    let orders = lakestream_core::read::read_table(&lake, "bronze/shop/shop/orders", None).await?;
    assert_eq!(orders.num_rows(), 2);
    Ok(())
}
