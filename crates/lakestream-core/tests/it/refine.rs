//! The curated job (interval join of raw orders with raw memberships): the output equals a
//! brute-force join of the generated records, whatever the batching of ingestion and refine
//! runs — after each batch, once at the end, in small chunks, replayed, two runs at once, a run
//! killed after writing its files, a compaction of the sources in between; the interval
//! bounds; late rows on each side.

use super::faults::Faults;
use anyhow::{Context, Result};
use lakestream_core::commit::CommitSettings;
use lakestream_core::maintenance::{CompactOptions, compact};
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::seed::SeedGenerator;
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{TestLake, backends, strings};
use std::sync::Arc;
use std::sync::atomic::Ordering;

type Row = Vec<Option<String>>;

const COLUMNS: [&str; 10] = [
    "order_id",
    "order_owner",
    "order_value",
    "timestamp",
    "membership",
    "membership_timestamp",
    "year",
    "month",
    "day",
    "hour",
];

/// The output as a sorted multiset of rows (every column as text).
async fn curated(lake: &Lake) -> Result<Vec<Row>> {
    let batch = read::read_table(lake, "curated/order", None).await?;
    let cols: Vec<Vec<Option<String>>> = COLUMNS
        .iter()
        .map(|c| strings(&batch, c))
        .collect::<lakestream_testkit::Result<_>>()?;
    let mut rows: Vec<Row> = (0..batch.num_rows())
        .map(|i| cols.iter().map(|c| c[i].clone()).collect())
        .collect();
    rows.sort();
    Ok(rows)
}

/// `(order_id, owner, value, timestamp ms)` of an order.
type Order = (i64, String, i64, i64);
/// `(owner, membership, timestamp ms)` of a membership change.
type Member = (String, String, i64);

/// The orders and memberships of generated records.
fn parse(records: &[SourceRecord]) -> (Vec<Order>, Vec<Member>) {
    let (mut orders, mut members) = (vec![], vec![]);
    for r in records {
        let lakestream_formats::record::RecordValue::Bytes(b) = &r.value else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(b) else {
            continue;
        };
        let ts = v["timestamp"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_millis())
            .unwrap_or_default();
        let owner = v["order_owner"].as_str().unwrap_or_default().to_string();
        if r.topic == "orders" {
            let id = v["order_id"].as_i64().unwrap_or_default();
            orders.push((id, owner, v["order_value"].as_i64().unwrap_or_default(), ts));
        } else {
            members.push((
                owner,
                v["membership"].as_str().unwrap_or_default().to_string(),
                ts,
            ));
        }
    }
    (orders, members)
}

/// Brute force: every (order, membership) of one owner with m.ts <= o.ts <= m.ts + 1 h, as
/// `(order_id, owner, value, o.ts, membership, m.ts)` sorted.
fn brute_force(records: &[SourceRecord]) -> Vec<(i64, String, i64, i64, String, i64)> {
    let (orders, members) = parse(records);
    let mut out = Vec::new();
    for o in &orders {
        for m in &members {
            if o.1 == m.0 && m.2 <= o.3 && o.3 <= m.2 + 3_600_000 {
                out.push((o.0, o.1.clone(), o.2, o.3, m.1.clone(), m.2));
            }
        }
    }
    out.sort();
    out
}

fn summary(rows: &[Row]) -> Vec<(i64, String, i64, i64, String, i64)> {
    let ms = |s: &Option<String>| {
        s.as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_millis())
            .unwrap_or(-1)
    };
    let num = |s: &Option<String>| s.as_deref().and_then(|v| v.parse().ok()).unwrap_or(-1);
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    let mut out: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                num(&r[0]),
                text(&r[1]),
                num(&r[2]),
                ms(&r[3]),
                text(&r[4]),
                ms(&r[5]),
            )
        })
        .collect();
    out.sort();
    out
}

fn settings(lake: &TestLake) -> CommitSettings {
    (&lake.config.commit).into()
}

async fn refine(config: &PipelineConfig, l: &Lake, settings: &CommitSettings) -> Result<usize> {
    let job = config.refine_job("curated").context("curated job")?;
    let ctx = RunContext::new(config, l, settings, chrono::Utc::now());
    Ok(run_job(&ctx, job, 10_000).await?.joined())
}

/// The seed data (about 45 minutes of events, one every 3 s).
fn seed(n: usize) -> Vec<SourceRecord> {
    let start = chrono::DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default();
    SeedGenerator::new(11, start, 3000).records(n)
}

#[derive(Debug, Clone, Copy)]
enum Schedule {
    OnceAtTheEnd,
    AfterEachBatch,
    SmallChunksWithReplays,
    TwoRunsAtOnce,
    KilledRunThenCompaction,
    /// Random batch sizes, runs at random points with random chunk limits (seeded).
    Random(u64),
}

/// Refine runs over and over while ingestion appends (the schedule firing mid-batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_while_ingestion_appends_lose_and_duplicate_nothing() -> Result<()> {
    let records = seed(600);
    let expected = brute_force(&records);
    for backend in backends() {
        let lake = TestLake::new(backend, "refine-while-ingesting")?;
        let ingestor = lake.ingestor()?;
        let l = Lake::new(&lake.config.lake)?;
        let s = settings(&lake);
        let done = std::sync::atomic::AtomicBool::new(false);
        let ingest = async {
            for chunk in records.chunks(60) {
                ingestor.ingest(chunk).await?;
            }
            done.store(true, Ordering::SeqCst);
            anyhow::Ok(())
        };
        let runs = async {
            let mut n = 0;
            while !done.load(Ordering::SeqCst) {
                let (a, b) =
                    tokio::join!(refine(&lake.config, &l, &s), refine(&lake.config, &l, &s));
                a?;
                b?;
                n += 1;
            }
            anyhow::Ok(n)
        };
        let (ingested, runs) = tokio::join!(ingest, runs);
        ingested?;
        assert!(runs? > 0, "refine must have run while ingesting");
        refine(&lake.config, &l, &s).await?;
        assert_eq!(summary(&curated(&l).await?), expected, "{backend:?}");
    }
    Ok(())
}

async fn scenario(
    lake: &TestLake,
    records: &[SourceRecord],
    batch: usize,
    how: Schedule,
) -> Result<Vec<Row>> {
    let mut lake_cfg = lake.config.clone();
    if let Schedule::SmallChunksWithReplays = how
        && let Some(j) = lake_cfg.refine.iter_mut().find(|j| j.job == "curated")
    {
        j.max_files_per_run = 1;
    }
    if let Schedule::Random(seed) = how {
        let mut rng = fastrand::Rng::with_seed(seed);
        lake_cfg.refine[0].max_files_per_run = rng.usize(1..6);
        let ingestor = lake.ingestor()?;
        let l = Lake::new(&lake.config.lake)?;
        let s = settings(lake);
        let mut rest = records;
        while !rest.is_empty() {
            let (now, later) = rest.split_at(rng.usize(1..=rest.len().min(200)));
            ingestor.ingest(now).await?;
            if rng.bool() {
                refine(&lake_cfg, &l, &s).await?;
            }
            rest = later;
        }
        refine(&lake_cfg, &l, &s).await?;
        return curated(&l).await;
    }
    let ingestor = lake.ingestor()?;
    let faults = Arc::new(Faults::default());
    let l = faults.install(Lake::new(&lake.config.lake)?);
    let s = settings(lake);
    for (i, chunk) in records.chunks(batch).enumerate() {
        ingestor.ingest(chunk).await?;
        match how {
            Schedule::OnceAtTheEnd | Schedule::Random(_) => {}
            Schedule::AfterEachBatch => {
                refine(&lake_cfg, &l, &s).await?;
            }
            Schedule::SmallChunksWithReplays => {
                refine(&lake_cfg, &l, &s).await?;
                ingestor.ingest(chunk).await?; // a redelivered raw batch
                assert_eq!(
                    refine(&lake_cfg, &l, &s).await?,
                    0,
                    "a replay joined rows again"
                );
            }
            Schedule::TwoRunsAtOnce => {
                let (a, b) = tokio::join!(refine(&lake_cfg, &l, &s), refine(&lake_cfg, &l, &s));
                a?;
                b?;
            }
            Schedule::KilledRunThenCompaction => {
                if i % 2 == 0 {
                    // The run writes its data files, then its commit is refused and it stops
                    // (what a killed invocation leaves behind).
                    let once = CommitSettings {
                        max_attempts: 1,
                        ..s.clone()
                    };
                    faults.refuse.store(1, Ordering::SeqCst);
                    let killed = refine(&lake_cfg, &l, &once).await;
                    faults.refuse.store(0, Ordering::SeqCst);
                    assert!(killed.is_err(), "the refused commit must fail the run");
                } else {
                    let opts = CompactOptions {
                        min_small_files: 2,
                        ..Default::default()
                    };
                    for t in ["raw/order", "raw/member"] {
                        compact(&l, t, &opts, chrono::Utc::now(), &|_, _| {}).await?;
                    }
                    refine(&lake_cfg, &l, &s).await?;
                }
            }
        }
    }
    refine(&lake_cfg, &l, &s).await?;
    assert_eq!(
        refine(&lake_cfg, &l, &s).await?,
        0,
        "a second run changed the output"
    );
    curated(&l).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn output_is_the_same_however_ingestion_and_runs_are_batched() -> Result<()> {
    let records = seed(900);
    let expected = brute_force(&records);
    assert!(
        expected.len() > records.len(),
        "the data must produce many pairs"
    );
    for backend in backends() {
        let mut first: Option<Vec<Row>> = None;
        for (batch, how) in [
            (900, Schedule::OnceAtTheEnd),
            (120, Schedule::AfterEachBatch),
            (200, Schedule::SmallChunksWithReplays),
            (150, Schedule::TwoRunsAtOnce),
            (100, Schedule::KilledRunThenCompaction),
            (0, Schedule::Random(1)),
            (0, Schedule::Random(2)),
        ] {
            // On the emulator, the schedules that race or fail storage; all of them on disk.
            let storage_matters = matches!(
                how,
                Schedule::TwoRunsAtOnce | Schedule::KilledRunThenCompaction
            );
            if backend == lakestream_testkit::Backend::S3 && !storage_matters {
                continue;
            }
            let lake = TestLake::new(backend, "refine-batching")?;
            let rows = scenario(&lake, &records, batch, how).await?;
            assert_eq!(
                summary(&rows),
                expected,
                "{backend:?} {how:?}: output differs from the brute-force join"
            );
            match &first {
                None => first = Some(rows),
                Some(f) => assert_eq!(
                    &rows, f,
                    "{backend:?} {how:?}: output differs from the first schedule"
                ),
            }
        }
    }
    Ok(())
}

fn order(offset: i64, id: i32, owner: &str, ts: &str) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":{id},"order_owner":"{owner}","order_value":{id}0,"timestamp":"{ts}"}}"#
    );
    SourceRecord::new("orders", 0, offset, 0, json.as_bytes())
}

fn member(offset: i64, owner: &str, level: &str, ts: &str) -> SourceRecord {
    let json = format!(r#"{{"order_owner":"{owner}","membership":"{level}","timestamp":"{ts}"}}"#);
    SourceRecord::new("members", 0, offset, 0, json.as_bytes())
}

/// Bounds and lateness, ingested version by version (each inner list is one invocation).
fn late_and_bounds() -> Vec<Vec<SourceRecord>> {
    vec![
        vec![
            member(1, "alice", "gold", "2026-01-01T12:00:00Z"),
            member(2, "bob", "bronze", "2026-01-01T08:00:00Z"),
        ],
        vec![
            order(1, 1, "alice", "2026-01-01T10:00:00Z"),
            order(2, 5, "bob", "2026-01-01T08:00:00Z"), // at the membership time: joins
            order(3, 6, "bob", "2026-01-01T09:00:00Z"), // exactly one hour later: joins
            order(4, 7, "bob", "2026-01-01T09:00:00.001Z"), // one ms later: does not
            order(5, 8, "bob", "2026-01-01T07:59:59.999Z"), // one ms before: does not
        ],
        // Late membership: members' watermark is 12:00 - 2 h = 10:00. It would match order 1.
        vec![member(3, "alice", "silver", "2026-01-01T09:30:00Z")],
        // On time for orders (watermark 07:00) and inside silver's hour, but silver was late.
        vec![order(6, 2, "alice", "2026-01-01T09:45:00Z")],
        vec![order(7, 3, "alice", "2026-01-01T12:30:00Z")],
        // Late order: orders' watermark is 12:30 - 3 h = 09:30.
        vec![
            order(8, 4, "alice", "2026-01-01T06:00:00Z"),
            member(4, "alice", "bronze", "2026-01-01T05:30:00Z"),
        ],
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_are_inclusive_and_late_rows_go_to_dead_letters() -> Result<()> {
    for backend in backends() {
        for after_each in [true, false] {
            let lake = TestLake::new(backend, "refine-late")?;
            let ingestor = lake.ingestor()?;
            let l = Lake::new(&lake.config.lake)?;
            let s = settings(&lake);
            for version in late_and_bounds() {
                ingestor.ingest(&version).await?;
                if after_each {
                    refine(&lake.config, &l, &s).await?;
                }
            }
            refine(&lake.config, &l, &s).await?;
            let got: Vec<(i64, String)> = summary(&curated(&l).await?)
                .into_iter()
                .map(|r| (r.0, r.4))
                .collect();
            assert_eq!(
                got,
                [
                    (3, "gold".to_string()),
                    (5, "bronze".into()),
                    (6, "bronze".into())
                ],
                "{backend:?} after_each={after_each}"
            );
            let letters = lake.read("dead_letters").await?;
            let errors = strings(&letters, "error")?;
            let uris = strings(&letters, "object_uri")?;
            let mut late: Vec<String> = errors
                .iter()
                .zip(&uris)
                .filter(|(e, _)| e.as_deref().is_some_and(|e| e.starts_with("late:")))
                .map(|(_, u)| u.clone().unwrap_or_default())
                .collect();
            late.sort();
            // silver (members v1), bronze at 05:30 (members v2) and order 4 (orders v3).
            assert_eq!(
                late,
                [
                    "delta:raw/member@1",
                    "delta:raw/member@2",
                    "delta:raw/order@3"
                ],
                "{backend:?} after_each={after_each}"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_source_delete_fails_the_job_clearly() -> Result<()> {
    let lake = TestLake::new(lakestream_testkit::Backend::Fs, "refine-delete")?;
    let ingestor = lake.ingestor()?;
    let l = Lake::new(&lake.config.lake)?;
    let s = settings(&lake);
    for v in late_and_bounds().into_iter().take(2) {
        ingestor.ingest(&v).await?;
    }
    // A commit that removes a file with dataChange=true (what a DELETE writes).
    let mut h = lakestream_core::table::TableHandle::open_existing(&l, "raw/order").await?;
    let snapshot = h.snapshot()?;
    let file = snapshot.log_data().iter().next().context("a file")?;
    let remove = deltalake::kernel::Remove {
        path: file.path().to_string(),
        data_change: true,
        deletion_timestamp: Some(1),
        extended_file_metadata: None,
        partition_values: Some(file.partition_values_map()),
        size: Some(file.size()),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
    };
    deltalake::kernel::transaction::CommitBuilder::default()
        .with_actions(vec![deltalake::kernel::Action::Remove(remove)])
        .build(
            Some(snapshot),
            h.log_store(),
            deltalake::protocol::DeltaOperation::Delete { predicate: None },
        )
        .await?;
    h.refresh().await?;
    let err = refine(&lake.config, &l, &s)
        .await
        .err()
        .context("a delete in a source must fail the job")?;
    let text = format!("{err:#}");
    assert!(
        text.contains("ignore_changes") && text.contains("removes data"),
        "{text}"
    );
    // With ignore_changes the job reads the rest.
    let mut ignoring = lake.config.clone();
    ignoring.refine[0].ignore_changes = true;
    refine(&ignoring, &l, &s).await?;
    Ok(())
}

#[tokio::test]
async fn re_created_source_and_lost_versions_fail_with_what_to_do() -> Result<()> {
    let lake = TestLake::new(lakestream_testkit::Backend::Fs, "refine-gone")?;
    let ingestor = lake.ingestor()?;
    let l = Lake::new(&lake.config.lake)?;
    let s = settings(&lake);
    let versions = late_and_bounds();
    ingestor.ingest(&versions[0]).await?;
    ingestor.ingest(&versions[1]).await?;
    refine(&lake.config, &l, &s).await?;
    // Three more order versions, a checkpoint, then the log before it expires.
    for v in &versions[3..6] {
        ingestor.ingest(v).await?;
    }
    let clock = lakestream_core::FixedClock::new(chrono::Utc::now());
    lakestream_core::maintenance::checkpoint(&l, "raw/order", true, &clock, &[]).await?;
    let root = std::path::PathBuf::from(&lake.config.lake.root);
    for v in 1..3 {
        std::fs::remove_file(root.join(format!("raw/order/_delta_log/{v:020}.json")))?;
    }
    let err = format!(
        "{:#}",
        refine(&lake.config, &l, &s)
            .await
            .err()
            .context("lost versions must fail")?
    );
    assert!(
        err.contains("version 1") && err.contains("behind") && err.contains("--skip-to raw/order="),
        "{err}"
    );
    // Skipping ahead as the message says lets the job continue from there.
    let job = lake.config.refine_job("curated").context("job")?;
    let ctx = RunContext::new(&lake.config, &l, &s, chrono::Utc::now());
    // A version the log no longer reaches is refused the same way on the next run.
    lakestream_core::refine::skip_to(&ctx, job, "raw/order", 2).await?;
    let err = format!(
        "{:#}",
        refine(&lake.config, &l, &s)
            .await
            .err()
            .context("unloadable")?
    );
    assert!(
        err.contains("version 2") && err.contains("--skip-to"),
        "{err}"
    );
    let latest = lake.version("raw/order").await? as i64;
    lakestream_core::refine::skip_to(&ctx, job, "raw/order", latest).await?;
    refine(&lake.config, &l, &s).await?;

    // The members table is deleted and written again: a different table.
    std::fs::remove_dir_all(root.join("raw/member"))?;
    let again = lake.ingestor()?;
    again
        .ingest(&[member(10, "alice", "gold", "2026-01-01T12:10:00Z")])
        .await?;
    let err = format!(
        "{:#}",
        refine(&lake.config, &l, &s)
            .await
            .err()
            .context("a re-created source must fail")?
    );
    assert!(err.contains("re-created"), "{err}");
    lakestream_core::refine::skip_to(&ctx, job, "raw/member", -1).await?;
    refine(&lake.config, &l, &s).await?;
    let rows = summary(&curated(&l).await?);
    assert!(
        rows.iter()
            .any(|r| r.0 == 3 && r.4 == "gold" && r.5 % 3_600_000 == 600_000),
        "{rows:?}"
    );
    Ok(())
}
