//! Maintenance against a lagging refine job (issue 24 defect 6): the schedule's optimize, then
//! its vacuum and checkpoint a week and a day later (the default 168 h retention, an injected
//! clock), must leave every file the job has not read yet; the job then gets every row once.

use lakestream_core::{FixedClock, KafkaIngestor, Lake};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::lagging::{curated_order_ids, member, order, run_curated};
use lakestream_testkit::{Backend, TestLake};
use maintenance::{Request, run};
use std::sync::Arc;

async fn job(
    cfg: &PipelineConfig,
    lake: &Lake,
    input: serde_json::Value,
    clock: Arc<FixedClock>,
) -> anyhow::Result<()> {
    let req = Request::from_event(&input).map_err(anyhow::Error::msg)?;
    let results = run(cfg, lake, &req, clock, None).await;
    let failed: Vec<_> = results.iter().filter(|r| r.outcome.is_err()).collect();
    anyhow::ensure!(failed.is_empty(), "{input}: {failed:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_refine_job_reads_every_row_once_after_optimize_vacuum_and_checkpoint()
-> anyhow::Result<()> {
    let test_lake = TestLake::new(Backend::Fs, "lagging-refine-job")?;
    let cfg = test_lake.config.clone();
    let ingest_clock = Arc::new(FixedClock::new(chrono::Utc::now()));
    let ing = KafkaIngestor::new(cfg.clone(), ingest_clock.clone())?;
    let lake = Lake::new(&cfg.lake)?;
    ing.ingest(&[member()]).await?;
    for id in 0..3 {
        ing.ingest(&[order(id)]).await?;
    }
    assert_eq!(
        run_curated(&cfg, &lake).await?,
        3,
        "the job read orders 0..2"
    );
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
    let joined = run_curated(&cfg, &lake).await?;
    assert_eq!(joined, 6, "orders 3..8 joined by the catching-up run");
    assert_eq!(
        curated_order_ids(&lake).await?,
        (0..9).collect::<Vec<i64>>()
    );
    Ok(())
}
