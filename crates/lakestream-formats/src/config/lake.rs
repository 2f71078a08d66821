//! The `[lake]` and `[commit]` sections: where the lake is, how to reach it, and how commits
//! are retried and checkpointed.

use serde::Deserialize;

/// Lake location and how to reach it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LakeConfig {
    /// A filesystem path (relative paths resolve against the working directory) or
    /// `s3://bucket/prefix`.
    pub root: String,
    /// Custom S3 endpoint (S3-compatible servers, e.g. `http://127.0.0.1:5000`).
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// S3 region; defaults to the environment's (`AWS_REGION` on Lambda).
    #[serde(default)]
    pub region: Option<String>,
    /// Allow plain HTTP to the endpoint (only for local S3-compatible servers).
    #[serde(default)]
    pub allow_http: bool,
    /// Client options passed to delta-rs / object_store, e.g. `timeout = "10s"`,
    /// `connect_timeout = "2s"`, `max_retries = "5"`, `retry_timeout = "60s"`,
    /// `backoff_config.init_backoff = "100ms"`. Defaults are object_store's (30 s per request,
    /// 10 retries within 3 minutes). `AWS_S3_ALLOW_UNSAFE_RENAME` cannot be set: commits rely on
    /// conditional puts.
    #[serde(default)]
    pub storage_options: std::collections::BTreeMap<String, String>,
    /// Skip the start-up probe that an S3 endpoint refuses a second create-only PUT
    /// (`If-None-Match: *`). Commits are only safe where it does; set this only for an endpoint
    /// known to honour it where the probe cannot write under `<root>/_lakestream/probe/`.
    #[serde(default)]
    pub assume_conditional_put: bool,
}

/// How commits are retried and checkpointed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitConfig {
    /// Write a checkpoint every N table versions (`delta.checkpointInterval` on new tables).
    #[serde(default = "default_checkpoint_interval")]
    pub checkpoint_interval: u32,
    /// Outer commit attempts (each reloads the table and re-checks `txn` versions).
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// First backoff between attempts, doubled each time, with full jitter.
    #[serde(default = "default_base_backoff_ms")]
    pub base_backoff_ms: u64,
    /// Ceiling for one backoff.
    #[serde(default = "default_max_backoff_ms")]
    pub max_backoff_ms: u64,
}

fn default_checkpoint_interval() -> u32 {
    10
}
fn default_max_attempts() -> u32 {
    10
}
fn default_base_backoff_ms() -> u64 {
    50
}
fn default_max_backoff_ms() -> u64 {
    5_000
}

impl Default for CommitConfig {
    fn default() -> Self {
        Self {
            checkpoint_interval: default_checkpoint_interval(),
            max_attempts: default_max_attempts(),
            base_backoff_ms: default_base_backoff_ms(),
            max_backoff_ms: default_max_backoff_ms(),
        }
    }
}
