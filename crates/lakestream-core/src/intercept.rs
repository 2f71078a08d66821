//! Hooks around a table store: a [`StoreWrapper`] that forwards every call to the real store
//! and runs [`LogPutHooks`] before and after each `_delta_log/<version>.json` PUT, or tells a
//! [`CallObserver`] of every call, or gives every GET, HEAD and PUT a [`Latency`]. Tests inject
//! faults and crash points with it (`tests/it/faults.rs`, the CLI's test-only `--crash-at`),
//! count requests (`tests/it/requests.rs`) and see which ones are in flight together; production
//! never installs one.

use crate::storage::StoreWrapper;
use async_trait::async_trait;
use deltalake::logstore::object_store::{
    self, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, path::Path,
};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// What happens around a commit's log-entry PUT (every other call is forwarded untouched).
pub trait LogPutHooks: Send + Sync + 'static {
    /// Runs before the log entry is forwarded; an error is returned instead of writing it.
    fn before(&self) -> BoxFuture<'_, object_store::Result<()>>;
    /// Runs after it was forwarded, with the store's answer; may replace the answer.
    fn after(
        &self,
        location: &Path,
        result: object_store::Result<PutResult>,
    ) -> object_store::Result<PutResult>;
}

/// True for a commit's log entry: `_delta_log/<version>.json` written with `If-None-Match: *`.
fn is_log_entry(location: &Path, opts: &PutOptions) -> bool {
    location.as_ref().contains("_delta_log/")
        && location.as_ref().ends_with(".json")
        && matches!(opts.mode, PutMode::Create)
}

/// Told of every call to a table store: the operation (`put`, `put_multipart`, `get`, `head`,
/// `delete`, `list`, `list_from`, `list_dir`, `copy`) and its path or prefix.
pub type CallObserver = Arc<dyn Fn(&str, Option<&Path>) + Send + Sync>;

/// A latency given to every GET, HEAD and PUT (each waits `delay` before it is forwarded),
/// and the most of them seen in flight at once: how many requests an operation overlaps.
#[derive(Debug, Default)]
pub struct Latency {
    delay: Duration,
    /// Only requests whose path contains this are counted in flight (all when empty).
    counted: String,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

impl Latency {
    /// Every request waits `delay`; those whose path contains `counted` (every one when
    /// empty) are counted in flight.
    pub fn new(delay: Duration, counted: &str) -> Arc<Self> {
        Arc::new(Self {
            delay,
            counted: counted.to_string(),
            ..Default::default()
        })
    }

    /// The most requests in flight at once since the last [`reset`](Self::reset).
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Forget the peak.
    pub fn reset(&self) {
        self.peak.store(0, Ordering::SeqCst);
    }

    async fn wait(&self, location: &Path) -> Option<InFlight<'_>> {
        // Counted down when dropped, even when the request is dropped during its delay.
        let guard = location.as_ref().contains(self.counted.as_str()).then(|| {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            InFlight(self)
        });
        tokio::time::sleep(self.delay).await;
        guard
    }
}

/// One counted request in flight (counted down when dropped).
struct InFlight<'a>(&'a Latency);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A store wrapper running `hooks` around every table store's log-entry PUTs.
pub fn hook_log_puts(hooks: Arc<dyn LogPutHooks>) -> StoreWrapper {
    wrapper(Some(hooks), None, None)
}

/// A store wrapper telling `observer` of every call to every table store.
pub fn observe_calls(observer: CallObserver) -> StoreWrapper {
    wrapper(None, Some(observer), None)
}

/// A store wrapper giving every table store's GETs, HEADs and PUTs `latency`, and telling
/// `observer` of every call.
pub fn with_latency(latency: Arc<Latency>, observer: CallObserver) -> StoreWrapper {
    wrapper(None, Some(observer), Some(latency))
}

fn wrapper(
    hooks: Option<Arc<dyn LogPutHooks>>,
    observer: Option<CallObserver>,
    latency: Option<Arc<Latency>>,
) -> StoreWrapper {
    Arc::new(move |inner| {
        Arc::new(Intercepted {
            inner,
            hooks: hooks.clone(),
            observer: observer.clone(),
            latency: latency.clone(),
        }) as Arc<dyn ObjectStore>
    })
}

struct Intercepted {
    inner: Arc<dyn ObjectStore>,
    hooks: Option<Arc<dyn LogPutHooks>>,
    observer: Option<CallObserver>,
    latency: Option<Arc<Latency>>,
}

impl Intercepted {
    fn saw(&self, op: &str, path: Option<&Path>) {
        if let Some(observe) = &self.observer {
            observe(op, path);
        }
    }

    async fn wait(&self, location: &Path) -> Option<InFlight<'_>> {
        match &self.latency {
            Some(l) => l.wait(location).await,
            None => None,
        }
    }
}

impl std::fmt::Debug for Intercepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Intercepted({})", self.inner)
    }
}

impl std::fmt::Display for Intercepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Intercepted({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Intercepted {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.saw("put", Some(location));
        let _in_flight = self.wait(location).await;
        let Some(hooks) = self
            .hooks
            .as_ref()
            .filter(|_| is_log_entry(location, &opts))
        else {
            return self.inner.put_opts(location, payload, opts).await;
        };
        hooks.before().await?;
        let result = self.inner.put_opts(location, payload, opts).await;
        hooks.after(location, result)
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.saw("put_multipart", Some(location));
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.saw(if options.head { "head" } else { "get" }, Some(location));
        let _in_flight = self.wait(location).await;
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.saw("delete", None);
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.saw("list", prefix);
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.saw("list_from", prefix);
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.saw("list_dir", prefix);
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.saw("copy", Some(from));
        self.inner.copy_opts(from, to, options).await
    }
}
