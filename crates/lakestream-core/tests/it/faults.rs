//! An object-store wrapper that injects faults and hooks into a table's storage, installed with
//! [`Lake::with_store_wrapper`](lakestream_core::Lake::with_store_wrapper).

use async_trait::async_trait;
use deltalake::logstore::object_store::{
    self, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, path::Path,
};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use lakestream_core::Lake;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Faults applied to conditional log-entry PUTs (`_delta_log/*.json`, `If-None-Match: *`).
#[derive(Default)]
pub struct Faults {
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
        let faults = self.clone();
        lake.with_store_wrapper(Arc::new(move |inner| {
            Arc::new(Faulty {
                inner,
                faults: faults.clone(),
            }) as Arc<dyn ObjectStore>
        }))
    }
}

struct Faulty {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<Faults>,
}

impl std::fmt::Debug for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Faulty")
    }
}

impl std::fmt::Display for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Faulty")
    }
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: what.to_string().into(),
    }
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let is_log_entry = location.as_ref().contains("_delta_log/")
            && location.as_ref().ends_with(".json")
            && matches!(opts.mode, PutMode::Create);
        if !is_log_entry {
            return self.inner.put_opts(location, payload, opts).await;
        }
        self.faults.log_puts.fetch_add(1, Ordering::SeqCst);
        let hook = self
            .faults
            .before_log_put
            .lock()
            .ok()
            .and_then(|mut h| h.take());
        if let Some(hook) = hook {
            hook.await;
        }
        if Faults::take(&self.faults.refuse) {
            return Err(injected("503 Slow Down (injected, before the write)"));
        }
        let res = self.inner.put_opts(location, payload, opts).await?;
        if Faults::take(&self.faults.land_then_exists) {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "412 Precondition Failed on the retry (injected)".into(),
            });
        }
        if Faults::take(&self.faults.land_then_fail) {
            return Err(injected("connection reset after upload (injected)"));
        }
        Ok(res)
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
