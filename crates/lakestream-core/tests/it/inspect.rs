//! History and time travel on every backend: what each commit did, the rows as of a version
//! or a time, and clear errors for versions that are not there.

use anyhow::{Context, Result};
use chrono::{Duration, Utc};
use lakestream_core::inspect::{AsOf, history, read_as_of, resolve_version};
use lakestream_core::maintenance::{CompactOptions, checkpoint, compact};
use lakestream_core::{Error, FixedClock, Lake};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{Backend, TestLake, backends, offsets};

fn order(p: i32, off: i64) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":{},"order_owner":"o{p}","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#,
        p + 1
    );
    SourceRecord::new("orders", p, off, 1_649_067_330_000, json.as_bytes())
}

fn batch(p: i32, from: i64, n: i64) -> Vec<SourceRecord> {
    (from..from + n).map(|o| order(p, o)).collect()
}

fn pairs(p: i32, r: std::ops::Range<i64>) -> Vec<(i32, i64)> {
    r.map(|o| (p, o)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_and_versions_around_a_compaction() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "history")?;
        let ing = lake.ingestor()?;
        ing.ingest(&batch(0, 0, 3)).await?; // v0 (creates the table)
        ing.ingest(&batch(0, 3, 4)).await?; // v1
        ing.ingest(&batch(1, 0, 5)).await?; // v2
        let l = Lake::new(&lake.config.lake)?;
        let opts = CompactOptions {
            min_small_files: 2,
            ..Default::default()
        };
        let t0 = chrono::DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default();
        let r = compact(&l, "raw/order", &opts, t0, &|_, _| {}).await?;
        assert_eq!(r.files_removed, 3, "{b:?}: {r:?}");

        let h = history(&l, "raw/order", None).await?;
        assert_eq!((h.latest, h.oldest_in_log), (3, 0), "{b:?}");
        let versions: Vec<u64> = h.entries.iter().map(|e| e.version).collect();
        assert_eq!(versions, [3, 2, 1, 0], "{b:?}: newest first");
        let c = &h.entries[0];
        assert_eq!(c.operation.as_deref(), Some("OPTIMIZE"), "{b:?}: {c:?}");
        assert!(!c.data_change, "{b:?}: compaction is dataChange=false");
        assert_eq!(
            (c.files_added, c.rows_added, c.files_removed),
            (1, 12, 3),
            "{b:?}"
        );
        assert!(c.commit_id.is_some(), "{b:?}: our commit id is recorded");
        let w = &h.entries[1];
        assert_eq!(w.operation.as_deref(), Some("WRITE"), "{b:?}");
        assert!(w.data_change);
        assert_eq!((w.files_added, w.rows_added), (1, 5), "{b:?}");
        assert_eq!(w.txns, [("orders-raw/orders/1".to_string(), 4)], "{b:?}");
        assert!(h.entries[3].metadata, "{b:?}: v0 created the table");
        assert_eq!(history(&l, "raw/order", Some(2)).await?.entries.len(), 2);

        // Version 1: exactly the rows of the first two commits.
        let (v, rows) = read_as_of(&l, "raw/order", AsOf::Version(1)).await?;
        assert_eq!(v, 1);
        assert_eq!(offsets(&rows)?, pairs(0, 0..7), "{b:?}");
        // Before and after the compaction: the same rows.
        let (_, before) = read_as_of(&l, "raw/order", AsOf::Version(2)).await?;
        let (_, after) = read_as_of(&l, "raw/order", AsOf::Latest).await?;
        let mut expected = pairs(0, 0..7);
        expected.extend(pairs(1, 0..5));
        assert_eq!(offsets(&before)?, expected, "{b:?}");
        assert_eq!(offsets(&after)?, expected, "{b:?}");

        let err = read_as_of(&l, "raw/order", AsOf::Version(9))
            .await
            .expect_err("not written yet");
        assert!(
            err.to_string()
                .contains("version 9 does not exist yet; the latest is 3"),
            "{err}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_resolves_to_the_last_version_committed_by_then() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "as-of")?;
        let ing = lake.ingestor()?;
        let l = Lake::new(&lake.config.lake)?;
        ing.ingest(&batch(0, 0, 2)).await?; // v0
        ing.ingest(&batch(0, 2, 2)).await?; // v1
        // S3 reports Last-Modified in whole seconds: leave more than a second on each side.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        let between = Utc::now();
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        ing.ingest(&batch(0, 4, 2)).await?; // v2
        assert_eq!(
            resolve_version(&l, "raw/order", AsOf::Time(between)).await?,
            1,
            "{b:?}"
        );
        let (v, rows) = read_as_of(&l, "raw/order", AsOf::Time(between)).await?;
        assert_eq!((v, offsets(&rows)?), (1, pairs(0, 0..4)), "{b:?}");
        let later = Utc::now() + Duration::minutes(1);
        assert_eq!(
            resolve_version(&l, "raw/order", AsOf::Time(later)).await?,
            2
        );
        let err = resolve_version(&l, "raw/order", AsOf::Time(between - Duration::days(1)))
            .await
            .expect_err("before the table");
        assert!(
            matches!(err, Error::VersionUnavailable { .. })
                && err.to_string().contains("the oldest readable version is 0"),
            "{err}"
        );
    }
    Ok(())
}

/// Issue 24, 11b: `history` and `show --as-of` use one notion of a commit's time. Every time
/// `history` gives (and its millisecond text, what the CLI prints) resolves to that version,
/// even for commits landing within one second (S3's whole-second Last-Modified).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_time_history_gives_resolves_to_its_version() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "history-as-of")?;
        let ing = lake.ingestor()?;
        for c in 0..6 {
            ing.ingest(&batch(0, c * 2, 2)).await?; // v0..v5, several in one second
        }
        let l = Lake::new(&lake.config.lake)?;
        let h = history(&l, "raw/order", None).await?;
        assert_eq!(h.entries.len(), 6, "{b:?}");
        let mut previous = None;
        for e in h.entries.iter().rev() {
            let t = e.timestamp.context("every commit has a time")?;
            assert!(
                previous.is_none_or(|p| p < t),
                "{b:?}: commit times strictly increase: v{} at {t} after {previous:?}",
                e.version
            );
            previous = Some(t);
            assert_eq!(
                resolve_version(&l, "raw/order", AsOf::Time(t)).await?,
                e.version,
                "{b:?}: history's time of v{} ({t})",
                e.version
            );
            let printed = t.format("%Y-%m-%d %H:%M:%S%.3fZ").to_string();
            let parsed = chrono::DateTime::parse_from_rfc3339(&printed)?.with_timezone(&Utc);
            let (v, rows) = read_as_of(&l, "raw/order", AsOf::Time(parsed)).await?;
            assert_eq!(
                (v, rows.num_rows() as u64),
                (e.version, 2 * (e.version + 1)),
                "{b:?}: as of `{printed}`"
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_removed_by_log_cleanup_name_the_oldest_readable() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "gone")?;
    let ing = lake.ingestor()?;
    for c in 0..5 {
        ing.ingest(&batch(0, c * 2, 2)).await?; // v0..v4
    }
    let l = Lake::new(&lake.config.lake)?;
    let now = FixedClock::new(Utc::now());
    checkpoint(&l, "raw/order", true, &now, &[]).await?; // checkpoint at v4
    now.set(Utc::now() + Duration::days(31));
    let r = checkpoint(&l, "raw/order", false, &now, &[]).await?;
    assert_eq!(r.logs_removed, 4, "commits 0..3 cleaned up");
    let err = read_as_of(&l, "raw/order", AsOf::Version(2))
        .await
        .expect_err("gone");
    assert!(
        err.to_string()
            .contains("the oldest readable version is 4, the latest 4"),
        "{err}"
    );
    let (v, rows) = read_as_of(&l, "raw/order", AsOf::Version(4)).await?;
    assert_eq!((v, rows.num_rows()), (4, 10));
    let h = history(&l, "raw/order", None).await?;
    assert_eq!(
        (h.oldest_in_log, h.entries.len()),
        (4, 1),
        "only v4's commit file is left"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vacuumed_version_is_reported_not_half_read() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "vacuumed")?;
    let ing = lake.ingestor()?;
    ing.ingest(&batch(0, 0, 2)).await?;
    ing.ingest(&batch(0, 2, 2)).await?;
    let l = Lake::new(&lake.config.lake)?;
    let t0 = chrono::DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default();
    let opts = CompactOptions {
        min_small_files: 2,
        ..Default::default()
    };
    compact(&l, "raw/order", &opts, t0, &|_, _| {}).await?;
    // What vacuum would do after the retention window: delete the compacted-away files.
    let (_, v1) = read_as_of(&l, "raw/order", AsOf::Version(1)).await?;
    assert_eq!(v1.num_rows(), 4);
    let root = std::path::Path::new(&lake.config.lake.root).join("raw/order");
    let h = history(&l, "raw/order", None).await?;
    assert_eq!(h.entries[0].files_removed, 2);
    let mut deleted = 0;
    for entry in lakestream_testkit::files_under(&root) {
        if entry.extension().is_some_and(|e| e == "parquet")
            && !entry.to_string_lossy().contains("_delta_log")
            && !is_live(&l, &entry).await?
        {
            std::fs::remove_file(&entry)?;
            deleted += 1;
        }
    }
    assert_eq!(deleted, 2);
    let err = read_as_of(&l, "raw/order", AsOf::Version(1))
        .await
        .expect_err("files gone");
    assert!(err.to_string().contains("which vacuum deleted"), "{err}");
    assert_eq!(
        read_as_of(&l, "raw/order", AsOf::Latest)
            .await?
            .1
            .num_rows(),
        4
    );
    Ok(())
}

/// Whether the latest version references this file.
async fn is_live(lake: &Lake, path: &std::path::Path) -> Result<bool> {
    let h = lakestream_core::table::TableHandle::open_existing(lake, "raw/order").await?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let snapshot = h.snapshot()?;
    Ok(snapshot
        .log_data()
        .iter()
        .any(|f| f.object_store_path().as_ref().ends_with(&name)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_the_rows_each_version_inserted_and_compaction_adds_none() -> Result<()> {
    use deltalake::arrow::array::{AsArray, Int64Array};
    use lakestream_core::inspect::changes;
    for b in backends() {
        let lake = TestLake::new(b, "changes")?;
        let ing = lake.ingestor()?;
        ing.ingest(&batch(0, 0, 3)).await?; // v0
        ing.ingest(&batch(0, 3, 4)).await?; // v1
        ing.ingest(&batch(1, 0, 5)).await?; // v2
        let l = Lake::new(&lake.config.lake)?;
        let opts = CompactOptions {
            min_small_files: 2,
            ..Default::default()
        };
        let t0 = chrono::DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default();
        compact(&l, "raw/order", &opts, t0, &|_, _| {}).await?; // v3
        let c = changes(&l, "raw/order", 1, None).await?;
        assert_eq!((c.from, c.to), (1, 3), "{b:?}");
        let mut got = offsets(&c.rows)?;
        got.sort();
        let mut expected = pairs(0, 3..7);
        expected.extend(pairs(1, 0..5));
        assert_eq!(
            got, expected,
            "{b:?}: versions 1 and 2, nothing from the compaction"
        );
        let kinds = c
            .rows
            .column_by_name("_change_type")
            .map(|a| a.as_string::<i32>().clone());
        assert!(
            kinds.is_some_and(|k| k.iter().all(|x| x == Some("insert"))),
            "{b:?}"
        );
        let versions = c.rows.column_by_name("_commit_version");
        let versions = versions
            .and_then(|a| a.as_any().downcast_ref::<Int64Array>())
            .map(|a| a.values().to_vec());
        assert_eq!(versions, Some([vec![1; 4], vec![2; 5]].concat()), "{b:?}");
        let only = changes(&l, "raw/order", 3, Some(3)).await?;
        assert_eq!(
            only.rows.num_rows(),
            0,
            "{b:?}: a compaction changes no rows"
        );
        assert!(changes(&l, "raw/order", 2, Some(7)).await.is_err());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_reports_committed_offsets_and_refine_progress() -> Result<()> {
    use lakestream_core::inspect::lag;
    use lakestream_core::refine::{RunContext, run_job};
    for b in backends() {
        let lake = TestLake::new(b, "lag")?;
        let ing = lake.ingestor()?;
        ing.ingest(&batch(0, 0, 5)).await?;
        ing.ingest(&batch(1, 10, 3)).await?;
        let member = |o: i64| {
            let json = format!(
                r#"{{"order_owner":"o0","membership":"gold","timestamp":"2022-04-04T09:15:30Z","n":{o}}}"#
            );
            SourceRecord::new("members", 2, o, 1_649_063_730_000, json.as_bytes())
        };
        ing.ingest(&[member(40), member(41)]).await?;
        let l = Lake::new(&lake.config.lake)?;
        let cfg = &lake.config;
        let now = Utc::now();
        let before = lag(&l, cfg, now).await?;
        let orders = before
            .kafka
            .iter()
            .find(|k| k.topic == "orders")
            .expect("orders");
        assert_eq!(
            orders
                .partitions
                .iter()
                .map(|(p, o)| (*p, *o))
                .collect::<Vec<_>>(),
            [(0, 4), (1, 12)],
            "{b:?}"
        );
        assert_eq!(orders.latest.map(|l| l.0), Some(1), "{b:?}");
        let members = before
            .kafka
            .iter()
            .find(|k| k.topic == "members")
            .expect("members");
        assert_eq!(members.partitions.get(&2), Some(&41), "{b:?}");
        let curated: Vec<_> = before
            .refine
            .iter()
            .filter(|r| r.job == "curated")
            .collect();
        assert_eq!(curated.len(), 2);
        assert!(
            curated.iter().all(|r| r.consumed.is_none()),
            "{b:?}: nothing consumed yet"
        );
        let raw_order = curated
            .iter()
            .find(|r| r.source == "raw/order")
            .expect("source");
        assert_eq!((raw_order.latest, raw_order.behind), (Some(1), 2), "{b:?}");

        let settings = (&cfg.commit).into();
        let ctx = RunContext::new(cfg, &l, &settings, now);
        let job = cfg.refine_job("curated").expect("curated job");
        run_job(&ctx, job, 100).await?;
        let after = lag(&l, cfg, now).await?;
        for r in after.refine.iter().filter(|r| r.job == "curated") {
            assert_eq!((r.consumed, r.behind), (r.latest, 0), "{b:?}: {r:?}");
        }
        assert!(
            after.access_logs.is_empty(),
            "{b:?}: no access-log tables yet"
        );
    }
    Ok(())
}
