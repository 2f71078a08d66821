//! A compaction racing other writers of its files, staged on the store hooks of
//! `lakestream_core::intercept` instead of sleeps and slow storage: the other writers run inside
//! the compaction's first read of a data file (it has planned and is reading its bins; it
//! commits after), so the race happens on every run, before any re-read the compaction does on
//! its way to the commit. (They were chaos tests, `tests/chaos/test_concurrency.py`, staged
//! with a delaying proxy and `sleep`.)

use anyhow::{Context, Result};
use deltalake::arrow::array::AsArray;
use deltalake::arrow::compute::{cast, kernels::cmp};
use deltalake::arrow::datatypes::{DataType, Int64Type};
use lakestream_core::inspect::history;
use lakestream_core::intercept::observe_calls;
use lakestream_core::maintenance::{CompactOptions, CompactReport, compact};
use lakestream_core::{KafkaIngestor, Lake};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{TestLake, backends, offsets, records};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// `(partition, offset)` of a record.
type Sent = BTreeSet<(i32, i64)>;

/// The order at `(partition, offset)`: its value, `(id * 7919) % 10000`, spreads a delete by
/// value over every file.
fn order(partition: i32, offset: i64) -> SourceRecord {
    let id = i64::from(partition) * 1_000_000 + offset;
    records::order(
        partition,
        offset,
        id,
        &format!("owner-{}", id % 17),
        order_value(id),
    )
}

fn order_value(id: i64) -> i64 {
    (id * 7919) % 10_000
}

/// Batch `k` of `partition` (7 orders, offsets `13k..13k+7`), ingested; added to `sent`.
async fn append(ing: &KafkaIngestor, partition: i32, k: i64, sent: &mut Sent) -> Result<()> {
    let batch: Vec<SourceRecord> = (k * 13..k * 13 + 7).map(|o| order(partition, o)).collect();
    let r = ing.ingest(&batch).await?;
    anyhow::ensure!(r.written + r.duplicates == batch.len(), "{r:?}");
    sent.extend(batch.iter().map(|r| (r.partition, r.offset)));
    Ok(())
}

/// Batches `ks` of Kafka partitions `0..partitions`, round after round.
async fn appends(
    ing: &KafkaIngestor,
    partitions: i32,
    ks: std::ops::Range<i64>,
    sent: &mut Sent,
) -> Result<()> {
    for k in ks {
        for p in 0..partitions {
            append(ing, p, k, sent).await?;
        }
    }
    Ok(())
}

fn small_files() -> CompactOptions {
    CompactOptions {
        min_small_files: 2,
        ..Default::default()
    }
}

/// Compact `raw/order` on `lake` (its own runtime: `compact` takes a non-Send callback).
fn compact_now(lake: &Lake) -> Result<CompactReport> {
    let rt = tokio::runtime::Runtime::new()?;
    let now = chrono::Utc::now();
    Ok(rt.block_on(compact(lake, "raw/order", &small_files(), now, &|_, _| {}))?)
}

/// The compaction under test, its race staged: `work` (the other writers) runs on its own
/// thread and runtime when the compaction first reads a data file (it has planned and is
/// reading its bins; its commit comes after), and must succeed; the compaction waits for it.
async fn compact_around<F>(lake: &TestLake, work: F) -> Result<CompactReport>
where
    F: FnOnce() -> Result<()> + Send + 'static,
{
    let work = Mutex::new(Some(work));
    let ran = Arc::new(Mutex::new(None::<String>));
    let outcome = ran.clone();
    let at_first_read = observe_calls(Arc::new(move |op, path| {
        let data_file = path.is_some_and(|p| {
            p.as_ref().ends_with(".parquet") && !p.as_ref().contains("_delta_log")
        });
        if op != "get" || !data_file {
            return;
        }
        let Some(work) = work.lock().ok().and_then(|mut w| w.take()) else {
            return;
        };
        let done = std::thread::spawn(work).join();
        if let Ok(mut o) = outcome.lock() {
            *o = Some(format!("{done:?}"));
        }
    }));
    let l = lake.lake()?.with_store_wrapper(at_first_read);
    let r = compact(
        &l,
        "raw/order",
        &small_files(),
        chrono::Utc::now(),
        &|_, _| {},
    )
    .await?;
    let ran = ran.lock().map_err(|_| anyhow::anyhow!("lock"))?.clone();
    anyhow::ensure!(
        ran.as_deref() == Some("Ok(Ok(()))"),
        "the other writers must run inside the compaction and land: {ran:?}"
    );
    Ok(r)
}

/// The `(partition, offset)` pairs of `raw/order`, in order, duplicates kept.
async fn rows(lake: &TestLake) -> Result<Vec<(i32, i64)>> {
    Ok(offsets(&lake.read("raw/order").await?)?)
}

/// A compaction plans; before its first commit lands, appends land, another compaction of the
/// same files commits, and more appends land. The first one must drop its bins (their files are
/// gone), not commit duplicates: every record exactly once, one compaction in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_compactions_while_appends_run() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "two-compactions")?;
        let ing = lake.ingestor()?;
        let mut sent = Sent::new();
        appends(&ing, 4, 0..8, &mut sent).await?;
        let (other, l) = (lake.ingestor()?, lake.lake()?);
        let slow = compact_around(&lake, move || {
            let rt = tokio::runtime::Runtime::new()?;
            let mut more = Sent::new();
            rt.block_on(appends(&other, 4, 8..11, &mut more))?;
            let fast = compact_now(&l)?;
            anyhow::ensure!(fast.partitions_compacted > 0, "{fast:?}");
            rt.block_on(appends(&other, 4, 11..14, &mut more))
        })
        .await?;
        for p in 0..4 {
            for k in 8..14 {
                sent.extend((k * 13..k * 13 + 7).map(|o| (p, o)));
            }
        }
        let got = rows(&lake).await?;
        let unique: Sent = got.iter().copied().collect();
        assert_eq!(
            got.len(),
            unique.len(),
            "{b:?}: {} duplicate rows in raw/order",
            got.len() - unique.len()
        );
        assert_eq!(unique, sent, "{b:?}: every record exactly once");
        assert!(
            !slow.partitions_conflicted.is_empty() && slow.partitions_compacted == 0,
            "{b:?}: the race did not happen: {slow:?}"
        );
        let h = history(&lake.lake()?, "raw/order", None).await?;
        let compactions = h
            .entries
            .iter()
            .filter(|e| e.operation.as_deref() == Some("OPTIMIZE"))
            .count();
        assert_eq!(compactions, 1, "{b:?}: {:?}", h.entries);
    }
    Ok(())
}

/// Another engine deletes rows while a compaction of the same files is between its plan and
/// its commit: deleted rows stay deleted (the compaction must not resurrect them) and every
/// other row stays exactly once. Two rounds, each with new appends and a higher cutoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compaction_racing_a_delete() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "compact-delete")?;
        let ing = lake.ingestor()?;
        let (mut sent, mut deleted) = (Sent::new(), Sent::new());
        for round in 0..2i64 {
            appends(&ing, 3, round * 10..round * 10 + 6, &mut sent).await?;
            let cutoff = 1500 * (round % 5 + 1); // up to 7,500 of 10,000: every round keeps rows
            let l = lake.lake()?;
            let slow = compact_around(&lake, move || {
                tokio::runtime::Runtime::new()?.block_on(delete_below(&l, cutoff))
            })
            .await?;
            deleted.extend(
                sent.iter()
                    .copied()
                    .filter(|&(p, o)| order_value(i64::from(p) * 1_000_000 + o) < cutoff),
            );
            let got = rows(&lake).await?;
            let unique: Sent = got.iter().copied().collect();
            assert_eq!(
                got.len(),
                unique.len(),
                "{b:?}: {} duplicate rows",
                got.len() - unique.len()
            );
            let back = unique.intersection(&deleted).count();
            assert_eq!(back, 0, "{b:?}: {back} deleted rows came back");
            let kept: Sent = sent.difference(&deleted).copied().collect();
            assert_eq!(unique, kept, "{b:?}: rows lost or never sent");
            assert!(
                !slow.partitions_conflicted.is_empty(),
                "{b:?}: the race did not happen: {slow:?}"
            );
        }
    }
    Ok(())
}

/// Delete the rows of `raw/order` whose `order_value` is below `cutoff` as another engine
/// does ([`super::another_engine::delete_where`]).
async fn delete_below(lake: &Lake, cutoff: i64) -> Result<()> {
    super::another_engine::delete_where(lake, "raw/order", move |batch| {
        let value = cast(
            batch.column_by_name("order_value").context("order_value")?,
            &DataType::Int64,
        )?;
        Ok(cmp::lt(
            value.as_primitive::<Int64Type>(),
            &deltalake::arrow::array::Int64Array::new_scalar(cutoff),
        )?)
    })
    .await
}
