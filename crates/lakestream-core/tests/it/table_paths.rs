//! The lake opens a table only at a plain relative name under its root (issue 24 defect 1):
//! `..`, `.`, percent-encoded dots, `?`, `#`, `\`, empty and `_`-leading segments are refused at
//! the one place every table open goes through, with a permanent error, and nothing is read or
//! written anywhere. Checked by walking the directory around a filesystem lake and by listing
//! everything under a unique prefix around an S3 lake.

use anyhow::{Context, Result};
use deltalake::logstore::object_store::{ObjectStore, aws::AmazonS3Builder, path::Path};
use futures::TryStreamExt;
use lakestream_core::seed::SeedGenerator;
use lakestream_core::{FixedClock, KafkaIngestor, Lake};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::{Backend, EXAMPLE, backends};
use std::sync::Arc;

/// Names the lake must refuse (`{t}` is a token unique to the run, so an escape on S3 is found).
const HOSTILE: &[&str] = &[
    "../{t}-escape",
    "../../{t}-outside",
    "..",
    ".",
    "%2e%2e",
    "%2E%2e/x",
    "a/%2e%2e/%2e%2e/{t}-enc",
    "a/../../{t}-up",
    "a/./b",
    "./a",
    "a/b/..",
    "victim?x",
    "victim#x",
    "victim%3Fx",
    "a\\b",
    "..\\{t}-back",
    "",
    "/",
    "a//b",
    "/abs/{t}",
    "_delta_log",
    "raw/_delta_log",
    "raw/_symlink_format_manifest",
    ".hidden",
    "raw/.{t}-dot",
    "raw order",
    "raw\norder",
];

/// A config whose lake is `<sandbox>/a/b/lake` (fs) or `s3://<bucket>/<token>/lake` (S3).
fn config(backend: Backend, sandbox: &std::path::Path, token: &str) -> Result<PipelineConfig> {
    let mut config = PipelineConfig::from_toml(EXAMPLE)?;
    config.commit.max_attempts = 2;
    config.commit.base_backoff_ms = 1;
    match backend {
        Backend::Fs => {
            let root = sandbox.join("a/b/lake");
            std::fs::create_dir_all(&root)?;
            config.lake.root = root.to_string_lossy().into_owned();
        }
        Backend::S3 => {
            config.lake.root = format!("s3://{}/{token}/lake", bucket());
            config.lake.endpoint_url = Some(std::env::var("LAKESTREAM_TEST_S3_ENDPOINT")?);
            config.lake.region = Some("us-east-1".into());
            config.lake.allow_http = true;
        }
    }
    Ok(config)
}

fn bucket() -> String {
    std::env::var("LAKESTREAM_TEST_S3_BUCKET").unwrap_or_else(|_| "lakestream-test".into())
}

/// Every key of the emulator bucket that starts with `token` (the lake's parent and any
/// `<token>-...` escape next to it).
async fn s3_keys(token: &str) -> Result<Vec<String>> {
    let store = AmazonS3Builder::from_env()
        .with_bucket_name(bucket())
        .with_endpoint(std::env::var("LAKESTREAM_TEST_S3_ENDPOINT")?)
        .with_region("us-east-1")
        .with_allow_http(true)
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .build()?;
    let all: Vec<_> = store.list(None).try_collect().await?;
    let mut keys: Vec<String> = all
        .into_iter()
        .map(|m| m.location.to_string())
        .filter(|k| k.starts_with(token))
        .collect();
    keys.sort();
    Ok(keys)
}

/// Every directory and file below `dir`, relative.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap_or(&p).display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_open_refuses_a_name_that_is_not_a_plain_path_under_the_root() -> Result<()> {
    for backend in backends() {
        let sandbox = tempfile::tempdir()?;
        let token = format!("secnames-{:016x}", fastrand::u64(..));
        let config = config(backend, sandbox.path(), &token)?;
        let lake = Lake::new(&config.lake)?;
        for pattern in HOSTILE {
            let name = pattern.replace("{t}", &token);
            match lake.table_url(&name) {
                Err(e) => {
                    assert!(!e.is_retryable(), "{name:?}: a bad name is permanent");
                    assert!(
                        e.to_string().contains("relative path"),
                        "{name:?}: the error says what to use: {e}"
                    );
                }
                Ok(url) => panic!("{backend:?} {name:?}: expected a refusal, got {url}"),
            }
            assert!(
                matches!(
                    lakestream_core::table::TableHandle::open(&lake, &name),
                    Err(e) if !e.is_retryable()
                ),
                "{backend:?} {name:?}: the handle open refuses it too"
            );
            if name.trim_matches('/').is_empty() {
                // Before the fix these resolved to the root of the disk or the bucket: no write.
                continue;
            }
            // A write through the ingestor: the topic's table is the hostile name.
            let mut cfg = config.clone();
            cfg.topics[0].table = name.clone();
            let clock = FixedClock::new(
                chrono::DateTime::from_timestamp(1_764_400_000, 0).context("timestamp")?,
            );
            let ingestor = KafkaIngestor::with_lake(cfg, lake.clone(), Arc::new(clock));
            let start = chrono::DateTime::from_timestamp(1_649_067_330, 0).unwrap_or_default();
            let mut g = SeedGenerator::new(7, start, 1000);
            let records: Vec<_> = (0..3).map(|_| g.order()).collect();
            match ingestor.ingest(&records).await {
                Err(e) if !e.is_retryable() && e.to_string().contains("relative path") => {}
                Ok(r) => assert_eq!(
                    (r.written, r.dead_lettered),
                    (0, 3),
                    "{backend:?} {name:?}: nothing reaches a refused table"
                ),
                Err(e) => panic!("{backend:?} {name:?}: unexpected error {e}"),
            }
        }
        // Valid names still open, including the internal `_lakestream/` tables.
        for ok in [
            "raw/order",
            "access_logs/a.b-c",
            "x=1/y_2",
            "_lakestream/job/tombstones",
        ] {
            lake.table_url(ok)
                .with_context(|| format!("{backend:?} {ok}"))?;
        }
        match backend {
            Backend::Fs => {
                let seen = walk(sandbox.path());
                let stray: Vec<&String> = seen
                    .iter()
                    .filter(|p| {
                        !["a", "a/b", "a/b/lake"].contains(&p.as_str())
                            && !["dead_letters", "raw", "access_logs", "x=1", "_lakestream"]
                                .iter()
                                .any(|d| {
                                    let d = format!("a/b/lake/{d}");
                                    **p == d || p.starts_with(&format!("{d}/"))
                                })
                    })
                    .collect();
                assert!(stray.is_empty(), "written outside its place: {stray:?}");
                assert!(
                    !seen
                        .iter()
                        .any(|p| p.ends_with("_delta_log")
                            && p != "a/b/lake/dead_letters/_delta_log"),
                    "no table but the dead letters: {seen:?}"
                );
            }
            Backend::S3 => {
                let keys = s3_keys(&token).await?;
                let stray: Vec<&String> = keys
                    .iter()
                    .filter(|k| {
                        !k.starts_with(&format!("{token}/lake/dead_letters/"))
                            && !k.starts_with(&format!("{token}/lake/_lakestream/probe/"))
                    })
                    .collect();
                assert!(stray.is_empty(), "written outside its place: {stray:?}");
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_location_too_long_for_the_storage_is_refused_for_good() -> Result<()> {
    for backend in backends() {
        let sandbox = tempfile::tempdir()?;
        let token = format!("secnames-{:016x}", fastrand::u64(..));
        let config = config(backend, sandbox.path(), &token)?;
        let lake = Lake::new(&config.lake)?;
        // A segment longer than a file name may be (255 bytes).
        let long_segment = format!("raw/{}", "s".repeat(256));
        assert!(
            lake.table_url(&long_segment)
                .is_err_and(|e| !e.is_retryable() && e.to_string().contains("too long")),
            "{backend:?}: a 256-byte segment"
        );
        // A location that leaves less than 160 bytes for the files under it.
        let limit = if backend == Backend::Fs { 4095 } else { 1024 };
        let deep = vec!["d".repeat(200); limit / 201 + 1].join("/");
        match lake.table_url(&deep) {
            Err(e) => assert!(
                !e.is_retryable() && e.to_string().contains("too long"),
                "{e}"
            ),
            Ok(url) => panic!("{backend:?}: expected a refusal, got {url}"),
        }
        if backend == Backend::Fs {
            assert_eq!(walk(sandbox.path()), ["a", "a/b", "a/b/lake"]);
        } else {
            assert_eq!(s3_keys(&token).await?, Vec::<String>::new());
        }
    }
    Ok(())
}

#[test]
fn object_store_paths_agree_with_the_lake() -> Result<()> {
    // Every name the lake accepts is one object_store path (no segment it would re-encode).
    for ok in ["raw/order", "access_logs/a.b-c", "x=1/y_2"] {
        assert_eq!(Path::parse(ok)?.as_ref(), ok);
    }
    Ok(())
}
