//! Storage requests of the warm append path (issue "Performance", issue 39): on `raw/order`, a
//! warm append that writes no checkpoint makes at most 4 requests besides its data-file PUTs,
//! the same around version 15 and around version 505, and never lists the log (neither
//! delta-rs's expired-log cleanup nor a refresh: the next commit is found by a GET); a
//! checkpoint commit re-reads no commit file the process holds, and a cold start reads the
//! checkpoint with one GET and does not list the log (GETs from `_last_checkpoint`); two instances taking turns on one table fail
//! no conditional PUT: each commit looks for the other's first (one GET, with the identity HEAD).

use anyhow::Result;
use deltalake::Path;
use deltalake::logstore::CommitOrBytes;
use lakestream_core::intercept::observe_calls;
use lakestream_core::table::TableHandle;
use lakestream_core::{FixedClock, KafkaIngestor, Lake};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::records;
use lakestream_testkit::{TestLake, backends};
use std::sync::{Arc, Mutex};

/// Requests to the table stores besides data files, as `"<op> <path>"`.
#[derive(Debug, Default)]
struct Calls(Mutex<Vec<String>>);

impl Calls {
    fn push(&self, op: &str, path: Option<&Path>) {
        let path = path.map(|p| p.to_string()).unwrap_or_default();
        // Data files live under the partition directories; everything of the log is counted.
        if !path.contains("_delta_log") {
            return;
        }
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

fn order(off: i64) -> SourceRecord {
    records::order(0, off, off + 1, "o1", off)
}

fn ingestor(lake: &TestLake, calls: &Arc<Calls>) -> Result<KafkaIngestor> {
    let c = calls.clone();
    let l = Lake::new(&lake.config.lake)?
        .with_store_wrapper(observe_calls(Arc::new(move |op, path| c.push(op, path))));
    let clock =
        FixedClock::new(chrono::DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default());
    Ok(KafkaIngestor::with_lake(
        lake.config.clone(),
        l,
        Arc::new(clock),
    ))
}

/// Ingest one record per offset in `offsets`, one commit each, and check every commit that is
/// not a checkpoint commit (the example's interval is 10). Returns the requests of each commit.
async fn warm_commits(
    ing: &KafkaIngestor,
    calls: &Calls,
    offsets: std::ops::Range<i64>,
    label: &str,
) -> Result<()> {
    for off in offsets {
        let report = ing.ingest(&[order(off)]).await?;
        let made = calls.take();
        let version = report.tables[0].version.unwrap_or_default();
        eprintln!("{label} v{version}: {} requests: {made:?}", made.len());
        assert!(
            !made.iter().any(|c| c.starts_with("list")),
            "{label} v{version}: a warm append listed the log: {made:?}"
        );
        if (version + 1) % 10 == 0 {
            // A checkpoint commit re-reads no commit file this process wrote or read (a GET of
            // the next one, missing, is how it knows there is none).
            // (A contended table's GET of the version before its PUT is no re-read.)
            let put_at = made
                .iter()
                .position(|c| c.starts_with("put ") && c.ends_with(".json"))
                .unwrap_or_default();
            let reread = |(i, c): (usize, &String)| {
                c.starts_with("get ")
                    && c.rsplit('/')
                        .next()
                        .and_then(|n| n.strip_suffix(".json"))
                        .and_then(|d| d.parse::<u64>().ok())
                        .is_some_and(|v| v < version as u64 || (v == version as u64 && i > put_at))
            };
            assert!(
                !made.iter().enumerate().any(reread),
                "{label} v{version}: a checkpoint commit re-read commit files: {made:?}"
            );
            continue;
        }
        assert!(
            made.len() <= 4,
            "{label} v{version}: a warm append made {} log requests (at most 4): {made:?}",
            made.len()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_appends_make_at_most_four_log_requests() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "requests")?;
        let calls = Arc::new(Calls::default());
        let ing = ingestor(&lake, &calls)?;
        // The first commit creates the table; its handle is kept, so the second is warm too.
        ing.ingest(&[order(0)]).await?;
        eprintln!("{b:?} create: {:?}", calls.take());
        warm_commits(&ing, &calls, 1..20, &format!("{b:?}")).await?;

        // A long log: 485 commits by another writer (a txn of another appId each, as a
        // second producer would leave), then a checkpoint, as the hot path writes them.
        let mut other = TableHandle::open(&Lake::new(&lake.config.lake)?, "raw/order")?;
        other.refresh().await?;
        let first = other.version().unwrap_or_default() + 1;
        let log_store = other.log_store();
        for v in first..first + 485 {
            let entry = format!(
                "{{\"commitInfo\":{{\"timestamp\":1764400000000,\"operation\":\"WRITE\",\"operationParameters\":{{\"mode\":\"Append\"}}}}}}\n{{\"txn\":{{\"appId\":\"other/{v}\",\"version\":{v}}}}}"
            );
            log_store
                .write_commit_entry(
                    v,
                    CommitOrBytes::LogBytes(entry.into_bytes().into()),
                    uuid::Uuid::new_v4(),
                )
                .await?;
        }
        other.refresh().await?;
        other.create_checkpoint().await?;

        // The warm ingestor learns about them once (its look for the next version finds more
        // commits than it reads one by one, so it lists the log once), then is warm again
        // around version 505.
        ing.ingest(&[order(20)]).await?;
        eprintln!("{b:?} catch-up: {} requests", calls.take().len());
        warm_commits(&ing, &calls, 21..30, &format!("{b:?}")).await?;

        // A cold start (a new process) on the long log: how much a table load costs.
        let cold = ingestor(&lake, &calls)?;
        cold.ingest(&[order(30)]).await?;
        let made = calls.take();
        eprintln!("{b:?} cold start: {} requests: {made:?}", made.len());
        // The checkpoint is read with one GET, not one per footer and column chunk.
        let checkpoint_gets = made
            .iter()
            .filter(|c| c.starts_with("get ") && c.contains(".checkpoint."))
            .count();
        assert_eq!(checkpoint_gets, 1, "{b:?} cold start: {made:?}");
        // No LIST: the checkpoint `_last_checkpoint` names (a HEAD) and GETs of the commits
        // after it, four at a time, find the table and answer the load's listing (a LIST
        // costs 12.5 GETs); `_last_checkpoint` once.
        let lists = made.iter().filter(|c| c.starts_with("list")).count();
        assert_eq!(lists, 0, "{b:?} cold start: {made:?}");
        let probes = made
            .iter()
            .filter(|c| c.starts_with("head ") && c.contains(".checkpoint."))
            .count();
        assert_eq!(probes, 1, "{b:?} cold start: {made:?}");
        // 5 commits after the checkpoint, at most 3 looked for past them (four at a time).
        let commit_gets = made
            .iter()
            .filter(|c| c.starts_with("get ") && c.ends_with(".json"))
            .count();
        assert!((5..=8).contains(&commit_gets), "{b:?} cold start: {made:?}");
        let hints = made
            .iter()
            .filter(|c| c.ends_with("_last_checkpoint"))
            .count();
        assert_eq!(hints, 1, "{b:?} cold start: {made:?}");
        warm_commits(&cold, &calls, 31..36, &format!("{b:?} after cold start")).await?;

        // Nothing lost or repeated: offsets 0..36 once each.
        let rows =
            lakestream_core::read::read_table(&Lake::new(&lake.config.lake)?, "raw/order", None)
                .await?;
        assert_eq!(rows.num_rows(), 36, "{b:?}");
    }
    Ok(())
}

/// Two warm instances of the function (two Lambda containers) over one table, the same batches
/// redelivered to both: a handle that plans from a stale head must be caught by its conditional
/// PUT and re-plan, never write an offset twice — one after the other and at the same time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_warm_handles_never_write_an_offset_twice() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "stale-heads")?;
        let calls = Arc::new(Calls::default());
        let (a, other) = (ingestor(&lake, &calls)?, ingestor(&lake, &calls)?);
        let batch = |from: i64| (from..from + 10).map(order).collect::<Vec<_>>();
        a.ingest(&batch(0)).await?;
        other.ingest(&batch(0)).await?; // both handles are warm now
        a.ingest(&batch(10)).await?;
        // `other` finds `a`'s commit before planning (the Kafka path looks first), and its
        // `txn` says offsets 10..20 are in. A head gone stale between that look and the PUT is
        // the `tokio::join!` below: two plans on one head, one PUT fails and re-plans.
        let redelivered = other.ingest(&batch(10)).await?;
        assert_eq!(
            (redelivered.written, redelivered.duplicates),
            (0, 10),
            "{b:?}"
        );
        // The same batch to both at the same time, then new batches to each in turn (a Kafka
        // partition's batches come in order: the `txn` is a per-partition watermark, so two
        // different batches of one partition are never in flight together).
        let (b20, b30, b40) = (batch(20), batch(30), batch(40));
        let (x, y) = tokio::join!(a.ingest(&b20), other.ingest(&b20));
        assert_eq!(x?.written + y?.written, 10, "{b:?}");
        assert_eq!(a.ingest(&b30).await?.written, 10, "{b:?}");
        assert_eq!(other.ingest(&b40).await?.written, 10, "{b:?}");
        let rows =
            lakestream_core::read::read_table(&Lake::new(&lake.config.lake)?, "raw/order", None)
                .await?;
        assert_eq!(rows.num_rows(), 50, "{b:?}");
        let offsets = rows
            .column_by_name("kafka_offset")
            .and_then(|c| {
                c.as_any()
                    .downcast_ref::<deltalake::arrow::array::Int64Array>()
                    .cloned()
            })
            .ok_or_else(|| anyhow::anyhow!("kafka_offset column"))?;
        let distinct: std::collections::BTreeSet<i64> = offsets.iter().flatten().collect();
        assert_eq!(distinct, (0..50).collect(), "{b:?}");
    }
    Ok(())
}

/// The log PUTs among `made` (a failed conditional PUT is one more than the commit's own).
fn log_puts(made: &[String]) -> usize {
    made.iter()
        .filter(|c| c.starts_with("put ") && c.ends_with(".json"))
        .count()
}

/// Two warm instances taking turns on one table (two Lambda containers on one topic, one
/// partition each): each commit looks for a newer commit (one GET, in flight with the kept
/// handle's identity HEAD) before planning, so no conditional PUT fails, not even the first
/// commit that meets the other's (issue 39: 90 of 299 bronze log PUTs failed in a 15-minute
/// bench window before). One instance alone looks all the same: a GET costs 1/12.5 of the failed
/// PUT it saves, and no wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_taking_turns_fail_no_put() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "turns")?;
        let calls = Arc::new(Calls::default());
        let (a, other) = (ingestor(&lake, &calls)?, ingestor(&lake, &calls)?);
        let rec = |partition: i32, off: i64| records::order(partition, off, off + 1, "o1", off);
        a.ingest(&[rec(0, 0)]).await?;
        other.ingest(&[rec(1, 0)]).await?; // both warm; `a`'s head is one behind
        calls.take();
        for off in 1..7 {
            for (ing, partition) in [(&a, 0), (&other, 1)] {
                assert_eq!(ing.ingest(&[rec(partition, off)]).await?.written, 1);
                let made = calls.take();
                assert_eq!(
                    log_puts(&made),
                    1,
                    "{b:?} partition {partition} offset {off}: a commit's PUT failed: {made:?}"
                );
                // The identity HEAD, the other's commit, the GET that finds no newer one, and
                // the PUT (a checkpoint commit reads and writes more).
                if !made.iter().any(|c| c.contains("checkpoint")) {
                    assert!(
                        made.len() <= 4,
                        "{b:?} partition {partition} offset {off}: {made:?}"
                    );
                }
            }
        }
        // `a` alone: one GET of the next commit per commit (a missing one), and no PUT fails.
        for off in 7..12 {
            a.ingest(&[rec(0, off)]).await?;
            let made = calls.take();
            assert_eq!(log_puts(&made), 1, "{b:?} alone {off}: {made:?}");
            let next_gets = made
                .iter()
                .filter(|c| c.starts_with("get ") && c.ends_with(".json"))
                .count();
            // The first also finds the other's last commit.
            let want = if off == 7 { 2 } else { 1 };
            assert_eq!(next_gets, want, "{b:?} alone {off}: {made:?}");
        }
        let rows =
            lakestream_core::read::read_table(&Lake::new(&lake.config.lake)?, "raw/order", None)
                .await?;
        // Offsets 0..7 of partition 1, 0..12 of partition 0.
        assert_eq!(rows.num_rows(), 7 + 12, "{b:?}");
    }
    Ok(())
}
