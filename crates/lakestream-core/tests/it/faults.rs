//! An object-store wrapper that injects faults and hooks into a table's storage, installed with
//! [`Lake::with_store_wrapper`](lakestream_core::Lake::with_store_wrapper).

use deltalake::logstore::object_store::{self, PutResult, path::Path};
use futures::future::BoxFuture;
use lakestream_core::Lake;
use lakestream_core::intercept::{LogPutHooks, hook_log_puts};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Faults applied to conditional log-entry PUTs (`_delta_log/*.json`, `If-None-Match: *`).
#[derive(Default)]
pub struct Faults {
    /// Let the next N log PUTs through before `refuse` applies (e.g. a tombstone commit
    /// that lands before the output commit that is refused).
    pub pass_first: AtomicUsize,
    /// Refuse the next N log PUTs before they reach storage (a 503 the SDK gave up on).
    pub refuse: AtomicUsize,
    /// Let the next N log PUTs land, then answer with an error (outcome unknown to the writer).
    pub land_then_fail: AtomicUsize,
    /// Let the next N log PUTs land, then answer "already exists" (what object_store reports
    /// when it retries a PUT whose first try landed but was answered with a 500).
    pub land_then_exists: AtomicUsize,
    /// Run once, before the first log PUT is forwarded (another writer commits "meanwhile").
    pub before_log_put: Mutex<Option<BoxFuture<'static, ()>>>,
    /// Log PUTs seen.
    pub log_puts: AtomicUsize,
}

impl Faults {
    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// A lake whose tables go through these faults.
    pub fn install(self: &Arc<Self>, lake: Lake) -> Lake {
        lake.with_store_wrapper(hook_log_puts(self.clone()))
    }

    /// Before the next log PUT, a compaction of `table` (`--min-files 2`) runs and must land:
    /// "meanwhile", between a change's plan and its commit.
    pub fn compact_before_next_log_put(&self, lake: &Lake, table: &'static str) {
        let (lake, opts) = (
            lake.clone(),
            lakestream_core::maintenance::CompactOptions {
                min_small_files: 2,
                ..Default::default()
            },
        );
        let hook = async move {
            // `compact` takes a non-Send progress callback: run it on its own runtime.
            let landed = tokio::task::spawn_blocking(move || {
                let rt = tokio::runtime::Runtime::new().ok()?;
                let now = chrono::Utc::now();
                let r = rt.block_on(lakestream_core::maintenance::compact(
                    &lake,
                    table,
                    &opts,
                    now,
                    &|_, _| {},
                ));
                r.ok()?.version
            })
            .await;
            assert!(matches!(landed, Ok(Some(_))), "the compaction must land");
        };
        if let Ok(mut slot) = self.before_log_put.lock() {
            *slot = Some(Box::pin(hook));
        }
    }
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: what.to_string().into(),
    }
}

impl LogPutHooks for Faults {
    fn before(&self) -> BoxFuture<'_, object_store::Result<()>> {
        Box::pin(async move {
            self.log_puts.fetch_add(1, Ordering::SeqCst);
            let hook = self.before_log_put.lock().ok().and_then(|mut h| h.take());
            if let Some(hook) = hook {
                hook.await;
            }
            if Faults::take(&self.pass_first) {
                return Ok(());
            }
            if Faults::take(&self.refuse) {
                return Err(injected("503 Slow Down (injected, before the write)"));
            }
            Ok(())
        })
    }

    fn after(
        &self,
        location: &Path,
        result: object_store::Result<PutResult>,
    ) -> object_store::Result<PutResult> {
        let res = result?;
        if Faults::take(&self.land_then_exists) {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "412 Precondition Failed on the retry (injected)".into(),
            });
        }
        if Faults::take(&self.land_then_fail) {
            return Err(injected("connection reset after upload (injected)"));
        }
        Ok(res)
    }
}
