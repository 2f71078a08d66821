//! A fresh, empty lake for one test: a temp dir, or a fresh prefix of the test bucket on the S3
//! emulator, with the example config pointing at it, and the ingestors and readers a test needs.

use crate::backend::{Backend, s3_bucket, unique_suffix};
use crate::clock::{fixed_clock, ingest_time, log_time};
use crate::{Error, Result, example_config, example_config_with};
use deltalake::arrow::array::RecordBatch;
use lakestream_core::access_log::AccessLogIngestor;
use lakestream_core::{KafkaIngestor, Lake, read};
use lakestream_formats::config::PipelineConfig;
use std::path::{Path, PathBuf};

/// A fresh lake and the pipeline config that writes to it.
///
/// On the filesystem the lake is `<temp dir>/lake` (the temp dir is removed on drop), so a test
/// can keep fixture objects beside the lake in [`TestLake::dir`] and check nothing escaped it.
pub struct TestLake {
    /// The config: the example's (or the one given) with `[lake]` pointing at this lake and
    /// faster commit retries (20 ms base backoff, 30 attempts) for contended tests.
    pub config: PipelineConfig,
    dir: Option<tempfile::TempDir>,
}

impl TestLake {
    /// A fresh lake on `backend` with the example config; `name` tags its S3 prefix.
    pub fn new(backend: Backend, name: &str) -> Result<Self> {
        Self::with_config(backend, name, example_config()?)
    }

    /// A fresh lake on `backend` with `config` (its `[lake]` replaced).
    pub fn with_config(backend: Backend, name: &str, mut config: PipelineConfig) -> Result<Self> {
        config.commit.base_backoff_ms = 20;
        config.commit.max_attempts = 30;
        match backend {
            Backend::Fs => {
                let dir = tempfile::tempdir()?;
                config.lake.root = dir.path().join("lake").to_string_lossy().into_owned();
                Ok(Self {
                    config,
                    dir: Some(dir),
                })
            }
            Backend::S3 => {
                let endpoint = std::env::var("LAKESTREAM_TEST_S3_ENDPOINT").map_err(|_| {
                    Error::Env("an S3 test lake needs LAKESTREAM_TEST_S3_ENDPOINT".into())
                })?;
                config.lake.root = format!("s3://{}/{name}-{}", s3_bucket(), unique_suffix());
                config.lake.endpoint_url = Some(endpoint);
                config.lake.region = Some("us-east-1".into());
                config.lake.allow_http = true;
                Ok(Self { config, dir: None })
            }
        }
    }

    /// The temp dir around a filesystem lake (the lake is its `lake/`); `None` on S3.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(tempfile::TempDir::path)
    }

    /// The directory of a filesystem lake's table `table` (`None` on S3).
    pub fn table_dir(&self, table: &str) -> Option<PathBuf> {
        self.dir().map(|d| d.join("lake").join(table))
    }

    /// The example config with `extra` TOML appended (topics, refine jobs, ...), pointing at
    /// this lake (its `[lake]` and `[commit]`).
    pub fn config_with(&self, extra: &str) -> Result<PipelineConfig> {
        let mut cfg = example_config_with(extra)?;
        cfg.lake = self.config.lake.clone();
        cfg.commit = self.config.commit.clone();
        Ok(cfg)
    }

    /// The lake the config points at.
    pub fn lake(&self) -> Result<Lake> {
        Ok(Lake::new(&self.config.lake)?)
    }

    /// A Kafka ingestor on this lake, its clock stopped at [`crate::INGEST_TIME`].
    pub fn ingestor(&self) -> Result<KafkaIngestor> {
        Ok(KafkaIngestor::new(
            self.config.clone(),
            fixed_clock(ingest_time()),
        )?)
    }

    /// An access-log ingestor on this lake, its clock stopped at [`crate::LOG_TIME`].
    pub fn access_log_ingestor(&self) -> Result<AccessLogIngestor> {
        Ok(AccessLogIngestor::new(
            self.config.clone(),
            fixed_clock(log_time()),
        )?)
    }

    /// Every row of `table` at its latest version.
    pub async fn read(&self, table: &str) -> Result<RecordBatch> {
        Ok(read::read_table(&self.lake()?, table, None).await?)
    }

    /// The number of rows of `table`, 0 when it does not exist yet.
    pub async fn count(&self, table: &str) -> Result<usize> {
        match read::summarize(&self.lake()?, table).await? {
            Some(_) => Ok(self.read(table).await?.num_rows()),
            None => Ok(0),
        }
    }

    /// The latest version of `table`.
    pub async fn version(&self, table: &str) -> Result<u64> {
        match read::summarize(&self.lake()?, table).await? {
            Some(s) => Ok(s.version),
            None => Err(Error::NoTable(table.into())),
        }
    }
}
