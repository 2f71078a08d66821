//! `LAKESTREAM_CONFIG` sources: inline, file, and an `s3://` object on the S3 emulator.

use deltalake::logstore::object_store::{
    ObjectStoreExt, PutPayload, aws::AmazonS3Builder, path::Path,
};
use lakestream_lambda::config_source::{S3Access, load_config};
use lakestream_testkit::{EXAMPLE, s3_endpoint, unique_suffix};

#[tokio::test]
async fn file_and_inline_sources() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("p.toml");
    std::fs::write(&path, EXAMPLE)?;
    let from_file = load_config(&path.to_string_lossy(), &S3Access::default()).await?;
    let inline = load_config(EXAMPLE, &S3Access::default()).await?;
    assert_eq!(from_file.pipeline, "orders-raw");
    assert_eq!(inline.topics.len(), 2);
    let missing = load_config("/nonexistent/lakestream.toml", &S3Access::default()).await;
    assert!(missing.is_err_and(|e| e.to_string().contains("/nonexistent/lakestream.toml")));
    Ok(())
}

#[tokio::test]
async fn s3_source_on_the_emulator() -> anyhow::Result<()> {
    let Some(endpoint) = s3_endpoint() else {
        return Ok(());
    };
    let store = AmazonS3Builder::new()
        .with_bucket_name("lakestream-test")
        .with_endpoint(&endpoint)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .build()?;
    let key = format!("configs/{}/lakestream.toml", unique_suffix());
    store
        .put(
            &Path::from(key.as_str()),
            PutPayload::from(EXAMPLE.as_bytes().to_vec()),
        )
        .await?;
    let access = S3Access {
        endpoint_url: Some(endpoint),
        region: Some("us-east-1".into()),
        allow_http: true,
    };
    let cfg = load_config(&format!("s3://lakestream-test/{key}"), &access).await?;
    assert_eq!(cfg.topics[0].table, "raw/order");
    let missing = load_config("s3://lakestream-test/configs/none.toml", &access).await;
    assert!(missing.is_err_and(|e| e.to_string().contains("could not be read")));
    Ok(())
}

/// `LAKESTREAM_LOG_BUCKETS` (set by the template to the raw-logs bucket) replaces
/// `access_logs.source_buckets`; a name that is not a bucket name fails at start.
#[tokio::test]
async fn log_buckets_come_from_the_environment() -> anyhow::Result<()> {
    use lakestream_lambda::config_source::FunctionEnv;
    let env = |buckets: Option<&str>| {
        FunctionEnv::from_lookup(|k| match k {
            "LAKESTREAM_CONFIG" => Some(EXAMPLE.to_string()),
            "LAKESTREAM_LOG_BUCKETS" => buckets.map(String::from),
            _ => None,
        })
    };
    let example = env(None)?.load_config().await?;
    assert_eq!(example.access_logs.source_buckets, ["raw-logs"]);
    let set = env(Some(" logs-a , logs-b,"))?.load_config().await?;
    assert_eq!(set.access_logs.source_buckets, ["logs-a", "logs-b"]);
    assert!(set.access_logs.is_source("logs-b") && !set.access_logs.is_source("raw-logs"));
    let bad = env(Some("logs-a,../lake"))?.load_config().await;
    assert!(
        bad.is_err_and(|e| e.to_string().contains("LAKESTREAM_LOG_BUCKETS")
            && e.to_string().contains("../lake")),
        "a bad name fails at start, naming the variable"
    );
    Ok(())
}

/// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` (Lambda sets it) is read once, as MB; a value that is not a
/// number fails at start naming the variable.
#[test]
fn the_function_memory_comes_from_the_environment() -> anyhow::Result<()> {
    use lakestream_lambda::config_source::FunctionEnv;
    let env = |mb: Option<&str>| {
        FunctionEnv::from_lookup(|k| match k {
            "LAKESTREAM_CONFIG" => Some(EXAMPLE.to_string()),
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE" => mb.map(String::from),
            _ => None,
        })
    };
    assert_eq!(env(Some("1024"))?.memory_mb, Some(1024));
    assert_eq!(env(None)?.memory_mb, None);
    let bad = env(Some("1GB"));
    assert!(bad.is_err_and(|e| e.to_string().contains("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")));
    Ok(())
}
