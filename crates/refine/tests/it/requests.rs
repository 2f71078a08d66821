//! Storage requests of a warm refine process (issue 28): a job with nothing new costs no
//! request on a notice and at most two HEADs per source on a tick; a warm run of one new source
//! version never replays a table's log from its start.

use crate::notices::{ingest, sqs_event as event};
use anyhow::Result;
use deltalake::Path;
use lakestream_core::intercept::{Latency, observe_calls, with_latency};
use lakestream_core::{KafkaIngestor, Lake, SystemClock};
use lakestream_formats::record::SourceRecord;
use lakestream_lambda::notify::RefineNotice;
use lakestream_testkit::{Backend, TestLake, example_config_with};
use refine::Refiner;
use std::sync::{Arc, Mutex};

const ORDERS: &[u8] = include_bytes!("../../../../events/msk-orders.json");
const MEMBERS: &[u8] = include_bytes!("../../../../events/msk-members.json");

#[derive(Default)]
struct Calls(Mutex<Vec<String>>);

impl Calls {
    fn push(&self, op: &str, path: Option<&Path>) {
        let path = path.map(|p| p.to_string()).unwrap_or_default();
        if let Ok(mut v) = self.0.lock() {
            v.push(format!("{op} {path}"));
        }
    }
    fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

/// No data file is read twice in one warm round (whole small files are held by the process).
fn read_once(made: &[String], label: &str) {
    let mut seen = std::collections::HashSet::new();
    for c in made {
        if c.starts_with("get ") && c.ends_with(".parquet") {
            assert!(seen.insert(c), "{label}: {c} read twice: {made:?}");
        }
    }
}

#[tokio::test]
async fn warm_refine_requests() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-requests")?;
    let calls = Arc::new(Calls::default());
    let c = calls.clone();
    let l = Lake::new(&lake.config.lake)?
        .with_store_wrapper(observe_calls(Arc::new(move |op, path| c.push(op, path))));
    let refiner = Refiner::with_lake(lake.config.clone(), l, Arc::new(SystemClock));
    let mut notices = ingest(&lake, MEMBERS).await?;
    notices.extend(ingest(&lake, ORDERS).await?);
    refine::handle(&refiner, &event(&notices))
        .await?
        .into_result()?;
    calls.take();
    // The same notices again: nothing is due, nothing is asked.
    refine::handle(&refiner, &event(&notices))
        .await?
        .into_result()?;
    let made = calls.take();
    assert!(
        made.is_empty(),
        "a redelivered notice asked storage: {made:?}"
    );
    // A tick with nothing new: two HEADs per source of each job (curated 2, processed 1, gold 1).
    refine::handle(&refiner, &serde_json::json!({}))
        .await?
        .into_result()?;
    let made = calls.take();
    assert!(made.iter().all(|c| c.starts_with("head ")), "{made:?}");
    assert_eq!(made.len(), 8, "{made:?}");
    for round in 0..3 {
        let replay = String::from_utf8(ORDERS.to_vec())?
            .replace("\"offset\": 12", &format!("\"offset\": 3{round}"));
        let n = ingest(&lake, replay.as_bytes()).await?;
        calls.take();
        refine::handle(&refiner, &event(&n)).await?.into_result()?;
        let made = calls.take();
        let log: Vec<&String> = made.iter().filter(|c| c.contains("_delta_log")).collect();
        eprintln!(
            "round {round}: {} requests, {} on logs:\n  {}",
            made.len(),
            log.len(),
            made.iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\n  ")
        );
        assert!(
            !log.iter()
                .any(|c| c.starts_with("get ") && c.contains("00000000000000000000.json")),
            "round {round}: a warm run read a log from its start: {log:?}"
        );
        // Issue 39: no LIST, no `_last_checkpoint`; the log reads ratchet at today's count.
        assert!(
            !log.iter()
                .any(|c| c.starts_with("list") || c.ends_with("_last_checkpoint")),
            "round {round}: {log:?}"
        );
        let reads = log.iter().filter(|c| !c.starts_with("put")).count();
        assert!(
            reads <= WARM_JOIN_LOG_READS,
            "round {round}: {reads} log reads: {log:?}"
        );
        assert!(made.len() <= WARM_JOIN_REQUESTS, "round {round}: {made:?}");
        read_once(&made, &format!("round {round}"));
    }
    Ok(())
}

/// Log GETs and HEADs of one warm round of the seed's jobs (curated, processed, gold), the
/// ratchet (issue 39: 12; 16 before, with a LIST per table load).
const WARM_JOIN_LOG_READS: usize = 12;

/// Every request of one warm round of the seed's jobs, the ratchet (issue 39: 19-21 as the
/// ingest's hour partitions fall, was 41).
const WARM_JOIN_REQUESTS: usize = 22;

/// A Debezium change of `crm.public.t00` (schemaless JSON, the family's columns type it).
fn change(offset: i64, op: &str, id: i64, rev: i64, lsn: i64) -> SourceRecord {
    change_in("t00", offset, op, id, rev, lsn)
}

/// A Debezium change of `crm.public.<table>`.
fn change_in(table: &str, offset: i64, op: &str, id: i64, rev: i64, lsn: i64) -> SourceRecord {
    let row = serde_json::json!({"id": id, "rev": rev, "name": format!("n{id}-{rev}")});
    let value = serde_json::json!({
        "before": if op == "c" { serde_json::Value::Null } else { row.clone() },
        "after": if op == "d" { serde_json::Value::Null } else { row },
        "op": op,
        "ts_ms": 1_764_412_400_000i64 + lsn,
        "source": {"connector": "postgresql", "db": "crm", "schema": "public", "table": table,
                   "lsn": lsn, "ts_ms": 1_764_412_400_000i64 + lsn},
    });
    SourceRecord::new(
        &format!("crm.public.{table}"),
        0,
        offset,
        1_764_412_400_000,
        value.to_string().as_bytes(),
    )
    .with_key(serde_json::json!({"id": id}).to_string().as_bytes())
}

const FAMILY: &str = r#"
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*"]
scd = 1
columns = { "*" = ["id int64", "rev int64", "name string"] }
"#;

/// Bronze -> silver (SCD1, with deletes and so tombstones) on backend `b`: a batch ingested and
/// its notice refined, six rounds (the last only inserts), by `instances` refine processes
/// taking turns (two Lambda instances of the function). Returns each round's requests (a round's own: the ingest's are
/// not counted); silver holds what the changes left.
async fn cdc_apply_rounds(b: Backend, instances: usize) -> Result<Vec<Vec<String>>> {
    let lake = TestLake::with_config(b, "cdc-requests", example_config_with(FAMILY)?)?;
    let calls = Arc::new(Calls::default());
    let refiners = (0..instances)
        .map(|_| {
            let c = calls.clone();
            let l = Lake::new(&lake.config.lake)?
                .with_store_wrapper(observe_calls(Arc::new(move |op, path| c.push(op, path))));
            Ok(Refiner::with_lake(
                lake.config.clone(),
                l,
                Arc::new(SystemClock),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let ingestor = KafkaIngestor::new(lake.config.clone(), Arc::new(SystemClock))?;
    let (mut offset, mut lsn) = (0, 100);
    let mut batch = |ops: &[(&str, i64)]| {
        ops.iter()
            .map(|(op, id)| {
                offset += 1;
                lsn += 10;
                change(offset, op, *id, lsn, lsn)
            })
            .collect::<Vec<_>>()
    };
    let mut rounds = vec![batch(&[("c", 1), ("c", 2), ("c", 3), ("d", 3)])];
    for round in 0..4 {
        rounds.push(batch(&[("u", 1), ("c", 10 + round), ("d", 10 + round)]));
    }
    // The last round only inserts (new keys): no change data file (see below).
    rounds.push(batch(&[("c", 20), ("c", 21)]));
    let mut out = Vec::new();
    for (round, records) in rounds.iter().enumerate() {
        let report = ingestor.ingest(records).await?;
        let notices = RefineNotice::for_commits(
            &lake.config,
            &report
                .tables
                .iter()
                .filter_map(|t| Some((t.table.clone(), t.version?)))
                .collect::<Vec<_>>(),
            chrono::Utc::now().timestamp_millis(),
        );
        calls.take();
        let refiner = &refiners[round % instances];
        let response = refine::handle(refiner, &event(&notices))
            .await?
            .into_result()?;
        let made = calls.take();
        assert!(
            response.metrics_line().contains("\"Runs\":1.0"),
            "{b:?} round {round}: {}",
            response.metrics_line()
        );
        eprintln!(
            "{b:?} {instances} instance(s), round {round}: {} requests:\n  {}",
            made.len(),
            made.join("\n  ")
        );
        out.push(made);
    }
    // Silver holds what the changes left: 1 (updated every round), 2, and the last inserts.
    let silver = lake.read("silver/crm/public/t00").await?;
    let mut ids = lakestream_testkit::int64s(&silver, "id")?;
    ids.sort();
    assert_eq!(ids, [Some(1), Some(2), Some(20), Some(21)], "{b:?}");
    Ok(out)
}

/// Requests of a warm CDC apply (issue 39), by class, on every backend: bronze -> silver (SCD1,
/// with deletes and so tombstones) after each small batch. A warm apply never lists, never
/// reads `_last_checkpoint`, and asks the log of each table it touches at most an identity
/// HEAD and a GET for the next commit (the ratchet below: today's counts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_cdc_apply_requests() -> Result<()> {
    for b in lakestream_testkit::backends() {
        // Rounds 0 and 1 create silver and the tombstone table.
        for (round, made) in cdc_apply_rounds(b, 1).await?.iter().enumerate().skip(2) {
            let log: Vec<&String> = made.iter().filter(|c| c.contains("_delta_log")).collect();
            let count = |op: &str| made.iter().filter(|c| c.starts_with(op)).count();
            assert_eq!(
                count("list"),
                0,
                "{b:?} round {round}: a warm apply listed: {log:?}"
            );
            assert!(
                !log.iter().any(|c| c.ends_with("_last_checkpoint")),
                "{b:?} round {round}: read _last_checkpoint: {log:?}"
            );
            assert!(
                made.len() <= WARM_CDC_REQUESTS,
                "{b:?} round {round}: {} requests (at most {WARM_CDC_REQUESTS})",
                made.len()
            );
            read_once(made, &format!("{b:?} round {round}"));
            // (Data and change data PUTs go through the Parquet writer's own client, not
            // counted here: `insert_only_feed.rs` in lakestream-core reads each commit.)
            let only_inserts = round == INSERT_ONLY_ROUND;
            if only_inserts {
                assert!(
                    made.len() <= WARM_INSERT_REQUESTS,
                    "{b:?} round {round}: {} requests (at most {WARM_INSERT_REQUESTS}): {made:?}",
                    made.len()
                );
            }
            let log_reads = log.iter().filter(|c| !c.starts_with("put")).count();
            assert!(
                log_reads <= WARM_CDC_LOG_READS,
                "{b:?} round {round}: {log_reads} log reads (at most {WARM_CDC_LOG_READS}): {log:?}"
            );
        }
    }
    Ok(())
}

/// Two refine instances taking turns (as Lambda hands a queue's batches to whichever instance
/// is free): each round's tables were last written by the other, so every table is contended.
/// An apply that deletes writes no tombstone-table commit (its tombstones go in silver's
/// commit: round 0 creates silver and writes them to the table, round 1 sets silver's anchor);
/// the tombstone table's next version is looked for once per round (the plan's load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_taking_turns_write_no_tombstone_commit() -> Result<()> {
    for b in lakestream_testkit::backends() {
        for (round, made) in cdc_apply_rounds(b, 2).await?.iter().enumerate().skip(2) {
            let tombstone_log = |c: &&String| c.contains("/tombstones/_delta_log/");
            let written: Vec<&String> = made
                .iter()
                .filter(|c| c.starts_with("put ") && c.contains("/tombstones/"))
                .collect();
            assert!(written.is_empty(), "{b:?} round {round}: {written:?}");
            let silver_log_puts = made
                .iter()
                .filter(|c| c.starts_with("put ") && c.contains("silver/") && c.ends_with(".json"))
                .count();
            assert_eq!(silver_log_puts, 1, "{b:?} round {round}: {made:?}");
            let mut asked: Vec<&String> = made
                .iter()
                .filter(|c| c.starts_with("get ") && tombstone_log(c))
                .collect();
            let n = asked.len();
            asked.dedup();
            assert_eq!(asked.len(), n, "{b:?} round {round}: asked twice: {made:?}");
            assert!(n <= 2, "{b:?} round {round}: {made:?}");
            assert!(
                !made.iter().any(|c| c.starts_with("list")),
                "{b:?} round {round}: {made:?}"
            );
        }
    }
    Ok(())
}

/// The round of [`cdc_apply_rounds`] whose changes are inserts of new keys only.
const INSERT_ONLY_ROUND: usize = 5;

/// Every request of the warm apply round that only inserts, the ratchet (issue 39: 9, no
/// silver file rewritten and so none read; the tombstone table is still asked, since a new
/// key may be a re-insert of a deleted one).
const WARM_INSERT_REQUESTS: usize = 9;

/// Every request of one warm CDC apply round, the ratchet (issue 39: 10, its tombstones in
/// silver's commit; 13 with a tombstone-table commit per apply, 16 with the tombstone table
/// loaded three times, 37 and growing by one GET per tombstone file before data files were
/// read whole once and held and side tables kept warm).
const WARM_CDC_REQUESTS: usize = 10;

/// Log GETs and HEADs of one warm CDC apply round, the ratchet (issue 39: 7; was 10 with the
/// tombstone table's next commit asked by the plan, the write and the expiry, 12 with 4 LISTs
/// and 4 `_last_checkpoint` GETs): per table an identity HEAD and a GET of the next commit
/// (bronze, silver, tombstones — once per plan: the write and the expiry use that load), and
/// the new bronze commit.
const WARM_CDC_LOG_READS: usize = 7;

/// A schedule tick assesses a family's tables together (issue 39: the safety net's tick over
/// 70 tables waited for its ~140 HEADs one after another, a third of the refine function's
/// waits in a 15-minute bench window). With every request given a latency, a warm tick with
/// nothing new asks its two HEADs per table, and those of several tables are in flight at once
/// (one table's two alone would be 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_assesses_a_family_s_tables_together() -> Result<()> {
    let lake = TestLake::with_config(Backend::Fs, "cdc-assess", example_config_with(FAMILY)?)?;
    // Only the family's bronze requests are counted in flight (the example's own jobs, whose
    // tables do not exist, ask theirs together too).
    let latency = Latency::new(std::time::Duration::from_millis(20), "bronze/crm/public/t");
    let calls = Arc::new(Calls::default());
    let c = calls.clone();
    let l = Lake::new(&lake.config.lake)?.with_store_wrapper(with_latency(
        latency.clone(),
        Arc::new(move |op, path| c.push(op, path)),
    ));
    let refiner = Refiner::with_lake(lake.config.clone(), l, Arc::new(SystemClock));
    let ingestor = KafkaIngestor::new(lake.config.clone(), Arc::new(SystemClock))?;
    let tables: i64 = 6;
    let changes: Vec<SourceRecord> = (0..tables)
        .map(|t| change_in(&format!("t{t:02}"), t + 1, "c", 1, 1, 110 + t))
        .collect();
    ingestor.ingest(&changes).await?;
    let tick = serde_json::json!({});
    let first = refine::handle(&refiner, &tick).await?.into_result()?;
    let applied = first
        .jobs
        .iter()
        .filter(|j| j.job.contains("public.t") && j.outcome().is_ok_and(|r| !r.runs.is_empty()))
        .count();
    assert_eq!(applied as i64, tables, "{:?}", first.jobs);
    calls.take();
    latency.reset();
    let warm = refine::handle(&refiner, &tick).await?.into_result()?;
    let made = calls.take();
    assert!(
        warm.jobs
            .iter()
            .filter(|j| j.job.contains("public.t"))
            .all(|j| !j.due()),
        "nothing new, no table's job due: {:?}",
        warm.jobs
    );
    let family_heads = made
        .iter()
        .filter(|c| c.starts_with("head ") && c.contains("bronze/crm/public/t"))
        .count();
    assert_eq!(family_heads as i64, 2 * tables, "{made:?}");
    assert!(
        latency.peak() >= 4,
        "the tick's HEADs were asked {} at a time at most: {made:?}",
        latency.peak()
    );
    Ok(())
}

/// The family listing of a warm process (a schedule tick after the listing expired) lists the
/// family's directories, not each table it already knows (issue 39: a LIST per table per
/// listing was a third of the LISTs of bench-fresh at 15 minutes); a new table is still found.
#[tokio::test]
async fn a_warm_family_listing_lists_no_known_table() -> Result<()> {
    let lake = TestLake::with_config(Backend::Fs, "cdc-listing", example_config_with(FAMILY)?)?;
    let calls = Arc::new(Calls::default());
    let c = calls.clone();
    let l = Lake::new(&lake.config.lake)?
        .with_store_wrapper(observe_calls(Arc::new(move |op, path| c.push(op, path))));
    let mut refiner = Refiner::with_lake(lake.config.clone(), l, Arc::new(SystemClock));
    refiner.settings.listing_ttl = chrono::TimeDelta::zero();
    let ingestor = KafkaIngestor::new(lake.config.clone(), Arc::new(SystemClock))?;
    ingestor.ingest(&[change(1, "c", 1, 1, 110)]).await?;
    let tick = serde_json::json!({});
    let jobs = |r: &refine::RefineResponse| -> Vec<String> {
        r.jobs
            .iter()
            .map(|j| j.job.clone())
            .filter(|j| j.contains("t0"))
            .collect()
    };
    let first = refine::handle(&refiner, &tick).await?.into_result()?;
    let listed = |made: &[String]| -> Vec<String> {
        made.iter()
            .filter(|c| c.starts_with("list_dir") && c.contains("public/t"))
            .cloned()
            .collect()
    };
    let made = calls.take();
    assert_eq!(
        listed(&made).len(),
        1,
        "the cold listing asks t00: {made:?}"
    );
    assert_eq!(jobs(&first).len(), 1, "{:?}", jobs(&first));

    // A new table t01 beside it: the warm listing asks t01 only.
    ingestor
        .ingest(&[change_in("t01", 2, "c", 1, 1, 120)])
        .await?;
    calls.take();
    let second = refine::handle(&refiner, &tick).await?.into_result()?;
    let made = calls.take();
    assert_eq!(jobs(&second).len(), 2, "{:?}", jobs(&second));
    let asked = listed(&made);
    assert!(
        asked.len() == 1 && asked[0].contains("t01"),
        "a warm listing asked a known table: {asked:?}"
    );
    Ok(())
}

/// A cold family listing (a new process) asks a folder whose table has a checkpoint with one
/// HEAD of its `_last_checkpoint`, not a LIST (issue 39: each new refine instance listed every
/// table of the family, 144 LISTs an instance-hour at 15 minutes); a young table without one
/// is still listed.
#[tokio::test]
async fn a_cold_family_listing_heads_a_checkpointed_table() -> Result<()> {
    let lake = TestLake::with_config(
        Backend::Fs,
        "cdc-cold-listing",
        example_config_with(FAMILY)?,
    )?;
    let ingestor = KafkaIngestor::new(lake.config.clone(), Arc::new(SystemClock))?;
    // t00 past its checkpoint interval (10 commits), t01 one commit.
    for i in 1..=11 {
        ingestor.ingest(&[change(i, "c", i, 1, 100 + i)]).await?;
    }
    ingestor
        .ingest(&[change_in("t01", 1, "c", 1, 1, 200)])
        .await?;
    let calls = Arc::new(Calls::default());
    let c = calls.clone();
    let l = Lake::new(&lake.config.lake)?
        .with_store_wrapper(observe_calls(Arc::new(move |op, path| c.push(op, path))));
    let listing = refine::listing::Listing::default();
    let jobs = listing
        .jobs(
            &l,
            &lake.config,
            chrono::TimeDelta::zero(),
            chrono::Utc::now(),
        )
        .await?;
    let family: Vec<&str> = jobs
        .iter()
        .map(|j| j.job.as_str())
        .filter(|j| j.contains("public.t0"))
        .collect();
    assert_eq!(family.len(), 2, "{family:?}");
    let made = calls.take();
    let asked = |op: &str, table: &str| {
        made.iter()
            .filter(|c| c.starts_with(op) && c.contains(table))
            .count()
    };
    assert_eq!(asked("list_dir", "public/t00"), 0, "{made:?}");
    assert_eq!(
        asked("head", "t00/_delta_log/_last_checkpoint"),
        1,
        "{made:?}"
    );
    assert_eq!(asked("list_dir", "public/t01"), 1, "{made:?}");
    Ok(())
}

/// A folder that stopped being a table (its `_delta_log/` removed, other objects left) stays a
/// job of a warm process's listing until the hourly full listing asks every folder again.
#[tokio::test]
async fn the_hourly_full_listing_drops_a_folder_that_stopped_being_a_table() -> Result<()> {
    let lake = TestLake::with_config(
        Backend::Fs,
        "cdc-full-listing",
        example_config_with(FAMILY)?,
    )?;
    let ingestor = KafkaIngestor::new(lake.config.clone(), Arc::new(SystemClock))?;
    ingestor
        .ingest(&[
            change_in("t00", 1, "c", 1, 1, 110),
            change_in("t01", 2, "c", 1, 1, 120),
        ])
        .await?;
    let store = Lake::new(&lake.config.lake)?;
    let listing = refine::listing::Listing::default();
    let t0 = chrono::Utc::now();
    let family_jobs = |at: chrono::DateTime<chrono::Utc>| {
        let (store, listing, config) = (&store, &listing, &lake.config);
        async move {
            let jobs = listing
                .jobs(store, config, chrono::TimeDelta::zero(), at)
                .await?;
            anyhow::Ok(
                jobs.into_iter()
                    .filter(|j| j.job.contains("public.t0"))
                    .count(),
            )
        }
    };
    assert_eq!(family_jobs(t0).await?, 2);
    let log = lake
        .table_dir("bronze/crm/public/t01")
        .map(|d| d.join("_delta_log"));
    std::fs::remove_dir_all(
        log.as_ref()
            .ok_or_else(|| anyhow::anyhow!("a filesystem lake"))?,
    )?;
    assert_eq!(
        family_jobs(t0 + chrono::TimeDelta::minutes(1)).await?,
        2,
        "a table the last listing found is not asked again within the hour"
    );
    assert_eq!(
        family_jobs(t0 + refine::listing::FULL_LISTING_EVERY + chrono::TimeDelta::minutes(1))
            .await?,
        1
    );
    Ok(())
}
