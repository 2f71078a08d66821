//! Dead-letter `txn` growth (issue 23, defect 7): a burst of bad Kafka records must leave
//! O(partitions) `txn` actions in the dead-letter table, not one per record (each kept 30 days
//! and loaded by every later dead-letter write), and redelivery must still dead-letter nothing
//! twice — also when a later dead-letter write of the same partition covers offsets below the
//! highest one already dead-lettered (the whole batch dead-lettered after its bad records).

use anyhow::Result;
use lakestream_core::Lake;
use lakestream_core::table::TableHandle;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{TestLake, assert_accounted, backends, strings};
use std::collections::BTreeMap;

/// Offset `off` of `partition`: valid JSON for `orders` unless `bad`.
fn rec(partition: i32, off: i64, bad: bool) -> SourceRecord {
    let json = if bad {
        format!("not json {off}")
    } else {
        format!(
            r#"{{"order_id":{off},"order_owner":"o","order_value":1,"timestamp":"2022-04-04T10:15:30Z"}}"#
        )
    };
    SourceRecord::new("orders", partition, off, 1_649_067_330_000, json.as_bytes())
}

/// Every `txn` appId of the dead-letter table, with its version.
async fn dead_letter_txns(lake: &TestLake) -> Result<BTreeMap<String, i64>> {
    let mut h = TableHandle::open_existing(&Lake::new(&lake.config.lake)?, "dead_letters").await?;
    let all = h
        .all_txns()
        .await?
        .ok_or_else(|| anyhow::anyhow!("txns of dead_letters could not be loaded"))?;
    Ok(all.into_iter().collect())
}

/// (partition, offset) of every dead letter, sorted (repeats kept: they are the bug).
async fn letters(lake: &TestLake) -> Result<Vec<(i64, i64)>> {
    let b = lake.read("dead_letters").await?;
    let p = strings(&b, "partition")?;
    let o = strings(&b, "offset")?;
    let mut v: Vec<(i64, i64)> = p
        .into_iter()
        .zip(o)
        .filter_map(|(p, o)| Some((p?.parse().ok()?, o?.parse().ok()?)))
        .collect();
    v.sort();
    Ok(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_bad_records_leaves_one_txn_per_partition() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "dl-growth")?;
        let ing = lake.ingestor()?;
        // 3 partitions x 100 records, every other one bad, in two batches per partition.
        let batch = |from: i64| -> Vec<SourceRecord> {
            (0..3)
                .flat_map(|p| (from..from + 50).map(move |o| rec(p, o, o % 2 == 1)))
                .collect()
        };
        for from in [0, 50] {
            let sent = batch(from);
            let r = ing.ingest(&sent).await?;
            assert_accounted(sent.len(), &r);
            assert_eq!((r.written, r.dead_lettered), (75, 75), "{b:?}");
        }
        let txns = dead_letter_txns(&lake).await?;
        assert!(
            txns.len() <= 3,
            "{b:?}: 150 dead letters over 3 partitions left {} txn appIds (at most one per \
             partition expected): {:?}",
            txns.len(),
            txns.keys().take(5).collect::<Vec<_>>()
        );
        // Redelivery of both batches: nothing dead-lettered twice, nothing written twice.
        for from in [0, 50] {
            let sent = batch(from);
            let again = ing.ingest(&sent).await?;
            assert_accounted(sent.len(), &again);
            assert_eq!(
                (again.written, again.dead_lettered, again.duplicates),
                (0, 0, 150),
                "{b:?}"
            );
        }
        // A cold process (no warm cache) redelivering the first batch: the same.
        let cold = lake.ingestor()?.ingest(&batch(0)).await?;
        assert_eq!((cold.dead_lettered, cold.duplicates), (0, 150), "{b:?}");
        let expected: Vec<(i64, i64)> = (0..3)
            .flat_map(|p| (0..100).filter(|o| o % 2 == 1).map(move |o| (p, o)))
            .collect();
        assert_eq!(
            letters(&lake).await?,
            expected,
            "{b:?}: each bad record once"
        );
    }
    Ok(())
}

/// The whole batch dead-lettered after its bad records were (a permanent failure the handler
/// turns into "dead-letter the batch"): the offsets below the highest bad one are new letters,
/// the bad ones are already there — each offset once, also when delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_dead_letter_write_below_the_highest_offset_is_not_skipped() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "dl-below")?;
        let ing = lake.ingestor()?;
        let batch: Vec<SourceRecord> = (0..10).map(|o| rec(0, o, o == 3 || o == 8)).collect();
        // The bad records alone first (what the ingest's first dead-letter commit writes).
        let bad: Vec<SourceRecord> = batch
            .iter()
            .filter(|r| r.offset % 5 == 3)
            .cloned()
            .collect();
        let first = ing.dead_letter_batch(&bad, "bad record").await?;
        assert_eq!(first.dead_lettered, 2, "{b:?}");
        // Then the whole batch.
        let whole = ing
            .dead_letter_batch(&batch, "the batch cannot be ingested")
            .await?;
        assert_eq!(
            (whole.dead_lettered, whole.duplicates),
            (8, 2),
            "{b:?}: offsets 0..10 but 3 and 8 are new dead letters"
        );
        let again = ing
            .dead_letter_batch(&batch, "the batch cannot be ingested")
            .await?;
        assert_eq!((again.dead_lettered, again.duplicates), (0, 10), "{b:?}");
        let cold = lake
            .ingestor()?
            .dead_letter_batch(&batch, "the batch cannot be ingested")
            .await?;
        assert_eq!((cold.dead_lettered, cold.duplicates), (0, 10), "{b:?}");
        let expected: Vec<(i64, i64)> = (0..10).map(|o| (0, o)).collect();
        assert_eq!(letters(&lake).await?, expected, "{b:?}: each offset once");
    }
    Ok(())
}
