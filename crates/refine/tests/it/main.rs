//! The refine handler on a filesystem lake fed by the sample MSK events: the schedule's input
//! is parsed, the curated job joins each order with its owner's membership, a repeated tick
//! changes nothing, and a bad input is refused with what to send.

use anyhow::{Context, Result};
use lakestream_core::{KafkaIngestor, Lake, SystemClock, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::kafka::KafkaEvent;
use refine::{Request, run};
use std::sync::Arc;

const EXAMPLE: &str = include_str!("../../../../lakestream.toml");
const ORDERS: &[u8] = include_bytes!("../../../../events/msk-orders.json");
const MEMBERS: &[u8] = include_bytes!("../../../../events/msk-members.json");
const INPUT: &str = include_str!("../../../../events/refine-curated.json");

#[tokio::test]
async fn scheduled_ticks_join_once() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut config = PipelineConfig::from_toml(EXAMPLE)?;
    config.lake.root = dir.path().to_string_lossy().into_owned();
    let ingestor = KafkaIngestor::new(config.clone(), Arc::new(SystemClock))?;
    for ev in [ORDERS, MEMBERS] {
        msk_ingest::handle(&ingestor, KafkaEvent::from_json(ev)?).await?;
    }
    let lake = Lake::new(&config.lake)?;
    let req = Request::from_event(&serde_json::from_str(INPUT)?).map_err(anyhow::Error::msg)?;
    let first = run(&config, &lake, &req, &SystemClock).await?;
    let report = first[0]
        .outcome
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(
        report.joined(),
        6,
        "each order joins its owner's membership"
    );
    let again = run(&config, &lake, &req, &SystemClock).await?;
    let report = again[0]
        .outcome
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert!(report.runs.is_empty(), "a repeated tick must not run again");
    let curated = read::read_table(&lake, "curated/order", None).await?;
    assert_eq!(curated.num_rows(), 6);
    let memberships = read::read_table(&lake, "curated/order", None)
        .await?
        .column_by_name("membership")
        .context("membership column")?
        .len();
    assert_eq!(memberships, 6);
    Ok(())
}

#[test]
fn inputs() {
    let classic = serde_json::json!({"detail-type": "Scheduled Event", "source": "aws.events"});
    assert!(Request::from_event(&classic).is_ok_and(|r| r.jobs.is_empty() && r.max_runs == 20));
    let bad = serde_json::json!({"job": "curated"});
    assert!(Request::from_event(&bad).is_err_and(|e| e.contains("\"jobs\"")));
}
