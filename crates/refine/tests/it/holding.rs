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
const NEW_FIELD: &[u8] = include_bytes!("../../../../events/msk-new-field.json");

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
    let at = |secs: i64| after(committed, secs);
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
    // (The process is new to the jobs: it counts from the first commit file's time, which is
    // a few milliseconds before the notice's.)
    for p in &early.postponed {
        let early_by = committed + 450_000 - p.due_at_ms;
        assert!((0..10_000).contains(&early_by), "{p:?}");
        assert!((430..=440).contains(&p.visibility_seconds(committed + 10_000)));
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

/// The safety net's tick in a process that has not seen the job (a new instance, or the job
/// last ran on another one) holds a young change too: it reads what the output consumed and
/// when the first version after that was committed, instead of running at once because it
/// does not know.
#[tokio::test]
async fn a_tick_in_a_process_new_to_the_job_holds_a_young_change() -> Result<()> {
    let (lake, _, committed) = seeded(Backend::Fs, "refine-holding-tick").await?;
    let at = |secs: i64| after(committed, secs);
    let clock = Arc::new(FixedClock::new(at(10)));
    let refiner = Refiner::new(lake.config.clone(), clock.clone())?;
    let tick = refine::Request::from_event(&serde_json::json!({}))?;

    let early = refine::run(&refiner, &tick).await?;
    let s = states(&early);
    assert!(s.contains(&("curated".into(), "holding")), "{s:?}");
    assert!(s.contains(&("gold".into(), "holding")), "{s:?}");
    let curated_dir = lake
        .table_dir("curated/order")
        .context("a filesystem lake")?;
    assert!(walk(&curated_dir).is_empty(), "curated ran early");
    // Nothing to postpone on a tick: the next one brings the job back.
    assert!(early.postponed.is_empty());

    clock.set(at(451));
    let due = refine::run(&refiner, &tick).await?;
    let s = states(&due);
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    assert_eq!(lake.read("curated/order").await?.num_rows(), 6);
    Ok(())
}

/// A notice delivered again after its change was applied, to a process that has not seen the
/// job, is not a reason to run a younger change early: the job holds on the oldest version the
/// output has not consumed (here committed 600 s after the first), not on the notice's.
#[tokio::test]
async fn an_old_notice_in_a_process_new_to_the_job_holds_on_the_unconsumed_change() -> Result<()> {
    let (lake, notices, committed) = seeded(Backend::Fs, "refine-holding-old-notice").await?;
    let at = |secs: i64| after(committed, secs);
    let event = sqs_event(&notices);
    let first = Refiner::new(lake.config.clone(), Arc::new(FixedClock::new(at(451))))?;
    let s = states(&refine::handle(&first, &event).await?.into_result()?);
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    let applied = lake.version("curated/order").await?;

    // raw/member version 1, committed (its file's time says) 600 s after the first commits.
    let newer = ingest(&lake, NEW_FIELD).await?;
    assert!(
        newer
            .iter()
            .any(|n| n.table == "raw/member" && n.version == 1),
        "{newer:?}"
    );
    commit_file_time(&lake, "raw/member", 1, committed + 600_000)?;

    // Another instance gets the first notices again at 700 s: curated is due at 1,050 s.
    let clock = Arc::new(FixedClock::new(at(700)));
    let second = Refiner::new(lake.config.clone(), clock.clone())?;
    let again = refine::handle(&second, &event).await?.into_result()?;
    let s = states(&again);
    assert!(s.contains(&("curated".into(), "holding")), "{s:?}");
    assert_eq!(
        lake.version("curated/order").await?,
        applied,
        "curated ran early"
    );
    let due_at: Vec<i64> = again
        .jobs
        .iter()
        .filter_map(|j| match j.state {
            JobState::Holding { due_at_ms, .. } if j.job == "curated" => Some(due_at_ms),
            _ => None,
        })
        .collect();
    assert_eq!(due_at, [committed + 1_050_000]);

    // It now knows what the output consumed: the first notices, back when due, find nothing
    // new; the new version's own notice runs the job.
    clock.set(at(1051));
    let back = refine::handle(&second, &event).await?.into_result()?;
    let s = states(&back);
    assert!(s.contains(&("curated".into(), "not due")), "{s:?}");
    let due = refine::handle(&second, &sqs_event(&newer))
        .await?
        .into_result()?;
    let s = states(&due);
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    assert!(lake.version("curated/order").await? > applied);
    Ok(())
}

/// A notice naming a later version while the first unseen one's notice is missing (lost, or
/// behind it on the queue) does not hold the job on the later version's time: the first one
/// is older. Here raw/member version 1 (committed at 600 s, due at 1,050 s) has no notice and
/// version 2's (committed at 900 s) arrives at 1,100 s: the job runs. (Seen in `make
/// bench-fresh` at 15 minutes: the emulator's FIFO queue delivered a job's second postponed
/// notice without its first, and the apply waited for the safety net's tick.)
#[tokio::test]
async fn a_notice_after_a_missing_one_does_not_hold_on_its_own_time() -> Result<()> {
    let (lake, notices, committed) = seeded(Backend::Fs, "refine-holding-gap").await?;
    let at = |secs: i64| after(committed, secs);
    let clock = Arc::new(FixedClock::new(at(451)));
    let refiner = Refiner::new(lake.config.clone(), clock.clone())?;
    let s = states(
        &refine::handle(&refiner, &sqs_event(&notices))
            .await?
            .into_result()?,
    );
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    let applied = lake.version("curated/order").await?;

    // raw/member version 1, its notice lost.
    ingest(&lake, NEW_FIELD).await?;
    commit_file_time(&lake, "raw/member", 1, committed + 600_000)?;
    // Version 2: the same records at other offsets.
    let mut event: serde_json::Value = serde_json::from_slice(NEW_FIELD)?;
    for records in event["records"]
        .as_object_mut()
        .context("records")?
        .values_mut()
    {
        for r in records.as_array_mut().context("a partition's records")? {
            let offset = r["offset"].as_i64().context("an offset")?;
            r["offset"] = serde_json::json!(offset + 1000);
        }
    }
    let mut second = ingest(&lake, &serde_json::to_vec(&event)?).await?;
    second.retain(|n| n.job == "curated" && n.table == "raw/member");
    assert_eq!(second.iter().map(|n| n.version).collect::<Vec<_>>(), [2]);
    commit_file_time(&lake, "raw/member", 2, committed + 900_000)?;
    for n in &mut second {
        n.committed_ms = committed + 900_000;
    }

    clock.set(at(1100));
    let s = states(
        &refine::handle(&refiner, &sqs_event(&second))
            .await?
            .into_result()?,
    );
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    assert!(lake.version("curated/order").await? > applied);
    Ok(())
}

/// Ticks in a process that saw the job before another instance applied (what it saw lags: the
/// "next" version it probes was applied long ago) and in one that never saw it: a young
/// version of a source holds in both.
#[tokio::test]
async fn ticks_hold_a_young_version_after_another_instance_applied() -> Result<()> {
    let (lake, notices, committed) = seeded(Backend::Fs, "refine-holding-ticks").await?;
    let at = |secs: i64| after(committed, secs);
    let tick = refine::Request::from_event(&serde_json::json!({}))?;
    // The second instance's first tick comes before any output exists: it holds.
    let clock = Arc::new(FixedClock::new(at(10)));
    let second = Refiner::new(lake.config.clone(), clock.clone())?;
    let s = states(&refine::run(&second, &tick).await?);
    assert!(s.contains(&("curated".into(), "holding")), "{s:?}");

    let first = Refiner::new(lake.config.clone(), Arc::new(FixedClock::new(at(451))))?;
    let s = states(
        &refine::handle(&first, &sqs_event(&notices))
            .await?
            .into_result()?,
    );
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    let applied = lake.version("curated/order").await?;

    // What the second instance saw (nothing applied) now lags what the first applied: its
    // tick's probe finds version 0 of both sources, committed long ago.
    // raw/member version 1, committed (its file's time says) 500 s after the first commits.
    ingest(&lake, NEW_FIELD).await?;
    commit_file_time(&lake, "raw/member", 1, committed + 500_000)?;

    clock.set(at(600));
    let s = states(&refine::run(&second, &tick).await?);
    assert!(s.contains(&("curated".into(), "holding")), "second: {s:?}");
    let third = Refiner::new(lake.config.clone(), Arc::new(FixedClock::new(at(600))))?;
    let s = states(&refine::run(&third, &tick).await?);
    assert!(s.contains(&("curated".into(), "holding")), "third: {s:?}");
    assert_eq!(
        lake.version("curated/order").await?,
        applied,
        "curated ran early"
    );

    clock.set(at(951));
    let s = states(&refine::run(&second, &tick).await?);
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    Ok(())
}

/// On the emulator (whose commit times are whole seconds): a tick in an instance new to the
/// job, after another instance applied, holds a version committed since.
#[tokio::test]
async fn on_s3_a_tick_in_a_new_instance_holds_a_young_version() -> Result<()> {
    if lakestream_testkit::s3_endpoint().is_none() {
        return Ok(());
    }
    let (lake, notices, committed) = seeded(Backend::S3, "refine-holding-s3-tick").await?;
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    // The second instance ticks before any output exists (it holds), then the first applies.
    let tick = refine::Request::from_event(&serde_json::json!({}))?;
    let clock = Arc::new(FixedClock::new(at(committed + 10_000)));
    let second = Refiner::new(lake.config.clone(), clock.clone())?;
    let s = states(&refine::run(&second, &tick).await?);
    assert!(s.contains(&("curated".into(), "holding")), "{s:?}");
    let first = Refiner::new(
        lake.config.clone(),
        Arc::new(FixedClock::new(at(committed + 451_000))),
    )?;
    let s = states(
        &refine::handle(&first, &sqs_event(&notices))
            .await?
            .into_result()?,
    );
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
    let applied = lake.version("curated/order").await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let newer = ingest(&lake, NEW_FIELD).await?;
    let new_at = newer.iter().map(|n| n.committed_ms).min().unwrap_or(0);
    // Due 450 s after raw/member version 1 (its time cut to the second): not yet at +448 s.
    clock.set(at(new_at + 448_000));
    let s = states(&refine::run(&second, &tick).await?);
    assert!(s.contains(&("curated".into(), "holding")), "{s:?}");
    assert_eq!(
        lake.version("curated/order").await?,
        applied,
        "curated ran early"
    );
    Ok(())
}

/// A source re-created since the output was built (a new table id) is not held on: the job
/// runs and its run fails saying so, as before holds read the output's `txn`s (whose versions
/// belong to the old table).
#[tokio::test]
async fn a_recreated_source_is_not_held_on() -> Result<()> {
    let (lake, notices, committed) = seeded(Backend::Fs, "refine-holding-recreated").await?;
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    let first = Refiner::new(
        lake.config.clone(),
        Arc::new(FixedClock::new(at(committed + 451_000))),
    )?;
    let s = states(
        &refine::handle(&first, &sqs_event(&notices))
            .await?
            .into_result()?,
    );
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");

    std::fs::remove_dir_all(lake.table_dir("raw/member").context("a filesystem lake")?)?;
    let recreated = ingest(&lake, MEMBERS).await?;
    let now = recreated.iter().map(|n| n.committed_ms).min().unwrap_or(0);
    let second = Refiner::new(
        lake.config.clone(),
        Arc::new(FixedClock::new(at(now + 10_000))),
    )?;
    let r = refine::handle(&second, &sqs_event(&recreated)).await?;
    let curated = r
        .jobs
        .iter()
        .find(|j| j.job == "curated")
        .map(|j| match &j.state {
            JobState::Failed { error, .. } => error.clone(),
            other => format!("{other:?}"),
        })
        .unwrap_or_default();
    assert!(curated.contains("re-created"), "{curated}");
    Ok(())
}

/// A lake with every topic at a 15-minute target, the sample orders and members ingested: the
/// notices their commits send, and the earliest commit time among them.
async fn seeded(
    backend: Backend,
    name: &str,
) -> Result<(TestLake, Vec<lakestream_lambda::notify::RefineNotice>, i64)> {
    let lake = fifteen_minutes(TestLake::new(backend, name)?);
    let mut notices = ingest(&lake, ORDERS).await?;
    notices.extend(ingest(&lake, MEMBERS).await?);
    let committed = notices.iter().map(|n| n.committed_ms).min().unwrap_or(0);
    Ok((lake, notices, committed))
}

/// `secs` seconds after `committed_ms`.
fn after(committed_ms: i64, secs: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_millis(committed_ms + secs * 1000).unwrap_or_default()
}

/// Back-date (or forward-date) `table`'s commit file of `version` on a filesystem lake to
/// `at_ms`: the commit time a HEAD then reads.
fn commit_file_time(lake: &TestLake, table: &str, version: u64, at_ms: i64) -> Result<()> {
    let commit = lake
        .table_dir(table)
        .context("a filesystem lake")?
        .join(format!("_delta_log/{version:020}.json"));
    let at = std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(at_ms)?);
    std::fs::File::options()
        .write(true)
        .open(&commit)?
        .set_modified(at)?;
    Ok(())
}

/// `lake` with every topic at a 15-minute target.
fn fifteen_minutes(mut lake: TestLake) -> TestLake {
    for t in &mut lake.config.topics {
        t.freshness = Freshness::of(Duration::from_secs(900));
    }
    lake
}

/// A one-off run to the end (`lakestream refine`: `settings.holds` off) does not hold: nothing
/// would bring a held job back.
#[tokio::test]
async fn a_one_off_run_does_not_hold() -> Result<()> {
    let (lake, _, committed) = seeded(Backend::Fs, "refine-holding-one-off").await?;
    let at = chrono::DateTime::from_timestamp_millis(committed + 10_000).unwrap_or_default();
    let mut refiner = Refiner::new(lake.config.clone(), Arc::new(FixedClock::new(at)))?;
    refiner.settings.holds = false;
    let tick = refine::Request::from_event(&serde_json::json!({}))?;
    let s = states(&refine::run(&refiner, &tick).await?);
    assert!(s.contains(&("curated".into(), "ran")), "{s:?}");
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
