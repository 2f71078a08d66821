//! Freshness targets on the event-driven path: a job whose target leaves room to wait (its
//! hold, from the config) does not run on a notice younger than the hold; the notice goes back
//! to the queue postponed until the job is due, and the run then takes every change at once.

use crate::notices::{fifo_queue, ingest, receive, sqs_event, sqs_record};
use anyhow::{Context, Result};
use lakestream_core::FixedClock;
use lakestream_formats::config::Freshness;
use lakestream_testkit::{Backend, TestLake};
use refine::{JobState, Refiner};
use std::sync::Arc;
use std::time::Duration;

const ORDERS: &[u8] = include_bytes!("../../../../events/msk-orders.json");
const MEMBERS: &[u8] = include_bytes!("../../../../events/msk-members.json");

fn states(r: &refine::RefineResponse) -> Vec<(String, &'static str)> {
    r.jobs
        .iter()
        .map(|j| {
            let s = match &j.state {
                JobState::NotDue => "not due",
                JobState::Holding { .. } => "holding",
                JobState::Ran { report, .. } if report.runs.is_empty() => "nothing",
                JobState::Ran { .. } => "ran",
                JobState::Deferred => "deferred",
                JobState::UpstreamFailed | JobState::Failed { .. } => "failed",
            };
            (j.job.clone(), s)
        })
        .collect()
}

/// The seed's topics at 15 minutes: `curated` and `gold` (on the 300 s window of raw/order)
/// hold 450 s; `processed` reads `curated/order`, whose changes may be 750 s late: no hold.
#[tokio::test]
async fn a_notice_younger_than_the_hold_is_postponed_until_the_job_is_due() -> Result<()> {
    let mut lake = TestLake::new(Backend::Fs, "refine-holding")?;
    for t in &mut lake.config.topics {
        t.freshness = Freshness::of(Duration::from_secs(900));
    }
    let mut notices = ingest(&lake, ORDERS).await?;
    notices.extend(ingest(&lake, MEMBERS).await?);
    let committed = notices.iter().map(|n| n.committed_ms).min().unwrap_or(0);
    let at = |secs: i64| {
        chrono::DateTime::from_timestamp_millis(committed + secs * 1000).unwrap_or_default()
    };
    let clock = Arc::new(FixedClock::new(at(10)));
    let refiner = Refiner::new(lake.config.clone(), clock.clone())?;
    let event = sqs_event(&notices);

    let early = refine::handle(&refiner, &event).await?.into_result()?;
    let s = states(&early);
    assert!(s.contains(&("curated".into(), "holding")), "{s:?}");
    assert!(s.contains(&("gold".into(), "holding")), "{s:?}");
    let curated_dir = lake
        .table_dir("curated/order")
        .context("a filesystem lake")?;
    let listing: Vec<_> = walk(&curated_dir);
    assert!(listing.is_empty(), "curated ran early: {listing:?}");
    // Every notice goes back, each visible again when its job is due (450 s after the
    // oldest commit; 10 s have passed).
    let mut back = early.batch_item_failures.clone().unwrap_or_default();
    back.sort();
    assert_eq!(back, ["m0", "m1", "m2"]);
    assert_eq!(early.postponed.len(), 3);
    for p in &early.postponed {
        assert_eq!(p.due_at_ms, committed + 450_000, "{p:?}");
        assert_eq!(p.visibility_seconds(committed + 10_000), 440);
    }

    // Redelivered when due: one run takes everything.
    clock.set(at(451));
    let due = refine::handle(&refiner, &event).await?.into_result()?;
    let s = states(&due);
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    assert!(s.contains(&("gold".into(), "ran")), "{s:?}");
    assert!(s.contains(&("processed".into(), "ran")), "{s:?}");
    assert_eq!(due.batch_item_failures, Some(vec![]));
    assert!(due.postponed.is_empty());
    assert_eq!(lake.read("curated/order").await?.num_rows(), 6);
    Ok(())
}

/// With the default target (60 s) nothing holds: the same notices run at once.
#[tokio::test]
async fn at_the_default_target_notices_run_at_once() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-no-hold")?;
    let notices = ingest(&lake, ORDERS).await?;
    let refiner = Refiner::new(lake.config.clone(), Arc::new(lakestream_core::SystemClock))?;
    let r = refine::handle(&refiner, &sqs_event(&notices))
        .await?
        .into_result()?;
    assert!(r.postponed.is_empty());
    assert!(
        states(&r).iter().all(|(_, s)| *s != "holding"),
        "{:?}",
        states(&r)
    );
    Ok(())
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// On the emulator's SQS FIFO queue (1 s visibility): the notices of a holding job, postponed
/// as the function's `main` does, stay invisible past the queue's own visibility timeout (they
/// would be back after 1 s), and come back when postponed to 1 s.
#[tokio::test]
async fn postponed_notices_stay_invisible_on_the_queue() -> Result<()> {
    use lakestream_lambda::postpone::{Postpone, Postponed, SqsPostponer, postpone_notices};
    let Some(endpoint) = lakestream_testkit::s3_endpoint() else {
        return Ok(());
    };
    let mut lake = TestLake::new(Backend::S3, "refine-postponed")?;
    for t in &mut lake.config.topics {
        t.freshness = Freshness::of(Duration::from_secs(900));
    }
    let (sqs, url) = fifo_queue(&endpoint, "held", Some("1")).await?;
    let notices = ingest(&lake, ORDERS).await?;
    let notifier = lakestream_lambda::notify::SqsNotifier::new(sqs.clone(), url.clone());
    let advanced: Vec<(String, u64)> = notices
        .iter()
        .map(|n| (n.table.clone(), n.version))
        .collect();
    let committed = notices.iter().map(|n| n.committed_ms).min().unwrap_or(0);
    lakestream_lambda::notify::notify_refine(&notifier, &lake.config, &advanced, committed).await;
    let records: Vec<serde_json::Value> = receive(&sqs, &url)
        .await?
        .into_iter()
        .map(sqs_record)
        .collect();
    // raw/order is read by curated and gold: two notices, both holding.
    assert_eq!(records.len(), 2);
    let refiner = Refiner::new(lake.config.clone(), Arc::new(lakestream_core::SystemClock))?;
    let r = refine::handle(&refiner, &serde_json::json!({ "Records": records }))
        .await?
        .into_result()?;
    assert_eq!(r.postponed.len(), 2, "{:?}", states(&r));
    let postponer = SqsPostponer::new(sqs.clone(), url.clone());
    postpone_notices(&postponer, &r.postponed).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        receive(&sqs, &url).await?.is_empty(),
        "a postponed notice came back early"
    );
    // Postponed to 1 s instead: back.
    let soon: Vec<Postponed> = r
        .postponed
        .iter()
        .map(|p| Postponed {
            due_at_ms: chrono::Utc::now().timestamp_millis() + 1000,
            ..p.clone()
        })
        .collect();
    postponer
        .postpone(&soon, chrono::Utc::now().timestamp_millis())
        .await
        .map_err(anyhow::Error::msg)?;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut back = Vec::new();
    for _ in 0..3 {
        back.extend(receive(&sqs, &url).await?);
    }
    assert_eq!(back.len(), 2);
    Ok(())
}

/// A job that would hold but has no notice of its own (it runs because a job it reads from ran
/// in this invocation) has nothing to postpone: it runs rather than wait for the safety net.
#[tokio::test]
async fn a_reader_without_a_notice_of_its_own_does_not_hold() -> Result<()> {
    let mut lake = TestLake::new(Backend::Fs, "refine-reader-no-hold")?;
    for j in &mut lake.config.refine {
        if j.job == "processed" {
            j.freshness = Some(Freshness::of(Duration::from_secs(900)));
        }
    }
    let processed = lake
        .config
        .refine_job("processed")
        .cloned()
        .context("processed")?;
    assert_eq!(lake.config.hold_of(&processed).as_secs(), 700);
    let mut notices = ingest(&lake, ORDERS).await?;
    notices.extend(ingest(&lake, MEMBERS).await?);
    let refiner = Refiner::new(lake.config.clone(), Arc::new(lakestream_core::SystemClock))?;
    // processed learns of curated's new version only from curated's run in this invocation
    // (a hint committed now: younger than its 700 s hold).
    let r = refine::handle(&refiner, &sqs_event(&notices))
        .await?
        .into_result()?;
    let s = states(&r);
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    assert!(s.contains(&("processed".into(), "ran")), "{s:?}");
    assert!(r.postponed.is_empty());
    Ok(())
}
