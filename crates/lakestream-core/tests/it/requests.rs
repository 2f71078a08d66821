//! Storage requests of the warm append path (issue "Performance"): a commit must not list the
//! whole `_delta_log` afterwards (delta-rs's expired-log cleanup runs after every commit by
//! default; Lakestream leaves it to the maintenance job, whose checkpoint step cleans logs).

use crate::support::{TestLake, backends};
use anyhow::Result;
use deltalake::Path;
use lakestream_core::intercept::observe_calls;
use lakestream_core::{FixedClock, Ingestor, Lake, SourceRecord};
use std::sync::{Arc, Mutex};

/// Every call to the table stores, as `"<op> <path>"`.
#[derive(Debug, Default)]
struct Calls(Mutex<Vec<String>>);

impl Calls {
    fn push(&self, op: &str, path: Option<&Path>) {
        let path = path.map(|p| p.to_string()).unwrap_or_default();
        if let Ok(mut v) = self.0.lock() {
            v.push(format!("{op} {path}"));
        }
    }
    fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

fn order(off: i64) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":{},"order_owner":"o1","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#,
        off + 1
    );
    SourceRecord::new("orders", 0, off, 1_649_067_330_000, json.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_appends_never_list_the_whole_log() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "requests")?;
        let calls = Arc::new(Calls::default());
        let c = calls.clone();
        let l = Lake::new(&lake.config.lake)?
            .with_store_wrapper(observe_calls(Arc::new(move |op, path| c.push(op, path))));
        let clock =
            FixedClock::new(chrono::DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default());
        let ing = Ingestor::with_lake(lake.config.clone(), l, Arc::new(clock));
        // The first commit creates the table and the second loads it (the handle of a new table
        // is not kept yet: issue "Performance"); the next ones are warm appends, one commit
        // each, across a checkpoint (the example's interval is 10).
        ing.ingest(&[order(0)]).await?;
        ing.ingest(&[order(1)]).await?;
        calls.take();
        let mut full_listings = Vec::new();
        for off in 2..25 {
            ing.ingest(&[order(off)]).await?;
            let made = calls.take();
            let log_lists: Vec<&String> = made
                .iter()
                .filter(|c| c.starts_with("list ") && c.ends_with("_delta_log"))
                .collect();
            eprintln!("{b:?} commit {off}: {} requests: {made:?}", made.len());
            if !log_lists.is_empty() {
                full_listings.push(off);
            }
        }
        assert!(
            full_listings.is_empty(),
            "{b:?}: commits {full_listings:?} listed the whole _delta_log"
        );
    }
    Ok(())
}
