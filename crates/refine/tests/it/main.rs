//! The refine handler on a filesystem lake fed by the sample MSK events: the schedule's input
//! (`events/refine-curated.json`) goes through `handle` as the Lambda gets it, the curated job
//! joins each order with its owner's membership, a repeated tick changes nothing, and a bad
//! input is refused with what to send.

mod holding;
mod lag;
mod notices;
mod requests;

use anyhow::{Context, Result};
use lakestream_core::{KafkaIngestor, SystemClock};
use lakestream_formats::kafka::KafkaEvent;
use lakestream_testkit::{Backend, TestLake, strings};
use refine::{Refiner, Request};
use std::sync::Arc;

const ORDERS: &[u8] = include_bytes!("../../../../events/msk-orders.json");
const MEMBERS: &[u8] = include_bytes!("../../../../events/msk-members.json");
const INPUT: &str = include_str!("../../../../events/refine-curated.json");

#[tokio::test]
async fn scheduled_ticks_join_once() -> Result<()> {
    let test_lake = TestLake::new(Backend::Fs, "refine-ticks")?;
    let config = test_lake.config.clone();
    let ingestor = KafkaIngestor::new(config.clone(), Arc::new(SystemClock))?;
    for ev in [ORDERS, MEMBERS] {
        msk_ingest::handle(&ingestor, KafkaEvent::from_json(ev)?).await?;
    }
    let refiner = Refiner::new(config, Arc::new(SystemClock))?;
    let event: serde_json::Value = serde_json::from_str(INPUT)?;
    let first = refine::handle(&refiner, &event).await?.into_result()?;
    assert!(
        first.metrics_line().contains("\"RowsJoined\":6"),
        "{}",
        first.metrics_line()
    );
    let report = first.jobs[0]
        .outcome()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(
        report.joined(),
        6,
        "each order joins its owner's membership"
    );
    let again = refine::handle(&refiner, &event).await?.into_result()?;
    let report = again.jobs[0]
        .outcome()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert!(report.runs.is_empty(), "a repeated tick must not run again");
    // Each order with the membership its owner held (events/msk-members.json), not only six
    // rows.
    let curated = test_lake.read("curated/order").await?;
    let ids = strings(&curated, "order_id")?;
    let owners = strings(&curated, "order_owner")?;
    let memberships = strings(&curated, "membership")?;
    let mut joined: Vec<(String, String, String)> = (0..curated.num_rows())
        .map(|i| {
            let text = |c: &[Option<String>]| c[i].clone().unwrap_or_else(|| "null".into());
            (text(&ids), text(&owners), text(&memberships))
        })
        .collect();
    joined.sort();
    let want = [
        ("1", "alice", "gold"),
        ("2", "bob", "silver"),
        ("3", "carol", "bronze"),
        ("4", "dave", "platinum"),
        ("5", "erin", "silver"),
        ("6", "frank", "gold"),
    ]
    .map(|(i, o, m)| (i.to_string(), o.to_string(), m.to_string()));
    assert_eq!(joined, want);
    Ok(())
}

#[test]
fn inputs() {
    let classic = serde_json::json!({"detail-type": "Scheduled Event", "source": "aws.events"});
    assert!(Request::from_event(&classic).is_ok_and(|r| r.jobs.is_empty() && r.max_runs == 20));
    let bad = serde_json::json!({"job": "curated"});
    assert!(Request::from_event(&bad).is_err_and(
        |e| e.error_type() == "Lakestream.BadInput" && e.to_string().contains("\"jobs\"")
    ));
}

/// A job name the config does not have is the caller's mistake, not a failed job: refused
/// before anything runs, naming the configured jobs.
#[tokio::test]
async fn unknown_job_is_bad_input() -> Result<()> {
    let test_lake = TestLake::new(Backend::Fs, "refine-unknown-job")?;
    let refiner = Refiner::new(test_lake.config.clone(), Arc::new(SystemClock))?;
    let event = serde_json::json!({"jobs": ["nope"]});
    let err = refine::handle(&refiner, &event)
        .await
        .err()
        .context("an unknown job must fail")?;
    assert_eq!(err.error_type(), "Lakestream.BadInput");
    assert!(err.to_string().contains("curated"), "{err}");
    Ok(())
}

/// A job that fails stops only the jobs reading its output: with `raw/order` re-created after
/// the curated job consumed it, `curated` fails (a human must act: `Lakestream.SourceError`
/// with the `--skip-to` to run) and `processed`, which reads `curated/order`, is skipped.
#[tokio::test]
async fn a_failed_job_skips_its_dependants() -> Result<()> {
    let test_lake = TestLake::new(Backend::Fs, "refine-dependants")?;
    let config = test_lake.config.clone();
    let raw_order = test_lake
        .table_dir("raw/order")
        .context("a filesystem lake")?;
    let ingest = || -> Result<KafkaIngestor> {
        Ok(KafkaIngestor::new(config.clone(), Arc::new(SystemClock))?)
    };
    for ev in [ORDERS, MEMBERS] {
        msk_ingest::handle(&ingest()?, KafkaEvent::from_json(ev)?).await?;
    }
    let refiner = Refiner::new(config.clone(), Arc::new(SystemClock))?;
    refine::handle(&refiner, &serde_json::json!({}))
        .await?
        .into_result()?;
    std::fs::remove_dir_all(raw_order)?;
    msk_ingest::handle(&ingest()?, KafkaEvent::from_json(ORDERS)?).await?;
    let response = refine::handle(&refiner, &serde_json::json!({})).await?;
    let outcomes: Vec<(&str, bool)> = response
        .jobs
        .iter()
        .map(|j| (j.job.as_str(), j.outcome().is_ok()))
        .collect();
    // The gold job reads the re-created raw/order too: it fails for the same reason.
    assert_eq!(
        outcomes,
        [("curated", false), ("processed", false), ("gold", false)]
    );
    assert!(
        response.jobs[1]
            .outcome()
            .is_err_and(|e| e.starts_with("skipped")),
        "{:?}",
        response.jobs[1].outcome()
    );
    let err = response
        .into_result()
        .err()
        .context("a failed job fails the invocation")?;
    assert_eq!(err.error_type(), "Lakestream.SourceError", "{err}");
    assert!(err.to_string().starts_with("curated: "), "{err}");
    Ok(())
}
