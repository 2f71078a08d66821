//! Maintenance with an injected clock: compaction keeps rows and time travel, appends racing a
//! compaction survive, vacuum respects retention (and dry-run deletes nothing), orphans go only
//! after retention, manifests list exactly the live files.

use anyhow::Result;
use chrono::{DateTime, Duration, Utc};
use lakestream_core::maintenance::{
    CompactOptions, VacuumOptions, checkpoint, compact, manifest, vacuum,
};
use lakestream_core::{FixedClock, Lake};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{Backend, TestLake, backends, offsets};
use std::sync::Arc;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default()
}

fn order(p: i32, off: i64) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":{},"order_owner":"o{p}","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#,
        p + 1
    );
    SourceRecord::new("orders", p, off, 1_649_067_330_000, json.as_bytes())
}

/// `commits` small appends of 3 records each (one partition: the fixed clock's hour).
async fn small_files(lake: &TestLake, commits: i64) -> Result<()> {
    let ing = lake.ingestor()?;
    for c in 0..commits {
        ing.ingest(&[order(0, c * 3), order(0, c * 3 + 1), order(0, c * 3 + 2)])
            .await?;
    }
    Ok(())
}

fn no_progress(_: u64, _: u64) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_rows_and_time_travel() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "compact")?;
        small_files(&lake, 12).await?;
        let l = Lake::new(&lake.config.lake)?;
        let before = offsets(&lake.read("raw/order").await?)?;
        let v_before = lake.version("raw/order").await?;
        let r = compact(
            &l,
            "raw/order",
            &CompactOptions::default(),
            t0(),
            &no_progress,
        )
        .await?;
        assert_eq!(
            (
                r.files_before,
                r.files_after,
                r.files_removed,
                r.files_added
            ),
            (12, 1, 12, 1),
            "{b:?} {r:?}"
        );
        assert_eq!(
            offsets(&lake.read("raw/order").await?)?,
            before,
            "{b:?}: same rows"
        );
        let old = lakestream_core::read::read_table(&l, "raw/order", Some(v_before)).await?;
        assert_eq!(
            offsets(&old)?,
            before,
            "time travel to the pre-compaction version"
        );
        // dataChange=false on every action of the OPTIMIZE commit.
        let mut h = lakestream_core::table::TableHandle::open(&l, "raw/order")?;
        h.refresh().await?;
        let log = h
            .commit(v_before + 1)
            .await?
            .map(|c| c.into_bytes())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&log);
        assert!(
            text.contains("OPTIMIZE") && !text.contains("\"dataChange\":true"),
            "{text}"
        );
        // Nothing left to do: a second run commits nothing.
        let again = compact(
            &l,
            "raw/order",
            &CompactOptions::default(),
            t0(),
            &no_progress,
        )
        .await?;
        assert_eq!((again.partitions_compacted, again.version), (0, None));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appends_racing_a_compaction_all_survive() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "compact-race")?;
        small_files(&lake, 10).await?;
        let l = Lake::new(&lake.config.lake)?;
        let writer = lake.ingestor()?;
        let appends = async {
            for c in 0..10i64 {
                writer.ingest(&[order(1, c), order(2, c)]).await?;
            }
            anyhow::Ok(())
        };
        let opts = CompactOptions {
            min_small_files: 2,
            ..Default::default()
        };
        let (a, r) = tokio::join!(appends, compact(&l, "raw/order", &opts, t0(), &no_progress));
        a?;
        let r = r?;
        assert!(r.partitions_conflicted.is_empty(), "{r:?}");
        let got = offsets(&lake.read("raw/order").await?)?;
        let mut expected: Vec<(i32, i64)> = (0..30).map(|o| (0, o)).collect();
        expected.extend((0..10).map(|o| (1, o)));
        expected.extend((0..10).map(|o| (2, o)));
        expected.sort();
        assert_eq!(got, expected, "{b:?}: no row lost or duplicated");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_respects_retention_dry_run_and_orphans() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "vacuum")?;
        small_files(&lake, 6).await?;
        let l = Lake::new(&lake.config.lake)?;
        compact(
            &l,
            "raw/order",
            &CompactOptions {
                min_small_files: 2,
                ..Default::default()
            },
            t0(),
            &no_progress,
        )
        .await?;
        // A crashed writer's file: written, never committed.
        let mut h = lakestream_core::table::TableHandle::open(&l, "raw/order")?;
        h.refresh().await?;
        let orphan = deltalake::Path::from("year=25/part-00000-orphan-c000.snappy.parquet");
        deltalake::logstore::object_store::ObjectStoreExt::put(
            &h.object_store(),
            &orphan,
            b"PAR1 not really".to_vec().into(),
        )
        .await?;

        let now = Arc::new(FixedClock::new(Utc::now()));
        let r = vacuum(&l, "raw/order", &VacuumOptions::default(), now.clone()).await?;
        assert!(
            r.files.is_empty(),
            "{b:?}: inside the 168 h window nothing goes: {r:?}"
        );
        let short = VacuumOptions {
            retention: Some(Duration::hours(1)),
            ..Default::default()
        };
        assert!(
            vacuum(&l, "raw/order", &short, now.clone()).await.is_err(),
            "shorter than the table's window needs force"
        );

        now.set(Utc::now() + Duration::days(8));
        let dry = VacuumOptions {
            dry_run: true,
            ..Default::default()
        };
        let r = vacuum(&l, "raw/order", &dry, now.clone()).await?;
        assert_eq!(
            r.files.len(),
            7,
            "{b:?}: 6 compacted-away files + the orphan: {r:?}"
        );
        assert!(r.files.iter().any(|f| f.contains("orphan")));
        assert!(r.bytes > 0);
        let rows = lake.read("raw/order").await?.num_rows();
        let r = vacuum(&l, "raw/order", &VacuumOptions::default(), now.clone()).await?;
        assert_eq!(
            r.files.len(),
            7,
            "{b:?}: dry run deleted nothing, the real run deletes them"
        );
        assert_eq!(lake.read("raw/order").await?.num_rows(), rows);
        let again = vacuum(&l, "raw/order", &VacuumOptions::default(), now).await?;
        assert!(again.files.is_empty(), "{again:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_list_exactly_the_live_files() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "manifest")?;
        small_files(&lake, 4).await?;
        let l = Lake::new(&lake.config.lake)?;
        let live = |h: &lakestream_core::table::TableHandle| -> Result<Vec<String>> {
            let root = l.table_url("raw/order")?;
            let mut v: Vec<String> = h
                .snapshot()?
                .log_data()
                .iter()
                .map(|f| root.join(f.path().as_ref()).map(|u| u.to_string()))
                .collect::<Result<_, _>>()?;
            v.sort();
            Ok(v)
        };
        let read_manifest = |h: &lakestream_core::table::TableHandle| {
            let store = h.object_store();
            async move {
                let p = deltalake::Path::from(
                    "_symlink_format_manifest/year=25/month=11/day=29/hour=07/manifest",
                );
                let bytes = deltalake::logstore::object_store::ObjectStoreExt::get(&store, &p)
                    .await?
                    .bytes()
                    .await?;
                let mut v: Vec<String> = String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(str::to_string)
                    .collect();
                v.sort();
                anyhow::Ok(v)
            }
        };
        let r = manifest(&l, "raw/order").await?;
        assert_eq!((r.written, r.removed, r.unchanged), (1, 0, 0), "{b:?}");
        let mut h = lakestream_core::table::TableHandle::open(&l, "raw/order")?;
        h.refresh().await?;
        assert_eq!(read_manifest(&h).await?, live(&h)?);
        assert_eq!(
            manifest(&l, "raw/order").await?.unchanged,
            1,
            "no change, nothing rewritten"
        );

        compact(
            &l,
            "raw/order",
            &CompactOptions {
                min_small_files: 2,
                ..Default::default()
            },
            t0(),
            &no_progress,
        )
        .await?;
        let now = Arc::new(FixedClock::new(Utc::now() + Duration::days(8)));
        vacuum(&l, "raw/order", &VacuumOptions::default(), now).await?;
        assert_eq!(manifest(&l, "raw/order").await?.written, 1);
        h.refresh().await?;
        let m = read_manifest(&h).await?;
        assert_eq!(m, live(&h)?, "{b:?}: after optimize + vacuum");
        assert_eq!(m.len(), 1);
        assert!(
            m[0].starts_with(if b == Backend::S3 { "s3://" } else { "file://" }),
            "absolute URIs: {m:?}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_on_demand_and_log_cleanup_after_retention() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "checkpoint-cleanup")?;
    small_files(&lake, 5).await?;
    let l = Lake::new(&lake.config.lake)?;
    let now = FixedClock::new(Utc::now());
    let r = checkpoint(&l, "raw/order", true, &now, &[]).await?;
    assert_eq!((r.checkpoint_version, r.logs_removed), (Some(4), 0));
    let log = std::path::Path::new(&lake.config.lake.root).join("raw/order/_delta_log");
    assert!(log.join("00000000000000000004.checkpoint.parquet").exists());
    now.set(Utc::now() + Duration::days(31));
    let r = checkpoint(&l, "raw/order", false, &now, &[]).await?;
    assert_eq!(r.checkpoint_version, None, "not due: no new versions");
    assert_eq!(
        r.logs_removed, 4,
        "commits 0..3 are past logRetentionDuration and before the checkpoint"
    );
    assert!(log.join("00000000000000000004.json").exists());
    assert_eq!(
        lake.read("raw/order").await?.num_rows(),
        15,
        "table still loads from the checkpoint"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zorder_rewrites_sorted_or_refuses_clearly() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "zorder")?;
    let ing = lake.ingestor()?;
    // Values arrive in descending order across commits.
    for c in 0..4i64 {
        let recs: Vec<SourceRecord> = (0..3).map(|k| {
            let off = c * 3 + k;
            let json = format!(r#"{{"order_id":{},"order_owner":"o","order_value":{},"timestamp":"2022-04-04T10:15:30Z"}}"#, off % 2, 100 - off);
            SourceRecord::new("orders", 0, off, 1, json.as_bytes())
        }).collect();
        ing.ingest(&recs).await?;
    }
    let l = Lake::new(&lake.config.lake)?;
    let missing = CompactOptions {
        zorder_by: vec!["nope".into()],
        ..Default::default()
    };
    assert!(
        compact(&l, "raw/order", &missing, t0(), &no_progress)
            .await
            .is_err_and(|e| e.to_string().contains("`nope`"))
    );
    let tiny = CompactOptions {
        zorder_by: vec!["order_value".into()],
        memory_budget: 16,
        ..Default::default()
    };
    assert!(
        compact(&l, "raw/order", &tiny, t0(), &no_progress)
            .await
            .is_err_and(|e| e.to_string().contains("budget"))
    );
    let ok = CompactOptions {
        zorder_by: vec!["order_value".into()],
        ..Default::default()
    };
    let r = compact(&l, "raw/order", &ok, t0(), &no_progress).await?;
    assert_eq!(r.files_after, 1);
    let rows = lake.read("raw/order").await?;
    let values = lakestream_testkit::strings(&rows, "order_value")?;
    let values: Vec<i64> = values
        .into_iter()
        .flatten()
        .filter_map(|v| v.parse().ok())
        .collect();
    let mut sorted = values.clone();
    sorted.sort();
    assert_eq!(values, sorted, "one z-order column = sorted by it");
    assert_eq!(values.len(), 12);
    Ok(())
}
