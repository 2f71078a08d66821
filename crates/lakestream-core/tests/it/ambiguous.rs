//! The "unknown outcome" rule, fault-injected: the conditional PUT of a log entry lands, but the
//! writer sees an error (a connection reset after the upload). The engine must read the log,
//! find its own commit, report success, and not write the rows a second time.

use anyhow::Result;
use async_trait::async_trait;
use deltalake::logstore::object_store::{
    self, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, local::LocalFileSystem, path::Path,
};
use futures::stream::BoxStream;
use lakestream_core::commit::CommitSettings;
use lakestream_core::deadletter::{DeadLetter, write_dead_letters};
use lakestream_core::handle::TableHandle;
use lakestream_core::{Lake, read};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Lets every write through, then fails the first `fail` log-entry creations *after* they landed.
#[derive(Debug)]
struct LandsThenFails {
    inner: LocalFileSystem,
    fail: AtomicUsize,
}

impl std::fmt::Display for LandsThenFails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LandsThenFails")
    }
}

#[async_trait]
impl ObjectStore for LandsThenFails {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let is_log_entry =
            location.as_ref().contains("_delta_log/") && location.as_ref().ends_with(".json");
        let create = matches!(opts.mode, PutMode::Create);
        let res = self.inner.put_opts(location, payload, opts).await?;
        if is_log_entry
            && create
            && self
                .fail
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(object_store::Error::Generic {
                store: "test",
                source: "connection reset after upload".into(),
            });
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

fn letters(n: i64) -> Vec<DeadLetter> {
    (0..n)
        .map(|o| DeadLetter {
            topic: Some("orders".into()),
            partition: Some(0),
            offset: Some(o),
            kafka_timestamp_ms: None,
            object_uri: None,
            line_number: None,
            raw_base64: Some("e30=".into()),
            error: "test".into(),
            target_table: None,
            txn: None,
        })
        .collect()
}

#[tokio::test]
async fn a_commit_that_landed_but_errored_is_resolved_from_the_log() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let lake = Lake::local(dir.path())?;
    let settings = CommitSettings {
        checkpoint_interval: 10,
        max_attempts: 5,
        inner_retries: 3,
        base_backoff: std::time::Duration::from_millis(5),
        max_backoff: std::time::Duration::from_millis(20),
    };
    let now = chrono::Utc::now();
    // Version 0 normally.
    let mut plain = TableHandle::open(&lake, "dead_letters")?;
    write_dead_letters(&lake, &mut plain, "p", &settings, &letters(3), now).await?;

    // Version 1: the log PUT lands, the writer gets an error.
    let url = lake.table_url("dead_letters")?;
    let store = Arc::new(LandsThenFails {
        inner: LocalFileSystem::new(),
        fail: AtomicUsize::new(1),
    });
    let table = deltalake::DeltaTableBuilder::from_url(url.clone())?
        .with_storage_backend(store.clone(), url)
        .build()?;
    let mut faulty = TableHandle::from_table("dead_letters", table);
    let out = write_dead_letters(&lake, &mut faulty, "p", &settings, &letters(6), now).await?;
    assert_eq!(
        store.fail.load(Ordering::SeqCst),
        0,
        "the fault was injected"
    );
    assert!(out.commit.resolved_from_log, "{:?}", out.commit);
    assert_eq!(out.commit.version, Some(1));
    assert_eq!(
        out.written.iter().filter(|w| **w).count(),
        3,
        "offsets 3..5 were new"
    );

    let rows = read::read_table(&lake, "dead_letters", None).await?;
    assert_eq!(
        rows.num_rows(),
        6,
        "written once, not retried into a duplicate"
    );
    let again = write_dead_letters(&lake, &mut plain, "p", &settings, &letters(6), now).await?;
    assert_eq!(
        again.commit.version, None,
        "a replay finds everything committed"
    );
    Ok(())
}
