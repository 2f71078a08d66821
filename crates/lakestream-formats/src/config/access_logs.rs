//! The `[access_logs]` section: where S3 server access logs land, the buckets that may be read
//! and the bounds that keep a hostile object from costing more than a bounded amount. Kept apart
//! from the pipeline's other sections because these bounds are the threat model's (ARCHITECTURE.md
//! "Threat model").

use crate::error::{Error, Result};
use serde::Deserialize;

/// Where S3 server access logs land.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessLogsConfig {
    /// Table prefix: per-bucket tables are `<prefix>/<bucket>`; the single table is `<prefix>`.
    #[serde(default = "default_access_log_prefix")]
    pub table_prefix: String,
    /// `per_bucket` (one table per observed bucket, partitioned by `date`) or `single` (one
    /// table partitioned by `bucket` and `date`).
    #[serde(default)]
    pub layout: AccessLogLayout,
    /// How long a log object's `txn` is kept for redelivery checks
    /// (`delta.setTransactionRetentionDuration`); must exceed the message retention of the
    /// notification queue and of its dead-letter queue (SQS allows at most 14 days), so a
    /// redelivered or redriven notification is still recognised.
    #[serde(default = "default_txn_retention_days")]
    pub txn_retention_days: u32,
    /// An object larger than this (its Content-Length, before reading) is refused: recorded
    /// in the dead-letter table, not read.
    #[serde(default = "default_max_object_mib")]
    pub max_object_mib: u64,
    /// A gzip object that inflates to more than this is refused (a gzip bomb); it is inflated
    /// as a stream, never whole.
    #[serde(default = "default_max_inflated_mib")]
    pub max_inflated_mib: u64,
    /// A line longer than this is dead-lettered (its first `max_line_kib` KiB kept) without
    /// buffering the rest.
    #[serde(default = "default_max_line_kib")]
    pub max_line_kib: u64,
    /// An object with more malformed lines than this is refused as a whole (it is not an
    /// access log); bounds the dead letters one object can make.
    #[serde(default = "default_max_bad_lines")]
    pub max_bad_lines: u64,
    /// One ingest call (an SQS batch, a drain round) parses at most this much (inflated); the
    /// objects after it are left for the next delivery.
    #[serde(default = "default_max_round_mib")]
    pub max_round_mib: u64,
    /// The buckets log objects may be read from (the raw-logs bucket the logging service writes
    /// to). A notification naming any other bucket is dead-lettered without a read; empty means
    /// none is read. `LAKESTREAM_LOG_BUCKETS` replaces it ([`Self::set_source_buckets`]).
    #[serde(default)]
    pub source_buckets: Vec<String>,
}

/// The environment variable that replaces `access_logs.source_buckets` (comma-separated), read by
/// `s3-log-ingest` and `lakestream invoke s3-logs`; the template sets it to the raw-logs bucket.
pub const LOG_BUCKETS_ENV: &str = "LAKESTREAM_LOG_BUCKETS";

impl AccessLogsConfig {
    /// Replace `source_buckets` with the comma-separated `list` (from [`LOG_BUCKETS_ENV`]); every
    /// name must be a valid S3 bucket name.
    pub fn set_source_buckets(&mut self, list: &str) -> Result<()> {
        let buckets: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .map(String::from)
            .collect();
        check_source_buckets(LOG_BUCKETS_ENV, &buckets)?;
        self.source_buckets = buckets;
        Ok(())
    }

    /// True when objects of `bucket` may be read.
    pub fn is_source(&self, bucket: &str) -> bool {
        self.source_buckets.iter().any(|b| b == bucket)
    }
}

fn check_source_buckets(key: &str, buckets: &[String]) -> Result<()> {
    for (i, b) in buckets.iter().enumerate() {
        crate::names::check_bucket_name(b).map_err(|why| {
            Error::Config(format!(
                "`{key}` entry {i} (\"{}\") is not a valid S3 bucket name: {why}",
                b.escape_debug()
            ))
        })?;
    }
    Ok(())
}

fn default_access_log_prefix() -> String {
    "access_logs".into()
}
/// Longest message retention SQS allows (days): `txn_retention_days` must exceed it.
pub const SQS_MAX_RETENTION_DAYS: u32 = 14;

fn default_txn_retention_days() -> u32 {
    21
}
fn default_max_object_mib() -> u64 {
    64
}
fn default_max_inflated_mib() -> u64 {
    256
}
fn default_max_line_kib() -> u64 {
    64
}
fn default_max_bad_lines() -> u64 {
    10_000
}
fn default_max_round_mib() -> u64 {
    512
}

impl Default for AccessLogsConfig {
    fn default() -> Self {
        Self {
            table_prefix: default_access_log_prefix(),
            layout: AccessLogLayout::default(),
            txn_retention_days: default_txn_retention_days(),
            max_object_mib: default_max_object_mib(),
            max_inflated_mib: default_max_inflated_mib(),
            max_line_kib: default_max_line_kib(),
            max_bad_lines: default_max_bad_lines(),
            max_round_mib: default_max_round_mib(),
            source_buckets: Vec::new(),
        }
    }
}

/// Table layout for access logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogLayout {
    /// `<prefix>/<bucket>`, partitioned by `date`.
    #[default]
    PerBucket,
    /// `<prefix>`, partitioned by `bucket`, `date`.
    Single,
}

impl AccessLogsConfig {
    /// Check the section's bounds and bucket names (every message names the key).
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.txn_retention_days <= SQS_MAX_RETENTION_DAYS {
            return bad(format!(
                "`access_logs.txn_retention_days` = {} must exceed {SQS_MAX_RETENTION_DAYS}, the \
             longest message retention of an SQS queue (the notification queue's dead-letter \
             queue keeps messages 14 days): a notification redelivered or redriven after its \
             object's `txn` expired would be ingested again",
                self.txn_retention_days
            ));
        }
        for (key, v) in [
            ("max_object_mib", self.max_object_mib),
            ("max_inflated_mib", self.max_inflated_mib),
            ("max_line_kib", self.max_line_kib),
            ("max_bad_lines", self.max_bad_lines),
            ("max_round_mib", self.max_round_mib),
        ] {
            if v == 0 {
                return bad(format!("`access_logs.{key}` must be >= 1"));
            }
        }
        check_source_buckets("access_logs.source_buckets", &self.source_buckets)?;
        Ok(())
    }
}
