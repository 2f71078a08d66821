//! Test-only crash points (`--crash-at STEP[:N]`, hidden): the process aborts at the N-th time
//! (default 1st) it reaches STEP, the way a Lambda container dies when it is killed or times
//! out. The fault suite (`tests/chaos`) crashes invocations at every step of a commit and then
//! redelivers the event, checking that nothing is lost or duplicated.
//!
//! Steps: `after-data-put` (the commit's data files landed, its `_delta_log` entry was not
//! written: checked at the log PUT, since data files are always written first and delta-rs's
//! writer opens its own store), `after-log-put` (the log entry landed, the writer never learns
//! the result), `after-commit` (the handler finished, the response is never sent). `:N` counts
//! commits (log-entry PUTs) for the first two.

use deltalake::logstore::object_store::{self, PutResult, path::Path};
use futures::future::BoxFuture;
use lakestream_core::Lake;
use lakestream_core::intercept::{LogPutHooks, hook_log_puts};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where to crash: after this step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// After a commit's data files landed, before its log entry is written.
    DataPut,
    /// After a commit's log-entry PUT reached storage, before its result is used.
    LogPut,
    /// After the handler returned, before the response is printed.
    Committed,
}

/// A crash point: the step and which occurrence of it (1-based).
#[derive(Debug, Clone)]
pub struct CrashAt {
    step: Step,
    nth: usize,
    seen: Arc<AtomicUsize>,
}

impl std::str::FromStr for CrashAt {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, nth) = match s.split_once(':') {
            Some((n, k)) => (n, k.parse().map_err(|_| format!("bad occurrence `{k}`"))?),
            None => (s, 1),
        };
        let step = match name {
            "after-data-put" => Step::DataPut,
            "after-log-put" => Step::LogPut,
            "after-commit" => Step::Committed,
            _ => {
                return Err(format!(
                    "unknown step `{name}`: after-data-put, after-log-put or after-commit"
                ));
            }
        };
        Ok(Self {
            step,
            nth,
            seen: Arc::new(AtomicUsize::new(0)),
        })
    }
}

impl CrashAt {
    /// Record one arrival at `step`; abort the process on the chosen occurrence.
    pub fn reached(&self, step: Step) {
        if step == self.step && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.nth {
            eprintln!(
                "lakestream: crash point {step:?} #{} reached, aborting",
                self.nth
            );
            std::process::abort();
        }
    }

    /// The lake with every table's store reporting its PUTs to this crash point.
    pub fn install(&self, lake: Lake) -> Lake {
        lake.with_store_wrapper(hook_log_puts(Arc::new(self.clone())))
    }
}

impl LogPutHooks for CrashAt {
    fn before(&self) -> BoxFuture<'_, object_store::Result<()>> {
        self.reached(Step::DataPut);
        Box::pin(async { Ok(()) })
    }

    fn after(
        &self,
        _location: &Path,
        result: object_store::Result<PutResult>,
    ) -> object_store::Result<PutResult> {
        self.reached(Step::LogPut);
        result
    }
}
