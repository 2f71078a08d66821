//! A job's lag (`LagSeconds`, `BehindTarget`, the freshness alarm) starts at the commit time of
//! the oldest source version the run *read*: a notice delivered again after its change was
//! applied (at-least-once delivery, a new process, or after what the process saw expired) is
//! not a lag.

use crate::notices::{ingest, sqs_event};
use anyhow::Result;
use lakestream_core::FixedClock;
use lakestream_lambda::notify::RefineNotice;
use lakestream_testkit::{Backend, TestLake};
use refine::Refiner;
use std::sync::Arc;

const ORDERS: &[u8] = include_bytes!("../../../../events/msk-orders.json");
const MEMBERS: &[u8] = include_bytes!("../../../../events/msk-members.json");

fn at(ms: i64, secs: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_millis(ms + secs * 1000).unwrap_or_default()
}

/// The sample event's records at later offsets (`by` x 1,000): new records to the ingest.
fn later_offsets(event: &[u8], by: u64) -> Result<Vec<u8>> {
    let mut v: serde_json::Value = serde_json::from_slice(event)?;
    for records in v["records"]
        .as_object_mut()
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        for r in records.as_array_mut().into_iter().flatten() {
            let offset = r["offset"].as_u64().unwrap_or(0);
            r["offset"] = (offset + by * 1000).into();
        }
    }
    Ok(serde_json::to_vec(&v)?)
}

/// The sample orders and memberships ingested: their notices and the oldest commit time.
async fn seed(lake: &TestLake) -> Result<(Vec<RefineNotice>, i64)> {
    let mut notices = ingest(lake, ORDERS).await?;
    notices.extend(ingest(lake, MEMBERS).await?);
    let committed = notices.iter().map(|n| n.committed_ms).min().unwrap_or(0);
    Ok((notices, committed))
}

fn lags(r: &refine::RefineResponse) -> Vec<(String, Option<f64>, bool)> {
    r.jobs
        .iter()
        .map(|j| (j.job.clone(), j.lag_seconds(), j.behind_target()))
        .collect()
}

/// The notices are applied 5 s after their commit; 20 minutes later a new process gets them
/// again. Its run finds nothing new: no lag, not behind (it said 1,200 s, behind, before).
#[tokio::test]
async fn a_notice_delivered_again_after_it_was_applied_is_no_lag() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-lag-redelivered")?;
    let (notices, committed) = seed(&lake).await?;
    let event = sqs_event(&notices);

    let first = Refiner::new(
        lake.config.clone(),
        Arc::new(FixedClock::new(at(committed, 5))),
    )?;
    let r = refine::handle(&first, &event).await?.into_result()?;
    let curated = lags(&r).into_iter().find(|(j, ..)| j == "curated");
    assert!(
        matches!(curated, Some((_, Some(l), false)) if (4.0..=6.0).contains(&l)),
        "{:?}",
        lags(&r)
    );

    let later = Refiner::new(
        lake.config.clone(),
        Arc::new(FixedClock::new(at(committed, 1200))),
    )?;
    let again = refine::handle(&later, &event).await?.into_result()?;
    for (job, lag, behind) in lags(&again) {
        assert!(
            lag.is_none() && !behind,
            "{job}: lag {lag:?}, behind {behind}"
        );
    }
    Ok(())
}

/// Old notices (already applied) and a new one in the same batch, to the process that applied
/// them and to a new one: the lag is the new change's, not the old notices'.
#[tokio::test]
async fn the_lag_is_the_oldest_change_the_run_read() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-lag-mixed")?;
    let (old, committed) = seed(&lake).await?;
    let clock = Arc::new(FixedClock::new(at(committed, 5)));
    let process = Refiner::new(lake.config.clone(), clock.clone())?;
    refine::handle(&process, &sqs_event(&old))
        .await?
        .into_result()?;

    for (round, refiner) in [
        (1_u64, process),
        (2, Refiner::new(lake.config.clone(), clock.clone())?),
    ] {
        // New orders, said to be committed 10 s before the run, delivered with the old notices.
        let run_at = 1200 * i64::try_from(round)?;
        let mut batch = old.clone();
        for mut n in ingest(&lake, &later_offsets(ORDERS, round)?).await? {
            n.committed_ms = committed + (run_at - 10) * 1000;
            batch.push(n);
        }
        clock.set(at(committed, run_at));
        let r = refine::handle(&refiner, &sqs_event(&batch))
            .await?
            .into_result()?;
        // curated (a join) and gold (an aggregate) read raw/order.
        for job in ["curated", "gold"] {
            let lag = lags(&r).into_iter().find(|(j, ..)| j == job);
            assert!(
                matches!(lag, Some((_, Some(l), false)) if (9.0..=11.0).contains(&l)),
                "round {round}, {job}: {:?}",
                lags(&r)
            );
        }
    }
    Ok(())
}
