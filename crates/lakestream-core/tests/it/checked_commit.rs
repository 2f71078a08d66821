//! The checked commit path (issue "one checked commit path"): every kind of change — create,
//! append, dead letters, compaction — lands exactly once, whatever runs next to it. Race tests
//! send the *same* records from each writer and count distinct rows.

use crate::faults::Faults;
use anyhow::Result;
use deltalake::kernel::{DataType, PrimitiveType, StructField};
use lakestream_core::access_log::{AccessLogIngestor, LocalObjects, ObjectOutcome};
use lakestream_core::maintenance::{CompactOptions, compact};
use lakestream_core::{FixedClock, Lake};
use lakestream_formats::notification::LogObject;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{Backend, TestLake, backends, ingest_time, offsets, strings};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};

const PLAIN: &[u8] =
    include_bytes!("../../../../tests/fixtures/access-logs/2026-11-29-08-00-00-A1B2C3D4E5F6.log");

fn order(p: i32, off: i64) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":{},"order_owner":"o{p}","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#,
        off + 1
    );
    SourceRecord::new("orders", p, off, 1_649_067_330_000, json.as_bytes())
}

fn expected(recs: &[SourceRecord]) -> Vec<(i32, i64)> {
    let mut v: Vec<(i32, i64)> = recs.iter().map(|r| (r.partition, r.offset)).collect();
    v.sort();
    v.dedup();
    v
}

fn no_progress(_: u64, _: u64) {}

/// A lake over `lake`'s config with `faults` installed.
fn faulty(lake: &TestLake, faults: &Arc<Faults>) -> Result<Lake> {
    Ok(faults.install(Lake::new(&lake.config.lake)?))
}

// Defect 1: two compactions planned from the same snapshot must not both land; appends running
// next to them all survive.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_compactions_at_once_keep_every_row_once() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "two-compactions")?;
        let ing = lake.ingestor()?;
        let mut sent = Vec::new();
        for c in 0..12 {
            let batch: Vec<SourceRecord> = (0..3).map(|k| order(0, c * 3 + k)).collect();
            ing.ingest(&batch).await?;
            sent.extend(batch);
        }
        // Both plan from the same snapshot (the barrier), then race to commit.
        let barrier = Arc::new(Barrier::new(2));
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let l = Lake::new(&lake.config.lake)?;
            let barrier = barrier.clone();
            tasks.push(std::thread::spawn(move || -> Result<usize> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let once = std::sync::Once::new();
                let progress = |_: u64, _: u64| {
                    once.call_once(|| {
                        barrier.wait();
                    })
                };
                let r = rt.block_on(compact(
                    &l,
                    "raw/order",
                    &CompactOptions::default(),
                    ingest_time(),
                    &progress,
                ))?;
                Ok(r.partitions_compacted)
            }));
        }
        // Appends keep running while both compactions plan, rewrite and commit.
        for c in 0..8 {
            let batch: Vec<SourceRecord> = (0..3).map(|k| order(1, c * 3 + k)).collect();
            ing.ingest(&batch).await?;
            sent.extend(batch);
        }
        let mut compacted = 0;
        for t in tasks {
            compacted += t
                .join()
                .map_err(|_| anyhow::anyhow!("compaction thread panicked"))??;
        }
        let rows = lake.read("raw/order").await?;
        assert_eq!(
            offsets(&rows)?,
            expected(&sent),
            "{b:?}: every row exactly once"
        );
        assert_eq!(
            compacted, 1,
            "{b:?}: exactly one of the two compactions lands"
        );
    }
    Ok(())
}

// Defect 3 (and 4): records dead-lettered after an earlier dead-letter commit of the same
// invocation are all kept, none counted as a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_exact_when_a_table_rejects_the_write() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "dl-exact")?;
        // A table the pipeline cannot commit to, for good: its protocol needs a writer feature
        // that no version of delta-rs knows (decoding succeeds, the commit is refused).
        future_protocol_table(&lake, "raw/order").await?;
        let mut batch: Vec<SourceRecord> = (0..10).map(|o| order(0, o)).collect();
        batch[5] = SourceRecord::new("orders", 0, 5, 1_649_067_330_000, b"not json");
        let ing = lake.ingestor()?;
        let r = ing.ingest(&batch).await?;
        assert_eq!(
            (r.written, r.dead_lettered, r.duplicates),
            (0, 10, 0),
            "{b:?}: {r:?}"
        );
        let dl = lake.read("dead_letters").await?;
        let mut got: Vec<(Option<String>, Option<String>)> = strings(&dl, "partition")?
            .into_iter()
            .zip(strings(&dl, "offset")?)
            .collect();
        got.sort_by_key(|(_, o)| o.as_deref().and_then(|o| o.parse::<i64>().ok()));
        let want: Vec<(Option<String>, Option<String>)> = (0..10)
            .map(|o| (Some("0".to_string()), Some(o.to_string())))
            .collect();
        assert_eq!(got, want, "{b:?}: every record once in dead letters");
        let again = ing.ingest(&batch).await?;
        assert_eq!((again.dead_lettered, again.duplicates), (0, 10), "{b:?}");
        assert_eq!(lake.read("dead_letters").await?.num_rows(), 10, "{b:?}");
    }
    Ok(())
}

/// Create `table` with the raw/order schema and a protocol that requires an unknown writer
/// feature, by writing its first commit directly.
async fn future_protocol_table(lake: &TestLake, table: &str) -> Result<()> {
    use deltalake::logstore::object_store::{ObjectStoreExt, path::Path};
    let l = Lake::new(&lake.config.lake)?;
    let h = lakestream_core::table::TableHandle::open(&l, table)?;
    let field = |n: &str, t: &str| serde_json::json!({"name": n, "type": t, "nullable": true, "metadata": {}});
    let schema = serde_json::json!({"type": "struct", "fields": [
        field("order_id", "integer"), field("order_owner", "string"), field("order_value", "integer"),
        field("timestamp", "timestamp"), field("kafka_partition", "integer"), field("kafka_offset", "long"),
        field("year", "string"), field("month", "string"), field("day", "string"), field("hour", "string")]});
    let commit = [
        serde_json::json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
            "writerFeatures": ["lakestreamTestFutureFeature"]}}),
        serde_json::json!({"metaData": {"id": "00000000-0000-0000-0000-000000000001",
            "format": {"provider": "parquet", "options": {}}, "schemaString": schema.to_string(),
            "partitionColumns": ["year", "month", "day", "hour"], "configuration": {},
            "createdTime": 1_764_400_000_000i64}}),
    ]
    .iter()
    .map(|v| v.to_string())
    .collect::<Vec<_>>()
    .join("\n");
    h.object_store()
        .put(
            &Path::from("_delta_log/00000000000000000000.json"),
            commit.into_bytes().into(),
        )
        .await?;
    Ok(())
}

// Defect 4: duplicates are reported by reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_are_reported_by_reason() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "dup-reasons")?;
    let ing = lake.ingestor()?;
    let batch = vec![order(0, 0), order(0, 1), order(0, 1)];
    let r = serde_json::to_value(ing.ingest(&batch).await?)?;
    assert_eq!(r["written"], 2);
    assert_eq!(r["duplicates_repeated_in_batch"], 1, "{r}");
    assert_eq!(r["duplicates_already_committed"], 0, "{r}");
    let r = serde_json::to_value(ing.ingest(&batch[..2]).await?)?;
    assert_eq!(r["duplicates_already_committed"], 2, "{r}");
    assert_eq!(r["duplicates_repeated_in_batch"], 0, "{r}");
    Ok(())
}

// Defect 5: files written on a failed attempt are reused only for exactly the same records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_files_never_re_add_rows_another_writer_committed() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "reuse")?;
        let plain = Arc::new(lake.ingestor()?);
        plain.ingest(&[order(1, 0)]).await?; // the table exists
        let batch: Vec<SourceRecord> = (0..10).map(|o| order(0, o)).collect();
        // While A's commit is in flight, B commits the first half of the same range.
        let faults = Arc::new(Faults::default());
        let first_half = batch[..5].to_vec();
        let other = plain.clone();
        // B's outcome, checked below: B must have committed its half (a failed B would leave
        // A nothing to rebase on and the test would not test the reuse).
        let other_outcome = Arc::new(std::sync::Mutex::new(None));
        let other_slot = other_outcome.clone();
        *faults
            .before_log_put
            .lock()
            .map_err(|_| anyhow::anyhow!("lock"))? = Some(Box::pin(async move {
            let r = other
                .ingest(&first_half)
                .await
                .map(|r| (r.written, r.duplicates))
                .map_err(|e| e.to_string());
            if let Ok(mut slot) = other_slot.lock() {
                *slot = Some(r);
            }
        }));
        let a = lakestream_core::KafkaIngestor::with_lake(
            lake.config.clone(),
            faulty(&lake, &faults)?,
            Arc::new(FixedClock::new(ingest_time())),
        );
        let r = a.ingest(&batch).await?;
        let other_result = other_outcome
            .lock()
            .map_err(|_| anyhow::anyhow!("lock"))?
            .clone();
        assert_eq!(
            other_result,
            Some(Ok((5, 0))),
            "{b:?}: the other writer commits the first half while A's commit is in flight"
        );
        assert_eq!((r.written, r.duplicates), (5, 5), "{b:?}: {r:?}");
        let mut want = expected(&batch);
        want.push((1, 0));
        want.sort();
        assert_eq!(offsets(&lake.read("raw/order").await?)?, want, "{b:?}");
    }
    Ok(())
}

// Defect 6: a transient error on the compaction commit is not a "concurrent change".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_commit_error_is_retried_not_reported_as_conflict() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "compact-5xx")?;
        let ing = lake.ingestor()?;
        let mut sent = Vec::new();
        for c in 0..6 {
            let batch: Vec<SourceRecord> = (0..3).map(|k| order(0, c * 3 + k)).collect();
            ing.ingest(&batch).await?;
            sent.extend(batch);
        }
        let faults = Arc::new(Faults::default());
        faults.refuse.store(1, Ordering::SeqCst);
        let r = compact(
            &faulty(&lake, &faults)?,
            "raw/order",
            &CompactOptions::default(),
            ingest_time(),
            &no_progress,
        )
        .await?;
        assert!(r.partitions_conflicted.is_empty(), "{b:?}: {r:?}");
        assert_eq!(
            (r.partitions_compacted, r.files_after),
            (1, 1),
            "{b:?}: {r:?}"
        );
        assert_eq!(offsets(&lake.read("raw/order").await?)?, expected(&sent));
    }
    Ok(())
}

// Defect 6: one access-log table's permanent error does not fail the other tables' objects;
// the rejected rows go to dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_rejecting_access_log_table_does_not_fail_the_batch() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "al-permanent")?;
    let l = Lake::new(&lake.config.lake)?;
    let h = lakestream_core::table::TableHandle::open(&l, "access_logs/datalake-prod")?;
    deltalake::operations::create::CreateBuilder::new()
        .with_log_store(h.log_store())
        .with_columns([StructField::new(
            "required_elsewhere",
            DataType::Primitive(PrimitiveType::String),
            false,
        )])
        .await?;
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("raw-logs/logs"))?;
    std::fs::write(dir.path().join("raw-logs/logs/a.log"), PLAIN)?;
    let source = LocalObjects(dir.path().to_path_buf());
    let ing = AccessLogIngestor::new(
        lake.config.clone(),
        Arc::new(FixedClock::new(ingest_time())),
    )?;
    let obj = LogObject {
        bucket: "raw-logs".into(),
        key: "logs/a.log".into(),
        alt_key: None,
        etag: Some("e1".into()),
        event_time: None,
    };
    let r = ing.ingest(std::slice::from_ref(&obj), &source).await?;
    assert!(!r.failed(&obj), "a permanent error is not retried: {r:?}");
    assert!(
        !matches!(r.objects[0].1, ObjectOutcome::AlreadyCommitted),
        "{r:?}"
    );
    let dl = lake.read("dead_letters").await?;
    let targets = strings(&dl, "target_table")?;
    assert!(
        targets
            .iter()
            .any(|t| t.as_deref() == Some("access_logs/datalake-prod")),
        "the rejected rows are dead-lettered with their table: {targets:?}"
    );
    Ok(())
}

// Defect 9: the same batch delivered twice at once on a table that does not exist yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn same_batch_twice_at_once_on_a_new_table_lands_once() -> Result<()> {
    for b in backends() {
        for attempt in 0..6 {
            let lake = TestLake::new(b, "same-batch-new")?;
            let mut batch: Vec<SourceRecord> = (0..4).map(|o| order(0, o)).collect();
            batch.push(SourceRecord::new("orders", 0, 4, 1, b"{bad"));
            let (x, y) = (lake.ingestor()?, lake.ingestor()?);
            let (rx, ry) = tokio::join!(x.ingest(&batch), y.ingest(&batch));
            let (rx, ry) = (rx?, ry?);
            assert_eq!(
                rx.written + ry.written,
                4,
                "{b:?} #{attempt}: {rx:?} {ry:?}"
            );
            let rows = lake.read("raw/order").await?;
            assert_eq!(offsets(&rows)?, expected(&batch[..4]), "{b:?} #{attempt}");
            let dl = lake.read("dead_letters").await?;
            assert_eq!(
                dl.num_rows(),
                1,
                "{b:?} #{attempt}: {:?} {:?}",
                strings(&dl, "offset")?,
                strings(&dl, "error")?
            );
            assert_eq!(
                lake.version("raw/order").await?,
                0,
                "{b:?} #{attempt}: one commit"
            );
            // And on the now existing table.
            let next: Vec<SourceRecord> = (5..9).map(|o| order(0, o)).collect();
            let (rx, ry) = tokio::join!(x.ingest(&next), y.ingest(&next));
            let (rx, ry) = (rx?, ry?);
            assert_eq!(
                rx.written + ry.written,
                4,
                "{b:?} #{attempt}: {rx:?} {ry:?}"
            );
            let mut all = batch[..4].to_vec();
            all.extend(next);
            let rows = lake.read("raw/order").await?;
            assert_eq!(
                offsets(&rows)?,
                expected(&all),
                "{b:?} #{attempt}: existing table"
            );
        }
    }
    Ok(())
}

// Defect 9 (access logs): the same object twice at once on a new table.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn same_log_object_twice_at_once_on_a_new_table_lands_once() -> Result<()> {
    for b in backends() {
        for attempt in 0..6 {
            let lake = TestLake::new(b, "same-object-new")?;
            let dir = tempfile::tempdir()?;
            std::fs::create_dir_all(dir.path().join("raw-logs/logs"))?;
            std::fs::write(dir.path().join("raw-logs/logs/a.log"), PLAIN)?;
            let source = LocalObjects(dir.path().to_path_buf());
            let obj = [LogObject {
                bucket: "raw-logs".into(),
                key: "logs/a.log".into(),
                alt_key: None,
                etag: Some("e1".into()),
                event_time: None,
            }];
            let mk = || {
                AccessLogIngestor::new(
                    lake.config.clone(),
                    Arc::new(FixedClock::new(ingest_time())),
                )
            };
            let (x, y) = (mk()?, mk()?);
            let (rx, ry) = tokio::join!(x.ingest(&obj, &source), y.ingest(&obj, &source));
            let (rx, ry) = (rx?, ry?);
            assert_eq!(
                rx.rows_written + ry.rows_written,
                4,
                "{b:?} #{attempt}: {rx:?} {ry:?}"
            );
            let rows = lake.read("access_logs/datalake-prod").await?;
            assert_eq!(rows.num_rows(), 4, "{b:?} #{attempt}");
            assert_eq!(
                lake.read("dead_letters").await?.num_rows(),
                1,
                "{b:?} #{attempt}"
            );
            // And another object twice at once on the now existing table.
            std::fs::write(dir.path().join("raw-logs/logs/b.log"), PLAIN)?;
            let obj_b = [LogObject {
                key: "logs/b.log".into(),
                etag: Some("e2".into()),
                ..obj[0].clone()
            }];
            let (rx, ry) = tokio::join!(x.ingest(&obj_b, &source), y.ingest(&obj_b, &source));
            let (rx, ry) = (rx?, ry?);
            assert_eq!(
                rx.rows_written + ry.rows_written,
                4,
                "{b:?} #{attempt}: {rx:?} {ry:?}"
            );
            let rows = lake.read("access_logs/datalake-prod").await?;
            assert_eq!(rows.num_rows(), 8, "{b:?} #{attempt}: existing table");
            assert_eq!(
                lake.read("dead_letters").await?.num_rows(),
                2,
                "{b:?} #{attempt}"
            );
        }
    }
    Ok(())
}

// Defect 9 (related): a create whose log PUT landed, then the retried PUT was refused because
// the object now exists (object_store's own retry of a 500), is one CREATE, reported as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landed_but_unseen_write_is_reported_as_written() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "landed-unseen")?;
        let faults = Arc::new(Faults::default());
        faults.land_then_exists.store(2, Ordering::SeqCst);
        let ing = lakestream_core::KafkaIngestor::with_lake(
            lake.config.clone(),
            faulty(&lake, &faults)?,
            Arc::new(FixedClock::new(ingest_time())),
        );
        let first: Vec<SourceRecord> = (0..4).map(|o| order(0, o)).collect();
        let r = ing.ingest(&first).await?;
        assert_eq!(r.written, 4, "{b:?}: the create landed: {r:?}");
        let next: Vec<SourceRecord> = (4..8).map(|o| order(0, o)).collect();
        let r = ing.ingest(&next).await?;
        assert_eq!(r.written, 4, "{b:?}: the append landed: {r:?}");
        assert_eq!(
            lake.version("raw/order").await?,
            1,
            "{b:?}: two commits, no second CREATE"
        );
        let mut all = first.clone();
        all.extend(next);
        assert_eq!(
            offsets(&lake.read("raw/order").await?)?,
            expected(&all),
            "{b:?}"
        );
    }
    Ok(())
}
