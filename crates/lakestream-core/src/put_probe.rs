//! Proof, before the first write, that an S3 endpoint honours conditional PUTs.
//!
//! Every commit is a create-only PUT (`If-None-Match: *`) of the next log entry, and the commit
//! protocol is only safe when the endpoint refuses the second of two such PUTs of one key. AWS
//! S3 does; an S3-compatible server that ignores the header overwrites instead, and two writers
//! racing for one version are then both told they created it: one commit silently lost. So
//! before a process first writes to an S3 lake, [`Guard`] PUTs a probe object
//! `<lake>/_lakestream/probe/<uuid>` create-only twice — the second must be refused (412) —
//! and deletes it. Three requests, once per process and lake (endpoint + root); the verdict is
//! kept for the process.
//!
//! - Refused as it should be: writes go ahead.
//! - Accepted: every write to the lake fails with [`Refusal`] ([`Error::UnsafeStorage`],
//!   permanent), which names the endpoint and what to do; nothing is committed.
//! - The probe could not write (403): the same permanent error, saying which permission is
//!   missing (not kept: the next write probes again).
//! - Any other failure (network, throttling): that write fails as retryable and the next one
//!   probes again.
//!
//! Filesystem lakes are not probed (the local store's create is atomic). `[lake]
//! assume_conditional_put = true` skips the probe, for an endpoint known to honour
//! `If-None-Match` where the probe cannot write (no access under `_lakestream/`).
//!
//! [`Error::UnsafeStorage`]: crate::error::Error::UnsafeStorage

use crate::error::Refusal;
use async_trait::async_trait;
use deltalake::logstore::object_store::{
    self, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, path::Path,
};
use futures::stream::BoxStream;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// The probe of one lake (endpoint + root), shared by every handle of the process.
#[derive(Debug)]
pub struct Probe {
    /// Probe objects go under `<prefix>/_lakestream/probe/`.
    prefix: String,
    /// `s3://bucket/prefix/`.
    lake: String,
    /// The endpoint as the operator knows it.
    endpoint: String,
    /// Set once the endpoint's behaviour is known (`Err`: it ignores the condition).
    verdict: tokio::sync::OnceCell<Result<(), Refusal>>,
}

static PROBES: LazyLock<Mutex<HashMap<String, Arc<Probe>>>> = LazyLock::new(Default::default);

impl Probe {
    /// The process-wide probe of the S3 lake at `root` reached through `endpoint` (`None`: AWS).
    pub fn for_lake(root: &url::Url, endpoint: Option<&str>) -> Arc<Self> {
        let endpoint =
            endpoint.map_or_else(|| "AWS S3 (default endpoint)".to_string(), str::to_string);
        let key = format!("{endpoint} {root}");
        let mut probes = PROBES.lock().unwrap_or_else(|p| p.into_inner());
        probes
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Self {
                    prefix: root.path().trim_matches('/').to_string(),
                    lake: root.to_string(),
                    endpoint,
                    verdict: tokio::sync::OnceCell::new(),
                })
            })
            .clone()
    }

    /// `store` (the bucket-level store of one of the lake's tables) with every write held
    /// until the probe has passed.
    pub fn guard(self: &Arc<Self>, store: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(Guard {
            inner: store,
            probe: self.clone(),
        })
    }

    /// Run the probe through `store` unless its verdict is known; `Ok` when writes may go ahead.
    pub async fn check(&self, store: &dyn ObjectStore) -> object_store::Result<()> {
        let verdict = self.verdict.get_or_try_init(|| self.run(store)).await?;
        verdict
            .clone()
            .map_err(|r| object_store::Error::NotSupported {
                source: Box::new(r),
            })
    }

    /// Whether the probe has run and found the endpoint safe (tests and diagnostics).
    pub fn passed(&self) -> bool {
        matches!(self.verdict.get(), Some(Ok(())))
    }

    /// PUT create-only twice, then DELETE; `Ok(verdict)` when the endpoint's behaviour is known.
    async fn run(&self, store: &dyn ObjectStore) -> object_store::Result<Result<(), Refusal>> {
        let name = format!("_lakestream/probe/{}", uuid::Uuid::new_v4());
        let path = Path::from(if self.prefix.is_empty() {
            name
        } else {
            format!("{}/{name}", self.prefix)
        });
        let create = || PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let body = || PutPayload::from_static(b"lakestream conditional-put probe\n");
        // The first PUT may answer "exists" when object_store retried a PUT that had landed:
        // that is a conditional refusal too, and the second PUT decides either way.
        match store.put_opts(&path, body(), create()).await {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(e) => return self.failed(&path, e),
        }
        let second = store.put_opts(&path, body(), create()).await;
        if let Err(e) = store.delete(&path).await {
            tracing::warn!(object = %path, error = %e, "conditional-put probe object not deleted");
        }
        match second {
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => {
                tracing::debug!(lake = %self.lake, endpoint = %self.endpoint, "endpoint honours If-None-Match");
                Ok(Ok(()))
            }
            Ok(_) => {
                tracing::error!(lake = %self.lake, endpoint = %self.endpoint, "endpoint ignores If-None-Match; refusing to write");
                Ok(Err(Refusal(format!(
                    "lake `{}`: the S3 endpoint {} ignores conditional writes: a second PUT of \
                     `{path}` with `If-None-Match: *` was accepted instead of refused with 412 \
                     Precondition Failed. Every commit relies on that refusal (two writers of \
                     one table version would both succeed and one commit would be lost), so \
                     Lakestream writes nothing to this lake. Use an endpoint that honours \
                     If-None-Match (AWS S3 does; for an S3-compatible server, a version or \
                     setting with conditional writes). `[lake] assume_conditional_put = true` \
                     skips this check: set it only for an endpoint known to honour \
                     If-None-Match where the probe cannot run",
                    self.lake, self.endpoint
                ))))
            }
            Err(e) => self.failed(&path, e),
        }
    }

    /// A probe PUT failed: permanent for missing permissions (with what to grant), else
    /// retryable (the next write probes again).
    fn failed(
        &self,
        path: &Path,
        e: object_store::Error,
    ) -> object_store::Result<Result<(), Refusal>> {
        match e {
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => {
                Err(object_store::Error::NotSupported {
                    source: Box::new(Refusal(format!(
                        "lake `{}`: cannot check that the S3 endpoint {} honours conditional \
                         writes: the probe PUT of `{path}` was refused ({e}). Allow s3:PutObject \
                         and s3:DeleteObject on `{}_lakestream/probe/*`, or, if the endpoint is \
                         known to honour If-None-Match, set `[lake] assume_conditional_put = true`",
                        self.lake, self.endpoint, self.lake
                    ))),
                })
            }
            e => Err(object_store::Error::Generic {
                store: "conditional-put probe",
                source: format!(
                    "checking that {} honours If-None-Match (PUT `{path}`) failed: {e}",
                    self.endpoint
                )
                .into(),
            }),
        }
    }
}

/// A table's store whose writes wait for the lake's [`Probe`] (see the module docs).
#[derive(Debug)]
struct Guard {
    inner: Arc<dyn ObjectStore>,
    probe: Arc<Probe>,
}

impl std::fmt::Display for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConditionalPutGuard({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Guard {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.probe.check(self.inner.as_ref()).await?;
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.probe.check(self.inner.as_ref()).await?;
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.probe.check(self.inner.as_ref()).await?;
        self.inner.copy_opts(from, to, options).await
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
}

#[cfg(test)]
mod tests;
