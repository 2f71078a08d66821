//! Unit tests of the conditional-PUT probe against endpoints that honour, ignore or fail
//! `If-None-Match`.

use super::*;
use deltalake::logstore::object_store::memory::InMemory;
use futures::TryStreamExt;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A store that answers create-only PUTs like plain ones (an endpoint ignoring
/// `If-None-Match`), and counts the PUTs it sees; `fail_puts` first PUTs fail with a 503.
#[derive(Debug)]
struct Endpoint {
    inner: InMemory,
    ignores_conditions: bool,
    puts: AtomicUsize,
    fail_puts: AtomicUsize,
}

impl Endpoint {
    fn new(ignores_conditions: bool) -> Arc<Self> {
        Arc::new(Self {
            inner: InMemory::new(),
            ignores_conditions,
            puts: AtomicUsize::new(0),
            fail_puts: AtomicUsize::new(0),
        })
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint")
    }
}

#[async_trait]
impl ObjectStore for Endpoint {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        if self
            .fail_puts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(object_store::Error::Generic {
                store: "test",
                source: "503 Slow Down".into(),
            });
        }
        if self.ignores_conditions {
            opts.mode = PutMode::Overwrite;
        }
        self.inner.put_opts(location, payload, opts).await
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
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

fn lake(name: &str) -> url::Url {
    let unique = format!("s3://bucket/{name}-{:016x}/", fastrand::u64(..));
    url::Url::parse(&unique).expect("url")
}

fn create() -> PutOptions {
    PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    }
}

async fn objects(store: &Endpoint) -> Vec<String> {
    let all: Vec<ObjectMeta> = store.inner.list(None).try_collect().await.expect("list");
    all.into_iter().map(|m| m.location.to_string()).collect()
}

#[tokio::test]
async fn an_endpoint_honouring_if_none_match_is_probed_once_per_lake() -> anyhow::Result<()> {
    let endpoint = Endpoint::new(false);
    let root = lake("honoured");
    let probe = Probe::for_lake(&root, Some("http://127.0.0.1:1"));
    let table = probe.guard(endpoint.clone());
    let commit = Path::from(format!(
        "{}/t/_delta_log/0.json",
        root.path().trim_matches('/')
    ));
    table.put_opts(&commit, "{}".into(), create()).await?;
    assert!(probe.passed());
    // Two probe PUTs and the commit; the probe object is gone.
    assert_eq!(endpoint.puts.load(Ordering::SeqCst), 3);
    assert_eq!(objects(&endpoint).await, [commit.to_string()]);
    // Another handle of the same lake (same endpoint) does not probe again.
    let again = Probe::for_lake(&root, Some("http://127.0.0.1:1")).guard(endpoint.clone());
    again.put(&Path::from("x"), "1".into()).await?;
    assert_eq!(endpoint.puts.load(Ordering::SeqCst), 4);
    Ok(())
}

#[tokio::test]
async fn an_endpoint_ignoring_if_none_match_gets_no_write() -> anyhow::Result<()> {
    let endpoint = Endpoint::new(true);
    let root = lake("ignored");
    let probe = Probe::for_lake(&root, Some("http://10.0.0.9:9000"));
    let table = probe.guard(endpoint.clone());
    let commit = Path::from("t/_delta_log/00000000000000000000.json");
    for _ in 0..2 {
        let err = table
            .put_opts(&commit, "{}".into(), create())
            .await
            .expect_err("refused");
        assert!(
            matches!(err, object_store::Error::NotSupported { .. }),
            "{err}"
        );
        // As the engine sees it: a permanent, named error.
        let e = crate::error::Error::storage("raw/order", err);
        assert!(!e.is_retryable(), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("http://10.0.0.9:9000")
                && msg.contains("If-None-Match")
                && msg.contains(root.as_str())
                && msg.contains("assume_conditional_put"),
            "{msg}"
        );
        assert!(matches!(e, crate::error::Error::UnsafeStorage(_)), "{e:?}");
    }
    // Probed once (the verdict is kept), nothing written, the probe object deleted.
    assert_eq!(endpoint.puts.load(Ordering::SeqCst), 2);
    assert!(objects(&endpoint).await.is_empty());
    // Reads still work (inspecting a lake is harmless).
    assert!(matches!(
        table.get(&commit).await,
        Err(object_store::Error::NotFound { .. })
    ));
    Ok(())
}

#[tokio::test]
async fn a_probe_that_could_not_finish_fails_the_write_as_retryable_and_runs_again()
-> anyhow::Result<()> {
    let endpoint = Endpoint::new(false);
    endpoint.fail_puts.store(1, Ordering::SeqCst);
    let probe = Probe::for_lake(&lake("flaky"), None);
    let table = probe.guard(endpoint.clone());
    let err = table
        .put(&Path::from("a"), "1".into())
        .await
        .expect_err("503");
    let e = crate::error::Error::storage("raw/order", err);
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains("AWS S3 (default endpoint)"), "{e}");
    assert!(!probe.passed());
    table.put(&Path::from("a"), "1".into()).await?;
    assert!(probe.passed());
    Ok(())
}
