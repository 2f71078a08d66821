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

use async_trait::async_trait;
use deltalake::logstore::object_store::{
    self, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, path::Path,
};
use futures::stream::BoxStream;
use lakestream_core::Lake;
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
        let crash = self.clone();
        lake.with_store_wrapper(Arc::new(move |inner| {
            Arc::new(Crashing {
                inner,
                crash: crash.clone(),
            }) as Arc<dyn ObjectStore>
        }))
    }
}

struct Crashing {
    inner: Arc<dyn ObjectStore>,
    crash: CrashAt,
}

impl std::fmt::Debug for Crashing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Crashing({})", self.inner)
    }
}

impl std::fmt::Display for Crashing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Crashing({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Crashing {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let log_entry = location.as_ref().contains("_delta_log/")
            && location.as_ref().ends_with(".json")
            && matches!(opts.mode, PutMode::Create);
        if !log_entry {
            return self.inner.put_opts(location, payload, opts).await;
        }
        self.crash.reached(Step::DataPut);
        let res = self.inner.put_opts(location, payload, opts).await;
        self.crash.reached(Step::LogPut);
        res
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
