//! `LAKESTREAM_CONFIG` resolution: inline TOML, a file path, or an `s3://bucket/key` object.

use deltalake::logstore::object_store::{ObjectStoreExt, aws::AmazonS3Builder, path::Path};
use lakestream_core::{Error, PipelineConfig};

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
        return PipelineConfig::load(source);
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
    PipelineConfig::from_toml(&text)
}
