//! Storage requests of a warm refine process (issue 28): a job with nothing new costs no
//! request on a notice and at most two HEADs per source on a tick; a warm run of one new source
//! version never replays a table's log from its start.

use crate::notices::{ingest, sqs_event as event};
use anyhow::Result;
use deltalake::Path;
use lakestream_core::intercept::observe_calls;
use lakestream_core::{Lake, SystemClock};
use lakestream_testkit::{Backend, TestLake};
use refine::Refiner;
use std::sync::{Arc, Mutex};

const ORDERS: &[u8] = include_bytes!("../../../../events/msk-orders.json");
const MEMBERS: &[u8] = include_bytes!("../../../../events/msk-members.json");

#[derive(Default)]
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

#[tokio::test]
async fn warm_refine_requests() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-requests")?;
    let calls = Arc::new(Calls::default());
    let c = calls.clone();
    let l = Lake::new(&lake.config.lake)?
        .with_store_wrapper(observe_calls(Arc::new(move |op, path| c.push(op, path))));
    let refiner = Refiner::with_lake(lake.config.clone(), l, Arc::new(SystemClock));
    let mut notices = ingest(&lake, MEMBERS).await?;
    notices.extend(ingest(&lake, ORDERS).await?);
    refine::handle(&refiner, &event(&notices))
        .await?
        .into_result()?;
    calls.take();
    // The same notices again: nothing is due, nothing is asked.
    refine::handle(&refiner, &event(&notices))
        .await?
        .into_result()?;
    let made = calls.take();
    assert!(
        made.is_empty(),
        "a redelivered notice asked storage: {made:?}"
    );
    // A tick with nothing new: two HEADs per source of each job (curated 2, processed 1, gold 1).
    refine::handle(&refiner, &serde_json::json!({}))
        .await?
        .into_result()?;
    let made = calls.take();
    assert!(made.iter().all(|c| c.starts_with("head ")), "{made:?}");
    assert_eq!(made.len(), 8, "{made:?}");
    for round in 0..3 {
        let replay = String::from_utf8(ORDERS.to_vec())?
            .replace("\"offset\": 12", &format!("\"offset\": 3{round}"));
        let n = ingest(&lake, replay.as_bytes()).await?;
        calls.take();
        refine::handle(&refiner, &event(&n)).await?.into_result()?;
        let made = calls.take();
        let log: Vec<&String> = made.iter().filter(|c| c.contains("_delta_log")).collect();
        eprintln!(
            "round {round}: {} requests, {} on logs:\n  {}",
            made.len(),
            log.len(),
            made.iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\n  ")
        );
        assert!(
            !log.iter()
                .any(|c| c.starts_with("get ") && c.contains("00000000000000000000.json")),
            "round {round}: a warm run read a log from its start: {log:?}"
        );
    }
    Ok(())
}
