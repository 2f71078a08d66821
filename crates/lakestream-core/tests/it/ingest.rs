//! The commit engine's promises, on every backend.

use anyhow::Result;
use lakestream_core::seed::SeedGenerator;
use lakestream_formats::record::{RecordValue, SourceRecord};
use lakestream_testkit::{Backend, TestLake, assert_accounted, backends, offsets, strings};

fn orders(n: usize) -> Vec<SourceRecord> {
    let start = chrono::DateTime::from_timestamp(1_649_067_330, 0).unwrap_or_default();
    let mut g = SeedGenerator::new(42, start, 1000);
    (0..n).map(|_| g.order()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_three_times_gives_the_same_rows() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "replay")?;
        let ing = lake.ingestor()?;
        let batch = orders(50);
        let first = ing.ingest(&batch).await?;
        assert_accounted(&first);
        assert_eq!(first.written, 50, "{b:?}");
        let v = lake.version("raw/order").await?;
        for _ in 0..2 {
            let again = ing.ingest(&batch).await?;
            assert_accounted(&again);
            assert_eq!((again.written, again.duplicates), (0, 50), "{b:?}");
        }
        assert_eq!(
            lake.version("raw/order").await?,
            v,
            "a replay must not commit"
        );
        let rows = lake.read("raw/order").await?;
        let mut expected: Vec<(i32, i64)> = batch.iter().map(|r| (r.partition, r.offset)).collect();
        expected.sort();
        assert_eq!(offsets(&rows)?, expected, "{b:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resplit_batch_after_partial_commit_adds_no_duplicates() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "resplit")?;
        let ing = lake.ingestor()?;
        let all = orders(90);
        // A first delivery that committed only a prefix, then the range redelivered with
        // different boundaries (Lambda bisects or changes the window on retry).
        let r0 = ing.ingest(&all[..31]).await?;
        let r1 = ing.ingest(&all[..50]).await?;
        let r2 = ing.ingest(&all[50..]).await?;
        let r3 = ing.ingest(&all[20..]).await?;
        for r in [&r0, &r1, &r2, &r3] {
            assert_accounted(r);
        }
        assert_eq!((r1.written, r1.duplicates), (19, 31), "{b:?}");
        assert_eq!((r3.written, r3.duplicates), (0, 70), "{b:?}");
        let got = offsets(&lake.read("raw/order").await?)?;
        let mut expected: Vec<(i32, i64)> = all.iter().map(|r| (r.partition, r.offset)).collect();
        expected.sort();
        assert_eq!(got, expected, "{b:?}: every record exactly once");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_concurrent_writers_lose_nothing_and_versions_are_contiguous() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "concurrent")?;
        // Writer w owns partition w of `orders`, like one Lambda per Kafka partition.
        let mut tasks = Vec::new();
        for w in 0..4i32 {
            let ing = lake.ingestor()?;
            tasks.push(tokio::spawn(async move {
                let mut written = 0;
                for c in 0..20i64 {
                    let recs: Vec<SourceRecord> = (0..5)
                        .map(|k| {
                            let off = c * 5 + k;
                            let json = format!(
                                r#"{{"order_id":{w},"order_owner":"w{w}","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#
                            );
                            SourceRecord::new("orders", w, off, 1_649_067_330_000, json.as_bytes())
                        })
                        .collect();
                    let r = ing.ingest(&recs).await?;
                    assert_accounted(&r);
                    written += r.written;
                }
                anyhow::Ok(written)
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await??;
        }
        assert_eq!(total, 400, "{b:?}");
        let rows = lake.read("raw/order").await?;
        let got = offsets(&rows)?;
        let expected: Vec<(i32, i64)> =
            (0..4).flat_map(|w| (0..100).map(move |o| (w, o))).collect();
        assert_eq!(got, expected, "{b:?}");
        // 80 commits, versions 0..=79, every one present in the log.
        let v = lake.version("raw/order").await?;
        assert_eq!(v, 79, "{b:?}: one version per commit, contiguous");
        let lakex = lakestream_core::Lake::new(&lake.config.lake)?;
        for version in 0..=v {
            let mut h = lakestream_core::table::TableHandle::open(&lakex, "raw/order")?;
            h.at_version(version).await?;
            assert_eq!(h.version(), Some(version));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_create_the_same_table_at_once() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "create-race")?;
        let (a, c) = (lake.ingestor()?, lake.ingestor()?);
        let ra: Vec<SourceRecord> = orders(30)
            .into_iter()
            .filter(|r| r.partition == 0)
            .collect();
        let rc: Vec<SourceRecord> = orders(30)
            .into_iter()
            .filter(|r| r.partition == 1)
            .collect();
        let (x, y) = tokio::join!(a.ingest(&ra), c.ingest(&rc));
        let (x, y) = (x?, y?);
        assert_eq!(x.written + y.written, ra.len() + rc.len(), "{b:?}");
        let rows = lake.read("raw/order").await?;
        assert_eq!(rows.num_rows(), ra.len() + rc.len(), "{b:?}");
        assert_eq!(
            lake.version("raw/order").await?,
            1,
            "{b:?}: create + one append"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_land_in_dead_letters_with_reasons() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "dlq")?;
        let ing = lake.ingestor()?;
        let ok = r#"{"order_id":1,"order_owner":"alice","order_value":5,"timestamp":"2022-04-04T10:15:30.123Z"}"#;
        let mut recs = vec![
            SourceRecord::new("orders", 0, 10, 1, ok.as_bytes()),
            SourceRecord::new("orders", 0, 11, 1, b"not json"),
            SourceRecord::new(
                "orders",
                0,
                12,
                1,
                br#"{"order_id":"x","order_owner":"a","timestamp":"2022-04-04T10:15:30Z"}"#,
            ),
            SourceRecord::new(
                "orders",
                0,
                13,
                1,
                br#"{"order_owner":"a","timestamp":"2022-04-04T10:15:30Z"}"#,
            ),
            SourceRecord::new(
                "orders",
                0,
                14,
                1,
                b"{\"order_id\":1,\"order_owner\":\"\xff\",\"timestamp\":1}",
            ),
            SourceRecord::new("unknown-topic", 3, 7, 1, ok.as_bytes()),
            SourceRecord::new("orders", 0, 16, 1, ok.as_bytes()),
        ];
        recs.push(SourceRecord {
            value: RecordValue::Null,
            ..SourceRecord::new("orders", 0, 15, 1, b"")
        });
        let r = ing.ingest(&recs).await?;
        assert_accounted(&r);
        assert_eq!(
            (r.written, r.dead_lettered, r.duplicates),
            (2, 6, 0),
            "{b:?} {r:?}"
        );
        let dl = lake.read("dead_letters").await?;
        let mut rows: Vec<(Option<String>, Option<String>)> = strings(&dl, "offset")?
            .into_iter()
            .zip(strings(&dl, "error")?)
            .collect();
        rows.sort_by_key(|r| r.0.as_ref().and_then(|o| o.parse::<i64>().ok()));
        let reasons: Vec<String> = rows
            .iter()
            .map(|r| r.1.clone().unwrap_or_default())
            .collect();
        assert!(
            reasons[0].contains("no table is configured for topic `unknown-topic`"),
            "{reasons:?}"
        );
        assert!(reasons[1].contains("not a JSON object"), "{reasons:?}");
        assert!(reasons[2].contains("order_id"), "{reasons:?}");
        assert!(reasons[3].contains("order_id"), "{reasons:?}");
        assert!(reasons[4].contains("UTF-8"), "{reasons:?}");
        assert!(reasons[5].contains("null value"), "{reasons:?}");
        let raw = strings(&dl, "raw_base64")?;
        assert!(
            raw.contains(&Some("bm90IGpzb24=".to_string())),
            "raw bytes kept as base64: {raw:?}"
        );
        // Replay: nothing new anywhere.
        let again = ing.ingest(&recs).await?;
        assert_accounted(&again);
        assert_eq!(
            (again.written, again.dead_lettered, again.duplicates),
            (0, 0, 8),
            "{b:?}"
        );
        assert_eq!(lake.read("dead_letters").await?.num_rows(), 6);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_evolution_adds_a_column_and_older_rows_read_null() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "evolve")?;
        let ing = lake.ingestor()?;
        let m = |off: i64, json: &str| SourceRecord::new("members", 0, off, 1, json.as_bytes());
        ing.ingest(&[m(
            1,
            r#"{"order_owner":"alice","membership":"gold","timestamp":"2022-04-04T10:00:00Z"}"#,
        )])
        .await?;
        let r = ing
            .ingest(&[m(2, r#"{"order_owner":"alice","membership":"platinum","timestamp":"2022-04-04T11:00:00Z","points":250}"#)])
            .await?;
        assert_eq!(r.tables[0].columns_added, ["points"], "{b:?}");
        let rows = lake.read("raw/member").await?;
        let mut pairs: Vec<(Option<String>, Option<String>)> = strings(&rows, "membership")?
            .into_iter()
            .zip(strings(&rows, "points")?)
            .collect();
        pairs.sort();
        assert_eq!(
            pairs,
            [
                (Some("gold".into()), None),
                (Some("platinum".into()), Some("250".into()))
            ],
            "{b:?}"
        );
        // Enforce mode (orders) ignores and counts unknown fields instead.
        let o = SourceRecord::new(
            "orders",
            0,
            1,
            1,
            br#"{"order_id":1,"order_owner":"a","order_value":1,"timestamp":"2022-04-04T10:00:00Z","coupon":"X"}"#,
        );
        let r = ing.ingest(&[o]).await?;
        assert_eq!((r.written, r.tables[0].unknown_fields_ignored), (1, 1));
        assert!(
            lake.read("raw/order")
                .await?
                .column_by_name("coupon")
                .is_none()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processing_time_partitions_use_two_digit_strings() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "parts")?;
    let ing = lake.ingestor()?;
    ing.ingest(&orders(3)).await?;
    let rows = lake.read("raw/order").await?;
    // The test clock is 2025-11-29T07:06:40Z.
    assert_eq!(strings(&rows, "year")?[0].as_deref(), Some("25"));
    assert_eq!(strings(&rows, "month")?[0].as_deref(), Some("11"));
    assert_eq!(strings(&rows, "day")?[0].as_deref(), Some("29"));
    assert_eq!(strings(&rows, "hour")?[0].as_deref(), Some("07"));
    let ts = strings(&rows, "timestamp")?;
    assert!(
        ts.iter().all(|t| t
            .as_deref()
            .is_some_and(|t| t.starts_with("2022-04-04T10:15:3"))),
        "{ts:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_schema_changes_are_not_lost() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "evolve-race")?;
        let (a, c) = (lake.ingestor()?, lake.ingestor()?);
        let m = |p: i32, off: i64, extra: &str| {
            let json = format!(
                r#"{{"order_owner":"o{p}","membership":"gold","timestamp":"2022-04-04T10:00:00Z"{extra}}}"#
            );
            SourceRecord::new("members", p, off, 1, json.as_bytes())
        };
        // Create the table first so both writers race on appends, not on creation.
        a.ingest(&[m(0, 0, "")]).await?;
        let evolver = async {
            for off in 1..=8i64 {
                let r = a
                    .ingest(&[m(0, off, &format!(r#","f{off}":{off}"#))])
                    .await?;
                assert_accounted(&r);
                assert_eq!(r.written, 1);
            }
            anyhow::Ok(())
        };
        let appender = async {
            for off in 0..8i64 {
                let r = c.ingest(&[m(1, off, "")]).await?;
                assert_accounted(&r);
                assert_eq!(r.written, 1);
            }
            anyhow::Ok(())
        };
        let (x, y) = tokio::join!(evolver, appender);
        x?;
        y?;
        let rows = lake.read("raw/member").await?;
        assert_eq!(rows.num_rows(), 17, "{b:?}");
        for off in 1..=8 {
            let col = strings(&rows, &format!("f{off}"))?;
            assert_eq!(
                col.iter().filter(|v| v.is_some()).count(),
                1,
                "{b:?}: f{off} kept"
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_every_ten_versions() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "checkpoint")?;
    let ing = lake.ingestor()?;
    let all = orders(24);
    for chunk in all.chunks(2) {
        ing.ingest(chunk).await?;
    }
    assert_eq!(lake.version("raw/order").await?, 11);
    let log = std::path::Path::new(&lake.config.lake.root).join("raw/order/_delta_log");
    // delta-rs checkpoints after every 10th commit: version 9, 19, ...
    assert!(log.join("00000000000000000009.checkpoint.parquet").exists());
    assert!(!log.join("00000000000000000005.checkpoint.parquet").exists());
    Ok(())
}
