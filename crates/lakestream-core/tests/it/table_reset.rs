//! A warm ingestor whose table an operator deleted or re-created (issue 23, defect 3): the
//! handle kept across invocations must notice that the table it loaded is gone, drop its warm
//! state (head, `txn` cache, log-read cache) and load the table again, so that a redelivered
//! batch lands in the new table and a new batch creates a readable table (version 0 with
//! protocol and metadata), never a commit at `head + 1` in an empty log.

use anyhow::Result;
use deltalake::logstore::object_store::{ObjectStore, ObjectStoreExt, path::Path};
use futures::TryStreamExt;
use lakestream_core::Lake;
use lakestream_core::table::TableHandle;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{TestLake, assert_accounted, backends, offsets};

fn order(partition: i32, off: i64) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":{},"order_owner":"o{partition}","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#,
        off + 1
    );
    SourceRecord::new("orders", partition, off, 1_649_067_330_000, json.as_bytes())
}

fn batch(partition: i32, offsets: std::ops::Range<i64>) -> Vec<SourceRecord> {
    offsets.map(|o| order(partition, o)).collect()
}

/// Delete every object of `table` (what `aws s3 rm --recursive` or `rm -r` does).
async fn delete_table(lake: &TestLake, table: &str) -> Result<()> {
    let h = TableHandle::open(&Lake::new(&lake.config.lake)?, table)?;
    let store = h.object_store();
    let paths: Vec<Path> = store
        .list(None)
        .map_ok(|m| m.location)
        .try_collect()
        .await?;
    assert!(!paths.is_empty(), "{table} had no objects to delete");
    for p in paths {
        store.delete(&p).await?;
    }
    assert!(
        TableHandle::open(&Lake::new(&lake.config.lake)?, table)?
            .refresh()
            .await
            .map(|exists| !exists)?,
        "{table} still exists after deleting its objects"
    );
    Ok(())
}

fn expected(parts: &[(i32, std::ops::Range<i64>)]) -> Vec<(i32, i64)> {
    let mut v: Vec<(i32, i64)> = parts
        .iter()
        .flat_map(|(p, r)| r.clone().map(move |o| (*p, o)))
        .collect();
    v.sort();
    v
}

/// The table was deleted between two invocations of a warm ingestor; the batches are
/// redelivered in order (the consumer group was reset): every record ends in the new table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_ingestor_rewrites_a_redelivered_batch_into_a_deleted_table() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "deleted-redelivered")?;
        let ing = lake.ingestor()?;
        assert_eq!(ing.ingest(&batch(0, 0..10)).await?.written, 10, "{b:?}");
        assert_eq!(ing.ingest(&batch(0, 10..20)).await?.written, 10, "{b:?}");
        delete_table(&lake, "raw/order").await?;

        // Same process, same handles: the redelivered batches must be written again.
        for (from, to) in [(0, 10), (10, 20)] {
            let again = ing.ingest(&batch(0, from..to)).await?;
            assert_accounted(&again);
            assert_eq!(
                (again.written, again.duplicates),
                (10, 0),
                "{b:?}: offsets {from}..{to} redelivered after the table was deleted"
            );
        }
        assert_eq!(ing.ingest(&batch(0, 20..30)).await?.written, 10, "{b:?}");
        let rows = lake.read("raw/order").await?;
        assert_eq!(offsets(&rows)?, expected(&[(0, 0..30)]), "{b:?}");
        assert_eq!(lake.version("raw/order").await?, 2, "{b:?}: v0 create + 2");
        // A replay now is a no-op again (the new table's `txn`s are known).
        let replay = ing.ingest(&batch(0, 0..30)).await?;
        assert_eq!((replay.written, replay.duplicates), (0, 30), "{b:?}");
    }
    Ok(())
}

/// The table was deleted and the next batch is new: the warm writer must create the table
/// (version 0, with protocol and metadata), not PUT its old `head + 1` into an empty log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_ingestor_creates_a_deleted_table_again() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "deleted-new")?;
        let ing = lake.ingestor()?;
        for from in [0, 10, 20] {
            ing.ingest(&batch(0, from..from + 10)).await?;
        }
        delete_table(&lake, "raw/order").await?;
        let next = ing.ingest(&batch(0, 30..40)).await?;
        assert_accounted(&next);
        assert_eq!(next.written, 10, "{b:?}");
        assert_eq!(
            next.tables[0].version,
            Some(0),
            "{b:?}: the table is created again"
        );
        let rows = lake.read("raw/order").await?;
        assert_eq!(offsets(&rows)?, expected(&[(0, 30..40)]), "{b:?}");
        assert_eq!(lake.version("raw/order").await?, 0, "{b:?}");
    }
    Ok(())
}

/// Someone else re-created the table at the same path (a different table id) and wrote as many
/// versions as the warm handle knows: the head commit file exists again, with other content.
/// The warm ingestor must not trust its cached `txn`s or its cached commit files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_ingestor_notices_a_table_re_created_by_someone_else() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "recreated")?;
        let ing = lake.ingestor()?;
        for from in [0, 10, 20] {
            assert_eq!(ing.ingest(&batch(0, from..from + 10)).await?.written, 10);
        }
        let old_id = table_id(&lake).await?;
        delete_table(&lake, "raw/order").await?;
        // Another process creates the table again and commits versions 0..=3.
        let other = lake.ingestor()?;
        for from in [0, 10, 20, 30] {
            assert_eq!(
                other.ingest(&batch(1, from..from + 10)).await?.written,
                10,
                "{b:?}"
            );
        }
        assert_ne!(table_id(&lake).await?, old_id, "{b:?}: a new table id");

        // The last batch of partition 0 is redelivered to the warm ingestor.
        let again = ing.ingest(&batch(0, 20..30)).await?;
        assert_accounted(&again);
        assert_eq!(
            (again.written, again.duplicates),
            (10, 0),
            "{b:?}: the re-created table has none of partition 0"
        );
        assert_eq!(ing.ingest(&batch(0, 30..35)).await?.written, 5, "{b:?}");
        let rows = lake.read("raw/order").await?;
        assert_eq!(
            offsets(&rows)?,
            expected(&[(0, 20..35), (1, 0..40)]),
            "{b:?}"
        );
        assert_eq!(lake.version("raw/order").await?, 5, "{b:?}");
        // And the other writer, warm too, carries on on the same table.
        assert_eq!(other.ingest(&batch(1, 40..45)).await?.written, 5, "{b:?}");
        assert_eq!(lake.read("raw/order").await?.num_rows(), 60, "{b:?}");
    }
    Ok(())
}

async fn table_id(lake: &TestLake) -> Result<String> {
    let h = TableHandle::open_existing(&Lake::new(&lake.config.lake)?, "raw/order").await?;
    Ok(h.snapshot()?.metadata().id().to_string())
}
