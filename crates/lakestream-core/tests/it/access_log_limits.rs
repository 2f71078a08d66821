//! Issue 24 defect 8: one access-log object cannot take a drain round's memory. An object over
//! `max_object_mib` is refused before it is read, a line over `max_line_kib` is dead-lettered
//! (its first bytes kept) without buffering the rest, and a gzip object that inflates past
//! `max_inflated_mib` (a gzip bomb) fails that object with a clear reason, in bounded memory
//! and time; the other objects of the batch land.

use anyhow::Result;
use flate2::Compression;
use flate2::write::GzEncoder;
use lakestream_core::access_log::ObjectOutcome;
use lakestream_testkit::access_logs::{LOG_LINE, LocalLogs, log_object};
use lakestream_testkit::{Backend, TestLake, strings};
use std::io::Write;

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

/// A lake with `limits` applied and the objects, holding `logs/good.log` (one line).
fn setup(limits: impl FnOnce(&mut TestLake)) -> Result<(TestLake, LocalLogs)> {
    let mut lake = TestLake::new(Backend::Fs, "log-limits")?;
    limits(&mut lake);
    let logs = LocalLogs::new()?;
    logs.put("logs/good.log", LOG_LINE.as_bytes())?;
    Ok((lake, logs))
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
    let (lake, logs) = setup(|l| l.config.access_logs.max_inflated_mib = 16)?;
    // 256 MiB of zeros (no newline: one line) from ~256 KB, then 4 GiB of newlines from ~4 MB.
    logs.put("logs/zeros.gz", bomb(0, 1 << 20, 256)?)?;
    logs.put("logs/newlines.gz", bomb(b'\n', 1 << 20, 4096)?)?;
    let ing = lake.access_log_ingestor()?;
    let before = peak_rss_mib();
    let started = std::time::Instant::now();
    let r = ing
        .ingest(
            &[
                log_object("logs/zeros.gz", None),
                log_object("logs/good.log", None),
                log_object("logs/newlines.gz", None),
            ],
            &logs.source(),
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
    let (lake, logs) = setup(|l| l.config.access_logs.max_line_kib = 64)?;
    let long = format!("{LOG_LINE}{}\n{LOG_LINE}", "x".repeat(3 << 20));
    logs.put("logs/long.log", &long)?;
    logs.put("logs/long.gz", gzip(long.as_bytes())?)?;
    let ing = lake.access_log_ingestor()?;
    let r = ing
        .ingest(
            &[
                log_object("logs/long.log", None),
                log_object("logs/long.gz", None),
            ],
            &logs.source(),
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
    let (lake, logs) = setup(|l| l.config.access_logs.max_object_mib = 1)?;
    logs.put("logs/big.log", LOG_LINE.repeat((2 << 20) / LOG_LINE.len()))?;
    let ing = lake.access_log_ingestor()?;
    let r = ing
        .ingest(
            &[
                log_object("logs/big.log", None),
                log_object("logs/good.log", None),
            ],
            &logs.source(),
        )
        .await?;
    let reason = refused_reason(&r.objects[0].1).unwrap_or_default();
    assert!(
        reason.contains("over the 1 MiB limit") && reason.contains("access_logs.max_object_mib"),
        "{:?}",
        r.objects
    );
    assert_eq!(r.bytes_read, LOG_LINE.len(), "the big object was not read");
    let l = letters(&lake).await?;
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].0, "s3://raw-logs/logs/big.log");
    assert_eq!(lake.read("access_logs/datalake-prod").await?.num_rows(), 1);
    Ok(())
}
