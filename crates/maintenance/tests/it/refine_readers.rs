//! Maintenance against a lagging refine job (issue 24 defect 6): the schedule's optimize, then
//! its vacuum and checkpoint a week and a day later (the default 168 h retention, an injected
//! clock), must leave every file the job has not read yet; the job then gets every row once.

use anyhow::Context;
use deltalake::arrow::array::AsArray;
use deltalake::arrow::datatypes::DataType;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::{FixedClock, KafkaIngestor, Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use maintenance::{Request, run};
use std::sync::Arc;

const CONFIG: &str = include_str!("../../../../lakestream.toml");

fn order(id: i64) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":{id},"order_owner":"alice","order_value":{id},"timestamp":"2026-01-01T12:{id:02}:00Z"}}"#
    );
    SourceRecord::new("orders", 0, id, 0, json.as_bytes())
}

fn member() -> SourceRecord {
    let json = r#"{"order_owner":"alice","membership":"gold","timestamp":"2026-01-01T12:00:00Z"}"#;
    SourceRecord::new("members", 0, 0, 0, json.as_bytes())
}

/// Run the curated job until nothing is new; rows joined.
async fn curated(cfg: &PipelineConfig, lake: &Lake) -> anyhow::Result<usize> {
    let settings = (&cfg.commit).into();
    let ctx = RunContext::new(cfg, lake, &settings, chrono::Utc::now());
    let job = cfg.refine_job("curated").context("curated job")?;
    Ok(run_job(&ctx, job, 1000).await?.joined())
}

/// The output's order ids, sorted.
async fn output_ids(lake: &Lake) -> anyhow::Result<Vec<i64>> {
    let batch = read::read_table(lake, "curated/order", None).await?;
    let col = batch.column_by_name("order_id").context("order_id")?;
    let col = deltalake::arrow::compute::cast(col, &DataType::Int64)?;
    let mut ids: Vec<i64> = col
        .as_primitive::<deltalake::arrow::datatypes::Int64Type>()
        .iter()
        .flatten()
        .collect();
    ids.sort();
    Ok(ids)
}

async fn job(
    cfg: &PipelineConfig,
    lake: &Lake,
    input: serde_json::Value,
    clock: Arc<FixedClock>,
) -> anyhow::Result<()> {
    let req = Request::from_event(&input).map_err(anyhow::Error::msg)?;
    let results = run(cfg, lake, &req, clock).await;
    let failed: Vec<_> = results.iter().filter(|r| r.outcome.is_err()).collect();
    anyhow::ensure!(failed.is_empty(), "{input}: {failed:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_refine_job_reads_every_row_once_after_optimize_vacuum_and_checkpoint()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut cfg = PipelineConfig::from_toml(CONFIG)?;
    cfg.lake.root = dir.path().join("lake").to_string_lossy().into_owned();
    let ingest_clock = Arc::new(FixedClock::new(chrono::Utc::now()));
    let ing = KafkaIngestor::new(cfg.clone(), ingest_clock.clone())?;
    let lake = Lake::new(&cfg.lake)?;
    ing.ingest(&[member()]).await?;
    for id in 0..3 {
        ing.ingest(&[order(id)]).await?;
    }
    assert_eq!(curated(&cfg, &lake).await?, 3, "the job read orders 0..2");
    // The job stops (it lags); six more order versions arrive, one small file each.
    for id in 3..9 {
        ing.ingest(&[order(id)]).await?;
    }
    // The schedule: optimize now (the nine small files become one), vacuum and checkpoint a
    // week and a day later, with the default retention.
    job(
        &cfg,
        &lake,
        serde_json::json!({"job": "optimize", "min_files": 2}),
        ingest_clock,
    )
    .await?;
    let later = Arc::new(FixedClock::new(
        chrono::Utc::now() + chrono::Duration::days(8),
    ));
    job(
        &cfg,
        &lake,
        serde_json::json!({"job": "vacuum"}),
        later.clone(),
    )
    .await?;
    job(&cfg, &lake, serde_json::json!({"job": "checkpoint"}), later).await?;
    // The job catches up: every order joined exactly once.
    let joined = curated(&cfg, &lake).await?;
    assert_eq!(joined, 6, "orders 3..8 joined by the catching-up run");
    assert_eq!(output_ids(&lake).await?, (0..9).collect::<Vec<i64>>());
    Ok(())
}
