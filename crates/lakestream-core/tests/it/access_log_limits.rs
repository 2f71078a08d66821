//! Issue 24 defect 8: one access-log object cannot take a drain round's memory. An object over
//! `max_object_mib` is refused before it is read, a line over `max_line_kib` is dead-lettered
//! (its first bytes kept) without buffering the rest, and a gzip object that inflates past
//! `max_inflated_mib` (a gzip bomb) fails that object with a clear reason, in bounded memory
//! and time; the other objects of the batch land.

use crate::support::{Backend, TestLake, strings};
use anyhow::Result;
use flate2::Compression;
use flate2::write::GzEncoder;
use lakestream_core::FixedClock;
use lakestream_core::access_log::{AccessLogIngestor, LocalObjects, ObjectOutcome};
use lakestream_formats::notification::LogObject;
use std::io::Write;
use std::sync::Arc;

const GOOD: &str = "owner datalake-prod [29/Nov/2026:10:00:00 +0000] 1.2.3.4 req ID REST.GET.OBJECT k \"GET /k HTTP/1.1\" 200 - 1 1 1 1 \"-\" \"ua\" -\n";

fn object(key: &str) -> LogObject {
    LogObject {
        bucket: "raw-logs".into(),
        key: key.into(),
        alt_key: None,
        etag: None,
    }
}

fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    e.write_all(data)?;
    Ok(e.finish()?)
}

/// A gzip stream that inflates to `members` x `member` bytes of `fill` (concatenated members, as
/// `MultiGzDecoder` reads them): a few MB on disk.
fn bomb(fill: u8, member: usize, members: usize) -> Result<Vec<u8>> {
    let one = gzip(&vec![fill; member])?;
    Ok(one.repeat(members))
}

fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

fn setup(limits: impl FnOnce(&mut TestLake)) -> Result<(TestLake, tempfile::TempDir)> {
    let mut lake = TestLake::new(Backend::Fs, "log-limits")?;
    limits(&mut lake);
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("raw-logs/logs"))?;
    std::fs::write(dir.path().join("raw-logs/logs/good.log"), GOOD)?;
    Ok((lake, dir))
}

fn ingestor(lake: &TestLake) -> Result<AccessLogIngestor> {
    let clock =
        FixedClock::new(chrono::DateTime::from_timestamp(1_795_939_200, 0).unwrap_or_default());
    Ok(AccessLogIngestor::new(
        lake.config.clone(),
        Arc::new(clock),
    )?)
}

fn refused_reason(outcome: &ObjectOutcome) -> Option<&str> {
    match outcome {
        ObjectOutcome::Refused { reason } => Some(reason),
        _ => None,
    }
}

async fn letters(lake: &TestLake) -> Result<Vec<(String, Option<String>, String, usize)>> {
    let dl = lake.read("dead_letters").await?;
    let uri = strings(&dl, "object_uri")?;
    let line = strings(&dl, "line_number")?;
    let err = strings(&dl, "error")?;
    let raw = strings(&dl, "raw_base64")?;
    let mut v: Vec<_> = (0..dl.num_rows())
        .map(|i| {
            (
                uri[i].clone().unwrap_or_default(),
                line[i].clone(),
                err[i].clone().unwrap_or_default(),
                raw[i].as_ref().map_or(0, String::len),
            )
        })
        .collect();
    v.sort();
    Ok(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_bomb_fails_its_object_in_bounded_memory_and_time() -> Result<()> {
    let (lake, dir) = setup(|l| l.config.access_logs.max_inflated_mib = 16)?;
    let logs = dir.path().join("raw-logs/logs");
    // 256 MiB of zeros (no newline: one line) from ~256 KB, then 4 GiB of newlines from ~4 MB.
    std::fs::write(logs.join("zeros.gz"), bomb(0, 1 << 20, 256)?)?;
    std::fs::write(logs.join("newlines.gz"), bomb(b'\n', 1 << 20, 4096)?)?;
    let ing = ingestor(&lake)?;
    let before = peak_rss_mib();
    let started = std::time::Instant::now();
    let r = ing
        .ingest(
            &[
                object("logs/zeros.gz"),
                object("logs/good.log"),
                object("logs/newlines.gz"),
            ],
            &LocalObjects(dir.path().to_path_buf()),
        )
        .await?;
    let took = started.elapsed();
    let grew = peak_rss_mib().saturating_sub(before);
    for i in [0, 2] {
        let reason = refused_reason(&r.objects[i].1)
            .unwrap_or_else(|| panic!("{} not refused: {:?}", r.objects[i].0, r.objects[i].1));
        assert!(
            reason.contains("inflates to more than 16 MiB")
                && reason.contains("access_logs.max_inflated_mib"),
            "{reason}"
        );
    }
    assert_eq!(
        r.objects[1].1,
        ObjectOutcome::Committed {
            rows: 1,
            dead_lettered: 0
        }
    );
    assert!(took.as_secs() < 60, "took {took:?}");
    assert!(grew < 512, "peak RSS grew by {grew} MiB");
    let l = letters(&lake).await?;
    assert_eq!(l.len(), 2, "{l:?}");
    assert!(
        l.iter()
            .all(|x| x.2.contains("max_inflated_mib") && x.3 == 0)
    );
    assert_eq!(lake.read("access_logs/datalake-prod").await?.num_rows(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_line_is_dead_lettered_not_buffered() -> Result<()> {
    let (lake, dir) = setup(|l| l.config.access_logs.max_line_kib = 64)?;
    let logs = dir.path().join("raw-logs/logs");
    let long = format!("{GOOD}{}\n{GOOD}", "x".repeat(3 << 20));
    std::fs::write(logs.join("long.log"), &long)?;
    std::fs::write(logs.join("long.gz"), gzip(long.as_bytes())?)?;
    let ing = ingestor(&lake)?;
    let r = ing
        .ingest(
            &[object("logs/long.log"), object("logs/long.gz")],
            &LocalObjects(dir.path().to_path_buf()),
        )
        .await?;
    for (uri, outcome) in &r.objects {
        assert_eq!(
            outcome,
            &ObjectOutcome::Committed {
                rows: 2,
                dead_lettered: 1
            },
            "{uri}"
        );
    }
    let l = letters(&lake).await?;
    assert_eq!(l.len(), 2, "{l:?}");
    for (uri, line, error, raw_len) in &l {
        assert_eq!(line.as_deref(), Some("2"), "{uri}");
        assert!(
            error.contains("longer than 65536 bytes") && error.contains("max_line_kib"),
            "{error}"
        );
        // The first 64 KiB are kept (base64: 4/3), not the 3 MiB line.
        assert!(*raw_len <= (64 << 10) * 4 / 3 + 4, "{uri}: {raw_len}");
    }
    assert_eq!(lake.read("access_logs/datalake-prod").await?.num_rows(), 4);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_over_the_size_limit_is_refused_before_it_is_read() -> Result<()> {
    let (lake, dir) = setup(|l| l.config.access_logs.max_object_mib = 1)?;
    let logs = dir.path().join("raw-logs/logs");
    std::fs::write(logs.join("big.log"), GOOD.repeat((2 << 20) / GOOD.len()))?;
    let ing = ingestor(&lake)?;
    let r = ing
        .ingest(
            &[object("logs/big.log"), object("logs/good.log")],
            &LocalObjects(dir.path().to_path_buf()),
        )
        .await?;
    let reason = refused_reason(&r.objects[0].1).unwrap_or_default();
    assert!(
        reason.contains("over the 1 MiB limit") && reason.contains("access_logs.max_object_mib"),
        "{:?}",
        r.objects
    );
    assert_eq!(r.bytes_read, GOOD.len(), "the big object was not read");
    let l = letters(&lake).await?;
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].0, "s3://raw-logs/logs/big.log");
    assert_eq!(lake.read("access_logs/datalake-prod").await?.num_rows(), 1);
    Ok(())
}
