//! Test lakes (filesystem and S3) and helpers to read tables back.

use anyhow::{Context, Result, bail};
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::datatypes::{Int32Type, Int64Type};
use lakestream_core::{FixedClock, IngestReport, KafkaIngestor, read};
use lakestream_formats::config::PipelineConfig;
use std::sync::Arc;

pub const EXAMPLE: &str = include_str!("../../../../lakestream.toml");

/// Which storage a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Fs,
    S3,
}

/// The backends this run covers.
pub fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Fs];
    if std::env::var("LAKESTREAM_TEST_S3_ENDPOINT").is_ok() {
        b.push(Backend::S3);
    } else {
        assert!(
            !std::env::var("LAKESTREAM_REQUIRE_S3").is_ok_and(|v| v == "1"),
            "LAKESTREAM_REQUIRE_S3=1 but LAKESTREAM_TEST_S3_ENDPOINT is not set"
        );
        eprintln!(
            "note: S3 backend skipped (LAKESTREAM_TEST_S3_ENDPOINT not set; `make test` sets it)"
        );
    }
    b
}

/// A fresh, empty lake.
pub struct TestLake {
    pub config: PipelineConfig,
    _dir: Option<tempfile::TempDir>,
}

impl TestLake {
    pub fn new(backend: Backend, name: &str) -> Result<Self> {
        let mut config = PipelineConfig::from_toml(EXAMPLE)?;
        config.commit.base_backoff_ms = 20;
        config.commit.max_attempts = 30;
        match backend {
            Backend::Fs => {
                let dir = tempfile::tempdir()?;
                config.lake.root = dir.path().to_string_lossy().into_owned();
                Ok(Self {
                    config,
                    _dir: Some(dir),
                })
            }
            Backend::S3 => {
                let endpoint = std::env::var("LAKESTREAM_TEST_S3_ENDPOINT")?;
                let bucket = std::env::var("LAKESTREAM_TEST_S3_BUCKET")
                    .unwrap_or_else(|_| "lakestream-test".into());
                let unique = format!("{name}-{:016x}", fastrand::u64(..));
                config.lake.root = format!("s3://{bucket}/{unique}");
                config.lake.endpoint_url = Some(endpoint);
                config.lake.region = Some("us-east-1".into());
                config.lake.allow_http = true;
                Ok(Self { config, _dir: None })
            }
        }
    }

    pub fn ingestor(&self) -> Result<KafkaIngestor> {
        let clock =
            FixedClock::new(chrono::DateTime::from_timestamp(1_764_400_000, 0).context("ts")?);
        Ok(KafkaIngestor::new(self.config.clone(), Arc::new(clock))?)
    }

    pub async fn read(&self, table: &str) -> Result<RecordBatch> {
        let lake = lakestream_core::Lake::new(&self.config.lake)?;
        Ok(read::read_table(&lake, table, None).await?)
    }

    pub async fn version(&self, table: &str) -> Result<u64> {
        let lake = lakestream_core::Lake::new(&self.config.lake)?;
        match read::summarize(&lake, table).await? {
            Some(s) => Ok(s.version),
            None => bail!("no table {table}"),
        }
    }
}

/// Sorted (partition, offset) pairs of a table with Kafka metadata columns.
pub fn offsets(batch: &RecordBatch) -> Result<Vec<(i32, i64)>> {
    let p = batch
        .column_by_name("kafka_partition")
        .context("kafka_partition")?
        .as_primitive::<Int32Type>();
    let o = batch
        .column_by_name("kafka_offset")
        .context("kafka_offset")?
        .as_primitive::<Int64Type>();
    let mut v: Vec<(i32, i64)> = (0..batch.num_rows())
        .map(|i| (p.value(i), o.value(i)))
        .collect();
    v.sort();
    Ok(v)
}

/// A string column as options.
pub fn strings(batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    let c = batch
        .column_by_name(name)
        .with_context(|| format!("no column {name}"))?;
    let c = deltalake::arrow::compute::cast(c, &deltalake::arrow::datatypes::DataType::Utf8)?;
    let s = c.as_string::<i32>();
    Ok((0..s.len())
        .map(|i| s.is_valid(i).then(|| s.value(i).to_string()))
        .collect())
}

/// The accounting invariant every invocation must keep.
pub fn assert_accounted(r: &IngestReport) {
    assert_eq!(
        r.received,
        r.written + r.dead_lettered + r.duplicates,
        "received = written + dead-lettered + duplicates: {r:?}"
    );
}
