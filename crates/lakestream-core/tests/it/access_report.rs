//! `report access` (issue 24, 11a): a copy's read of its source (`REST.COPY.OBJECT_GET`) is a
//! read, not a write; and `--since` reads only the data files that can hold requests of the
//! window (pruned by the `date` partition and the `time` statistics), counted at the store.

use anyhow::Result;
use chrono::{DateTime, TimeZone, Utc};
use lakestream_core::access_log::report::{ReportOptions, access_report};
use lakestream_core::access_log::{AccessLogIngestor, LocalObjects};
use lakestream_core::intercept::observe_calls;
use lakestream_core::{FixedClock, Lake};
use lakestream_formats::config::AccessLogLayout;
use lakestream_formats::notification::LogObject;
use lakestream_testkit::{TestLake, backends};
use std::sync::{Arc, Mutex};

const OWNER: &str = "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be";

/// One access-log line of bucket `lake-hot` on `day` November 2026 at `hour`:00:`n`.
fn line(n: u32, day: u32, hour: u32, op: &str, key: &str) -> String {
    let verb = if op.contains("GET") { "GET" } else { "PUT" };
    format!(
        "{OWNER} lake-hot [{day:02}/Nov/2026:{hour:02}:00:{n:02} +0000] 203.0.113.7 \
         arn:aws:iam::123456789012:user/alice REQ{day:02}{hour:02}{n:02} {op} {key} \
         \"{verb} /lake-hot/{key} HTTP/1.1\" 200 - 1000 1000 12 10 \"-\" \"aws-cli/2.15.0\" - \
         hostid= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader lake-hot.s3.us-east-1.amazonaws.com \
         TLSv1.2 - - us-east-1\n"
    )
}

/// Ingest one log object per entry (one commit each, so one data file per object).
async fn ingest(lake: &TestLake, objects: &[(&str, String)]) -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("raw-logs/logs"))?;
    let clock = FixedClock::new(Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap());
    let ing = AccessLogIngestor::new(lake.config.clone(), Arc::new(clock))?;
    for (i, (name, body)) in objects.iter().enumerate() {
        std::fs::write(dir.path().join("raw-logs/logs").join(name), body)?;
        let object = LogObject {
            bucket: "raw-logs".into(),
            key: format!("logs/{name}"),
            alt_key: None,
            etag: Some(format!("etag-{i}")),
            event_time: None,
        };
        ing.ingest(&[object], &LocalObjects(dir.path().to_path_buf()))
            .await?;
    }
    Ok(())
}

/// The instant the reports are made at (a fixed one, so "last 24 h" windows are stable).
fn report_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_reads_its_source_and_writes_its_destination() -> Result<()> {
    let lake = TestLake::new(backends()[0], "report-copy")?;
    let body = [
        line(1, 29, 8, "REST.COPY.OBJECT_GET", "src/2026/11/a.parquet"),
        line(2, 29, 8, "REST.COPY.OBJECT", "dst/2026/11/a.parquet"),
        line(3, 29, 8, "REST.COPY.PART_GET", "src/2026/11/b.parquet"),
        line(4, 29, 8, "REST.GET.OBJECT", "src/2026/11/a.parquet"),
    ]
    .concat();
    ingest(&lake, &[("copy.log", body)]).await?;
    let l = Lake::new(&lake.config.lake)?;
    let opts = ReportOptions {
        since_days: 30,
        depth: 1,
        now: report_time(),
    };
    let r = access_report(&l, &lake.config, opts).await?;
    let [bucket] = &r.buckets[..] else {
        panic!("one bucket: {:?}", r.buckets)
    };
    assert_eq!((bucket.reads, bucket.writes), (3, 1), "{bucket:?}");
    let src = r.datasets.iter().find(|d| d.dataset == "src");
    assert_eq!(src.map(|d| (d.reads, d.writes)), Some((3, 0)), "{r:?}");
    assert!(
        !r.cold.iter().any(|(_, d, _)| d == "src"),
        "a copied dataset was read: {:?}",
        r.cold
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn since_reads_only_the_files_of_the_window() -> Result<()> {
    for b in backends() {
        for layout in [AccessLogLayout::PerBucket, AccessLogLayout::Single] {
            let mut lake = TestLake::new(b, "report-window")?;
            lake.config.access_logs.layout = layout;
            let get = |n, d, h| line(n, d, h, "REST.GET.OBJECT", "hot/2026/11/a.parquet");
            ingest(
                &lake,
                &[
                    ("nov01.log", get(1, 1, 8)),
                    ("nov15.log", get(2, 15, 8)),
                    // 27 Nov: the window starts at 12:00 (3 days before now, 30 Nov 12:00).
                    ("nov27-early.log", get(3, 27, 8)),
                    ("nov27-late.log", get(4, 27, 20)),
                    ("nov29.log", [get(5, 29, 8), get(6, 29, 9)].concat()),
                ],
            )
            .await?;
            let gets = Arc::new(Mutex::new(Vec::<String>::new()));
            let seen = gets.clone();
            let l = Lake::new(&lake.config.lake)?.with_store_wrapper(observe_calls(Arc::new(
                move |op, path| {
                    let path = path.map(|p| p.to_string()).unwrap_or_default();
                    if op == "get"
                        && path.ends_with(".parquet")
                        && !path.contains("_delta_log")
                        && let Ok(mut v) = seen.lock()
                    {
                        v.push(path);
                    }
                },
            )));
            let opts = ReportOptions {
                since_days: 3,
                depth: 1,
                now: report_time(),
            };
            let r = access_report(&l, &lake.config, opts).await?;
            let [bucket] = &r.buckets[..] else {
                panic!("one bucket: {:?}", r.buckets)
            };
            assert_eq!(bucket.reads, 3, "{b:?} {layout:?}: requests in the window");
            let mut read = gets.lock().map(|v| v.clone()).unwrap_or_default();
            read.sort();
            read.dedup();
            assert_eq!(
                read.len(),
                2,
                "{b:?} {layout:?}: only the late 27 Nov file and the 29 Nov file: {read:?}"
            );
            assert!(
                read.iter()
                    .all(|p| p.contains("date=2026-11-27") || p.contains("date=2026-11-29")),
                "{b:?} {layout:?}: {read:?}"
            );
        }
    }
    Ok(())
}
