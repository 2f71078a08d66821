//! Issue 24 defect 8: the drain receives messages whatever the function's timeout. With a fixed
//! 60 s reserve a 60 s function (`LogIngestTimeout=60`, allowed by the template) stopped before
//! its first receive, and the queue's messages expired unread after 7 days. Every timeout the
//! template allows (and 30..900 s) is driven through `drain` with an injected clock.

use lakestream_core::FixedClock;
use lakestream_core::access_log::{AccessLogIngestor, LocalObjects};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::EXAMPLE;
use s3_log_ingest::QueueMessage;
use s3_log_ingest::drain::{DrainSettings, Queue, drain};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TEST_EVENT: &str = include_str!("../../../../events/s3-test-event.json");

/// A queue of test events on a fake clock: each receive waits its long poll (the clock moves by
/// `wait`), each delete takes 100 ms.
pub(crate) struct FakeQueue {
    pub(crate) left: Mutex<usize>,
    pub(crate) elapsed: Arc<Mutex<Duration>>,
}

fn poisoned() -> s3_log_ingest::Error {
    s3_log_ingest::Error::Queue {
        operation: "fake",
        queue: "fake".into(),
        message: "poisoned".into(),
    }
}

impl Queue for FakeQueue {
    async fn receive(&self, max: i32, wait: Duration) -> s3_log_ingest::Result<Vec<QueueMessage>> {
        let mut left = self.left.lock().map_err(|_| poisoned())?;
        let n = (*left).min(max as usize);
        *left -= n;
        *self.elapsed.lock().map_err(|_| poisoned())? += if n == 0 {
            wait
        } else {
            Duration::from_millis(50)
        };
        Ok((0..n)
            .map(|i| QueueMessage {
                id: format!("m-{left}-{i}"),
                receipt: "r".into(),
                body: TEST_EVENT.into(),
            })
            .collect())
    }
    async fn delete(&self, _: &[&QueueMessage]) -> s3_log_ingest::Result<()> {
        *self.elapsed.lock().map_err(|_| poisoned())? += Duration::from_millis(100);
        Ok(())
    }
}

async fn drained(timeout_s: u64, settings: &DrainSettings) -> anyhow::Result<(usize, Duration)> {
    let dir = tempfile::tempdir()?;
    let mut cfg = PipelineConfig::from_toml(EXAMPLE)?;
    cfg.lake.root = dir.path().join("lake").to_string_lossy().into_owned();
    let ing = AccessLogIngestor::new(cfg, Arc::new(FixedClock::new(chrono::Utc::now())))?;
    let elapsed = Arc::new(Mutex::new(Duration::ZERO));
    let queue = FakeQueue {
        left: Mutex::new(25),
        elapsed: elapsed.clone(),
    };
    // The runtime hands the event over a little after the invocation started.
    let total = Duration::from_secs(timeout_s) - Duration::from_millis(300);
    let clock = elapsed.clone();
    let remaining = move || {
        let e = *clock.lock().unwrap_or_else(|p| p.into_inner());
        total.saturating_sub(e)
    };
    let report = drain(
        &ing,
        &LocalObjects(dir.path().to_path_buf()),
        &queue,
        settings,
        remaining,
    )
    .await?;
    let used = *elapsed.lock().unwrap_or_else(|p| p.into_inner());
    Ok((report.received, used))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_receives_at_every_timeout_the_template_allows() -> anyhow::Result<()> {
    let settings = DrainSettings::default();
    for timeout in [30, 60, 120, 300, 600, 900] {
        let (received, used) = drained(timeout, &settings).await?;
        assert_eq!(
            received, 25,
            "LogIngestTimeout={timeout}: the drain received {received} of 25 messages"
        );
        assert!(used < Duration::from_secs(timeout), "{timeout}: {used:?}");
    }
    Ok(())
}

/// The reserve over every whole-second timeout from 30 s to 900 s: shorter than the timeout,
/// leaving most of it for receiving, never more than the configured cap.
#[test]
fn the_reserve_is_proportional_to_the_time_left() {
    let settings = DrainSettings::default();
    for t in 30..=900u64 {
        let total = Duration::from_secs(t);
        let reserve = settings.reserve_for(total);
        assert!(reserve <= settings.reserve, "{t}: {reserve:?}");
        assert!(reserve * 5 <= total, "{t}: {reserve:?}");
        assert!(
            total - reserve >= settings.wait * 10,
            "{t}: {reserve:?} leaves too little time to receive"
        );
        assert!(
            reserve >= Duration::from_secs(6),
            "{t}: {reserve:?} leaves no time to commit"
        );
    }
}
