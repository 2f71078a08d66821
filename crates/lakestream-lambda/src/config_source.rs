//! `LAKESTREAM_CONFIG` resolution: inline TOML, a file path, or an `s3://bucket/key` object.

use deltalake::logstore::object_store::{ObjectStoreExt, aws::AmazonS3Builder, path::Path};
use lakestream_core::Error;
use lakestream_formats::config::PipelineConfig;

/// Where the S3 config object is read from (endpoint override for S3-compatible servers).
#[derive(Debug, Clone, Default)]
pub struct S3Access {
    /// Custom endpoint URL.
    pub endpoint_url: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Allow HTTP.
    pub allow_http: bool,
}

/// Load and validate the pipeline config from `source`.
pub async fn load_config(source: &str, s3: &S3Access) -> Result<PipelineConfig, Error> {
    let Some(rest) = source.strip_prefix("s3://") else {
        return Ok(PipelineConfig::load(source)?);
    };
    let (bucket, key) = rest.split_once('/').ok_or_else(|| {
        Error::Config(format!(
            "LAKESTREAM_CONFIG `{source}`: expected s3://bucket/key"
        ))
    })?;
    let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
    if let Some(e) = &s3.endpoint_url {
        b = b.with_endpoint(e);
    }
    if let Some(r) = &s3.region {
        b = b.with_region(r);
    }
    let store = b
        .with_allow_http(s3.allow_http)
        .build()
        .map_err(|e| Error::Config(format!("LAKESTREAM_CONFIG `{source}`: {e}")))?;
    let bytes = async { store.get(&Path::from(key)).await?.bytes().await }
        .await
        .map_err(|e| {
            Error::Config(format!(
                "LAKESTREAM_CONFIG `{source}` could not be read: {e}"
            ))
        })?;
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| Error::Config(format!("LAKESTREAM_CONFIG `{source}` is not UTF-8")))?;
    Ok(PipelineConfig::from_toml(&text)?)
}

/// The log filter when `RUST_LOG` is unset: our `info` lines (errors, the EMF line), and only
/// warnings from delta-rs and its kernel, which log whole snapshots at `info` (~67 KB per
/// invocation, more CloudWatch Logs cost than the function's compute).
pub const DEFAULT_LOG_FILTER: &str = "info,buoyant_kernel=warn,deltalake_core=warn";

/// The environment every Lakestream function reads, typed. `main` passes the lookup (so this
/// library never reads the process environment itself).
#[derive(Debug, Clone)]
pub struct FunctionEnv {
    /// `LAKESTREAM_CONFIG`: file path, `s3://` URI or inline TOML.
    pub config_source: String,
    /// `LAKESTREAM_LAKE_ROOT`: overrides `lake.root`.
    pub lake_root: Option<String>,
    /// `RUST_LOG` (default [`DEFAULT_LOG_FILTER`]).
    pub log_filter: String,
    /// `LAKESTREAM_QUEUE_URL` (s3-log-ingest drain mode).
    pub queue_url: Option<String>,
    /// `LAKESTREAM_LOG_BUCKETS`: the buckets s3-log-ingest may read log objects from
    /// (comma-separated); replaces `access_logs.source_buckets`. The template sets it.
    pub log_buckets: Option<String>,
    /// `LAKESTREAM_REFINE_QUEUE_URL`: the refine function's FIFO queue the ingest functions
    /// send refine notices to after their commits (none: no notices, the schedule alone runs
    /// the refine jobs).
    pub refine_queue_url: Option<String>,
    /// `LAKESTREAM_JOB_METRICS` (refine): `behind` (default: a job's values are CloudWatch
    /// metrics only while it is behind its freshness target) or `all`.
    pub job_metrics: Option<String>,
    /// `LAKESTREAM_CATALOG_DATABASE` (maintenance): the Glue database the manifest job keeps
    /// the tables registered in; overrides `[catalog].database` (the template sets it, so the
    /// IAM policy and the function name one database). Empty turns the sync off.
    pub catalog_database: Option<String>,
    /// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` (set by Lambda): the function's memory in MB; refine
    /// caps each job's chunk to what it holds.
    pub memory_mb: Option<u64>,
    /// S3 access for an `s3://` config (`AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_ALLOW_HTTP`).
    pub s3: S3Access,
}

impl FunctionEnv {
    /// Read the variables through `get` (`|k| std::env::var(k).ok()` in `main`).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let get = |k: &str| get(k).filter(|v| !v.is_empty());
        if get("LAKESTREAM_FRESHNESS_TARGET_SECONDS").is_some() {
            return Err(Error::Config(
                "LAKESTREAM_FRESHNESS_TARGET_SECONDS is no longer read: set `freshness` (\"60s\", \"5m\", \"15m\") on the topics, [[cdc]] families and refine jobs in the config, and remove the variable".into(),
            ));
        }
        Ok(Self {
            config_source: get("LAKESTREAM_CONFIG").ok_or_else(|| {
                Error::Config("LAKESTREAM_CONFIG is not set: give a TOML file path, an s3:// URI or inline TOML".into())
            })?,
            lake_root: get("LAKESTREAM_LAKE_ROOT"),
            log_filter: get("RUST_LOG").unwrap_or_else(|| DEFAULT_LOG_FILTER.into()),
            queue_url: get("LAKESTREAM_QUEUE_URL"),
            log_buckets: get(lakestream_formats::config::LOG_BUCKETS_ENV),
            refine_queue_url: get("LAKESTREAM_REFINE_QUEUE_URL"),
            job_metrics: get("LAKESTREAM_JOB_METRICS"),
            catalog_database: get("LAKESTREAM_CATALOG_DATABASE"),
            memory_mb: match get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE") {
                None => None,
                Some(v) => Some(v.trim().parse().map_err(|_| {
                    Error::Config(format!(
                        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE = `{v}` is not a whole number of MB \
                         (Lambda sets it; unset it when running the function elsewhere)"
                    ))
                })?),
            },
            s3: S3Access {
                endpoint_url: get("AWS_ENDPOINT_URL_S3").or_else(|| get("AWS_ENDPOINT_URL")),
                region: get("AWS_REGION"),
                allow_http: get("AWS_ALLOW_HTTP").is_some_and(|v| v == "true"),
            },
        })
    }

    /// Load and validate the pipeline config, applying `LAKESTREAM_LAKE_ROOT` and
    /// `LAKESTREAM_LOG_BUCKETS`.
    pub async fn load_config(&self) -> Result<PipelineConfig, Error> {
        let mut config = load_config(&self.config_source, &self.s3).await?;
        if let Some(root) = &self.lake_root {
            config.lake.root = root.clone();
        }
        if let Some(list) = &self.log_buckets {
            config.access_logs.set_source_buckets(list)?;
        }
        Ok(config)
    }
}
