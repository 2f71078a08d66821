//! The pipeline configuration (`lakestream.toml`): where the lake is, which Kafka topic lands in
//! which table with which schema, and how commits behave. Parsed once at start; every error
//! names the offending key so a bad deploy fails fast and says why.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::HashSet;

/// The whole pipeline.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Pipeline name; part of every `txn` appId (`<pipeline>/<topic>/<partition>`).
    pub pipeline: String,
    /// Where tables live.
    pub lake: LakeConfig,
    /// Commit retry and checkpoint behaviour.
    #[serde(default)]
    pub commit: CommitConfig,
    /// Table that receives records that cannot be ingested (relative to the lake root).
    #[serde(default = "default_dead_letter_table")]
    pub dead_letter_table: String,
    /// One entry per Kafka topic.
    #[serde(default)]
    pub topics: Vec<TopicConfig>,
    /// S3 server access log ingestion.
    #[serde(default)]
    pub access_logs: AccessLogsConfig,
    /// Refine jobs (run in dependency order by the `refine` function and `lakestream refine`).
    #[serde(default)]
    pub refine: Vec<crate::refine::RefineJobConfig>,
}

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

fn default_dead_letter_table() -> String {
    "dead_letters".to_string()
}

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

/// One Kafka topic and the table it lands in.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicConfig {
    /// Kafka topic name (may contain `-` and `.`).
    pub topic: String,
    /// Target table, relative to the lake root (e.g. `raw/order`).
    pub table: String,
    /// Declared columns of the JSON value.
    pub columns: Vec<ColumnConfig>,
    /// Partitioning of the table.
    #[serde(default)]
    pub partition_by: Partitioning,
    /// `enforce` (unknown fields ignored and counted) or `merge` (unknown fields add columns).
    #[serde(default)]
    pub schema_mode: SchemaMode,
    /// Kafka metadata to store as columns: any of `topic`, `partition`, `offset`, `timestamp`.
    #[serde(default)]
    pub kafka_metadata: Vec<KafkaMetadataColumn>,
}

/// One declared column.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnConfig {
    /// Column name, equal to the JSON field name.
    pub name: String,
    /// Column type.
    #[serde(rename = "type")]
    pub data_type: ColumnType,
    /// Whether the field may be null or missing (default true).
    #[serde(default = "yes")]
    pub nullable: bool,
}

fn yes() -> bool {
    true
}

/// Supported column types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// UTF-8 text.
    String,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// 64-bit float.
    Float64,
    /// true/false.
    Boolean,
    /// Instant, UTC, microsecond precision. JSON: ISO-8601 string or epoch milliseconds.
    Timestamp,
    /// Calendar date. JSON: `YYYY-MM-DD`.
    Date,
}

/// How a table is partitioned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Partitioning {
    /// Not partitioned.
    #[default]
    None,
    /// `year`,`month`,`day`,`hour` of the processing time, two-digit strings (year `22`).
    ProcessingTime,
    /// By the listed declared columns.
    Columns(Vec<String>),
}

impl<'de> Deserialize<'de> for Partitioning {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            List(Vec<String>),
        }
        match Raw::deserialize(d)? {
            Raw::Word(w) if w == "processing_time" => Ok(Partitioning::ProcessingTime),
            Raw::Word(w) if w == "none" => Ok(Partitioning::None),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "partition_by must be \"processing_time\", \"none\" or a list of columns, got \"{w}\""
            ))),
            Raw::List(cols) if cols.is_empty() => Ok(Partitioning::None),
            Raw::List(cols) => Ok(Partitioning::Columns(cols)),
        }
    }
}

/// What to do with JSON fields that are not declared columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchemaMode {
    /// Ignore (and count) unknown fields.
    #[default]
    Enforce,
    /// Add a nullable column for each new top-level field, in the same commit as the data.
    Merge,
}

/// Kafka metadata that can be stored next to the value's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KafkaMetadataColumn {
    /// `kafka_topic` (string).
    Topic,
    /// `kafka_partition` (int32).
    Partition,
    /// `kafka_offset` (int64).
    Offset,
    /// `kafka_timestamp` (timestamp, null when Kafka sent `-1`).
    Timestamp,
}

impl KafkaMetadataColumn {
    /// The column name used in the table.
    pub fn column_name(self) -> &'static str {
        match self {
            Self::Topic => "kafka_topic",
            Self::Partition => "kafka_partition",
            Self::Offset => "kafka_offset",
            Self::Timestamp => "kafka_timestamp",
        }
    }
}

/// Names of the processing-time partition columns.
pub const PROCESSING_TIME_COLUMNS: [&str; 4] = ["year", "month", "day", "hour"];

impl PipelineConfig {
    /// Parse and validate TOML text.
    pub fn from_toml(text: &str) -> Result<Self> {
        let de = toml::Deserializer::new(text);
        let cfg: PipelineConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let msg = inner.message().to_string();
            let line = inner
                .span()
                .and_then(|s| text.get(..s.start))
                .map(|before| before.lines().count().max(1));
            match line {
                Some(l) => Error::Config(format!("`{path}` (line {l}): {msg}")),
                None => Error::Config(format!("`{path}`: {msg}")),
            }
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Load from `LAKESTREAM_CONFIG`-style input: inline TOML (contains a newline or `=`), or a
    /// path to a file. (`s3://` URIs are fetched by the caller, which owns the S3 client.)
    pub fn load(source: &str) -> Result<Self> {
        let looks_inline = source.contains('\n') || source.contains('=');
        if looks_inline {
            return Self::from_toml(source);
        }
        let text = std::fs::read_to_string(source).map_err(|e| Error::Io {
            path: source.to_string(),
            source: e,
        })?;
        Self::from_toml(&text)
    }

    /// The refine job named `job`, if any.
    pub fn refine_job(&self, job: &str) -> Option<&crate::refine::RefineJobConfig> {
        self.refine.iter().find(|j| j.job == job)
    }

    fn topic_table(&self, table: &str) -> bool {
        self.topics.iter().any(|t| t.table == table)
    }

    /// The topic config for `topic`, if any.
    pub fn topic(&self, topic: &str) -> Option<&TopicConfig> {
        self.topics.iter().find(|t| t.topic == topic)
    }

    /// Check cross-field rules; every message names the key.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.pipeline.trim().is_empty() || self.pipeline.contains('/') {
            return bad("`pipeline` must be a non-empty name without `/`".into());
        }
        if self.lake.root.trim().is_empty() {
            return bad("`lake.root` must not be empty".into());
        }
        if let Some(key) = self.lake.storage_options.keys().find(|k| {
            k.eq_ignore_ascii_case("aws_s3_allow_unsafe_rename")
                || k.eq_ignore_ascii_case("allow_unsafe_rename")
        }) {
            return bad(format!(
                "`lake.storage_options.{key}` cannot be set: commits rely on S3 conditional puts"
            ));
        }
        if self.lake.root.contains("://")
            && !self.lake.root.starts_with("s3://")
            && !self.lake.root.starts_with("file://")
        {
            return bad(format!(
                "`lake.root` = \"{}\": only filesystem paths, file:// and s3:// are supported",
                self.lake.root
            ));
        }
        if self.commit.checkpoint_interval == 0 {
            return bad("`commit.checkpoint_interval` must be >= 1".into());
        }
        if self.commit.max_attempts == 0 {
            return bad("`commit.max_attempts` must be >= 1".into());
        }
        validate_table_name("dead_letter_table", &self.dead_letter_table)?;
        validate_table_name("access_logs.table_prefix", &self.access_logs.table_prefix)?;
        if self.access_logs.txn_retention_days <= SQS_MAX_RETENTION_DAYS {
            return bad(format!(
                "`access_logs.txn_retention_days` = {} must exceed {SQS_MAX_RETENTION_DAYS}, the \
                 longest message retention of an SQS queue (the notification queue's dead-letter \
                 queue keeps messages 14 days): a notification redelivered or redriven after its \
                 object's `txn` expired would be ingested again",
                self.access_logs.txn_retention_days
            ));
        }
        for (key, v) in [
            ("max_object_mib", self.access_logs.max_object_mib),
            ("max_inflated_mib", self.access_logs.max_inflated_mib),
            ("max_line_kib", self.access_logs.max_line_kib),
            ("max_bad_lines", self.access_logs.max_bad_lines),
            ("max_round_mib", self.access_logs.max_round_mib),
        ] {
            if v == 0 {
                return bad(format!("`access_logs.{key}` must be >= 1"));
            }
        }
        check_source_buckets(
            "access_logs.source_buckets",
            &self.access_logs.source_buckets,
        )?;
        let mut jobs = HashSet::new();
        for (i, j) in self.refine.iter().enumerate() {
            let key = format!("refine[{i}]");
            j.validate(&key)?;
            if !jobs.insert(j.job.as_str()) {
                return bad(format!("`{key}.job`: job \"{}\" is listed twice", j.job));
            }
            validate_table_name(&format!("{key}.output"), &j.output)?;
            for t in j.sources() {
                validate_table_name(&format!("{key}.join"), t)?;
            }
            if j.output == self.dead_letter_table || self.topic_table(&j.output) {
                return bad(format!(
                    "`{key}.output` = \"{}\" is written by ingestion; give the job its own table",
                    j.output
                ));
            }
        }
        let mut topics = HashSet::new();
        for (i, t) in self.topics.iter().enumerate() {
            let key = format!("topics[{i}]");
            if !topics.insert(t.topic.as_str()) {
                return bad(format!(
                    "`{key}.topic`: topic \"{}\" is listed twice",
                    t.topic
                ));
            }
            validate_table_name(&format!("{key}.table"), &t.table)?;
            if t.table == self.dead_letter_table {
                return bad(format!("`{key}.table` is the dead_letter_table"));
            }
            if t.columns.is_empty() {
                return bad(format!("`{key}.columns` must list at least one column"));
            }
            let mut names = HashSet::new();
            let mut lower = HashSet::new();
            for (j, c) in t.columns.iter().enumerate() {
                if c.name.is_empty()
                    || !names.insert(c.name.as_str())
                    || !lower.insert(c.name.to_lowercase())
                {
                    return bad(format!(
                        "`{key}.columns[{j}].name` (\"{}\") is empty or repeated (Delta column \
                         names are case-insensitive)",
                        c.name
                    ));
                }
                if c.name
                    .contains([' ', ',', ';', '{', '}', '(', ')', '\n', '\t', '='])
                {
                    return bad(format!(
                        "`{key}.columns[{j}].name` (\"{}\") contains one of \" ,;{{}}()=\", a \
                         newline or a tab, which Spark cannot write without column mapping",
                        c.name.escape_debug()
                    ));
                }
            }
            let derived: Vec<&str> = match &t.partition_by {
                Partitioning::ProcessingTime => PROCESSING_TIME_COLUMNS.to_vec(),
                _ => vec![],
            };
            for name in derived
                .iter()
                .copied()
                .chain(t.kafka_metadata.iter().map(|m| m.column_name()))
            {
                if lower.contains(name) {
                    return bad(format!(
                        "`{key}.columns`: \"{name}\" clashes with a generated column"
                    ));
                }
            }
            if let Partitioning::Columns(cols) = &t.partition_by {
                for c in cols {
                    if !names.contains(c.as_str()) {
                        return bad(format!(
                            "`{key}.partition_by`: \"{c}\" is not a declared column"
                        ));
                    }
                }
            }
        }
        crate::tables::check(self)
    }
}

/// The lake's own rule for table paths ([`check_table_path`](crate::names::check_table_path)),
/// with the key named.
fn validate_table_name(key: &str, name: &str) -> Result<()> {
    // The lake's rule (also checked at every table open), then the config's own: no `_` tree at
    // all (`_lakestream/` is Lakestream's, never a configured table).
    let why = crate::names::check_table_path(name).err().or_else(|| {
        name.split('/')
            .any(|seg| seg.starts_with('_'))
            .then(|| "a segment starts with `_`".to_string())
    });
    match why {
        None => Ok(()),
        Some(why) => Err(Error::Config(format!(
            "`{key}` = \"{}\": {why}; use a relative path of [A-Za-z0-9_.=-] segments that do \
             not start with `_` or `.` (reserved for `_delta_log`, `_lakestream/` and hidden \
             files), e.g. raw/order",
            name.escape_debug()
        ))),
    }
}

#[cfg(test)]
mod collision_tests;

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../../lakestream.toml");

    #[test]
    fn example_config_parses_and_maps_the_seed() -> anyhow::Result<()> {
        let cfg = PipelineConfig::from_toml(EXAMPLE)?;
        let orders = cfg
            .topic("orders")
            .ok_or_else(|| anyhow::anyhow!("no orders"))?;
        assert_eq!(orders.table, "raw/order");
        assert_eq!(orders.partition_by, Partitioning::ProcessingTime);
        let members = cfg
            .topic("members")
            .ok_or_else(|| anyhow::anyhow!("no members"))?;
        assert_eq!(members.table, "raw/member");
        assert_eq!(
            members.partition_by,
            Partitioning::Columns(vec!["order_owner".into()])
        );
        assert_eq!(cfg.commit.checkpoint_interval, 10);
        Ok(())
    }

    fn err_of(text: &str) -> String {
        match PipelineConfig::from_toml(text) {
            Ok(_) => "parsed".into(),
            Err(e) => e.to_string(),
        }
    }

    const BASE: &str = "pipeline = \"p\"\n[lake]\nroot = \"/tmp/l\"\n";

    #[test]
    fn bad_configs_name_the_key() {
        let unknown_type = format!(
            "{BASE}[[topics]]\ntopic=\"t\"\ntable=\"a/b\"\ncolumns=[{{name=\"x\",type=\"int8\"}}]\n"
        );
        let e = err_of(&unknown_type);
        assert!(
            e.contains("int8") && e.contains("topics[0].columns[0].type"),
            "{e}"
        );

        let bad_part = format!(
            "{BASE}[[topics]]\ntopic=\"t\"\ntable=\"a/b\"\ncolumns=[{{name=\"x\",type=\"int32\"}}]\npartition_by=[\"y\"]\n"
        );
        assert!(err_of(&bad_part).contains("topics[0].partition_by"));

        let bad_table = format!(
            "{BASE}[[topics]]\ntopic=\"t\"\ntable=\"../b\"\ncolumns=[{{name=\"x\",type=\"int32\"}}]\n"
        );
        assert!(err_of(&bad_table).contains("topics[0].table"));

        let typo = format!("{BASE}[commit]\ncheckpoint_intervall = 3\n");
        assert!(err_of(&typo).contains("checkpoint_intervall"));

        let missing_root = "pipeline = \"p\"\n[lake]\n";
        assert!(err_of(missing_root).contains("root"));

        let clash = format!(
            "{BASE}[[topics]]\ntopic=\"t\"\ntable=\"a\"\npartition_by=\"processing_time\"\ncolumns=[{{name=\"hour\",type=\"int32\"}}]\n"
        );
        assert!(err_of(&clash).contains("hour"));

        // Delta column names are case-insensitive; Spark cannot write ` ,;{}()=` without
        // column mapping.
        let twins = format!(
            "{BASE}[[topics]]\ntopic=\"t\"\ntable=\"a\"\ncolumns=[{{name=\"x\",type=\"int32\"}},{{name=\"X\",type=\"int32\"}}]\n"
        );
        assert!(err_of(&twins).contains("topics[0].columns[1].name"));
        let spaced = format!(
            "{BASE}[[topics]]\ntopic=\"t\"\ntable=\"a\"\ncolumns=[{{name=\"a b\",type=\"int32\"}}]\n"
        );
        let e = err_of(&spaced);
        assert!(
            e.contains("topics[0].columns[0].name") && e.contains("column mapping"),
            "{e}"
        );
        let meta = format!(
            "{BASE}[[topics]]\ntopic=\"t\"\ntable=\"a\"\nkafka_metadata=[\"offset\"]\ncolumns=[{{name=\"Kafka_Offset\",type=\"int64\"}}]\n"
        );
        assert!(err_of(&meta).contains("clashes with a generated column"));
    }

    #[test]
    fn source_buckets_are_bucket_names_and_table_names_plain_paths() -> anyhow::Result<()> {
        let with = |sources: &str| format!("{BASE}[access_logs]\nsource_buckets = {sources}\n");
        let cfg = PipelineConfig::from_toml(&with("[\"raw-logs\", \"other.logs\"]"))?;
        assert!(cfg.access_logs.is_source("other.logs") && !cfg.access_logs.is_source("x"));
        let e = err_of(&with("[\"raw-logs\", \"Raw_Logs\"]"));
        assert!(
            e.contains("access_logs.source_buckets") && e.contains("Raw_Logs"),
            "{e}"
        );
        assert!(
            PipelineConfig::from_toml(BASE)?
                .access_logs
                .source_buckets
                .is_empty()
        );
        let mut logs = AccessLogsConfig::default();
        logs.set_source_buckets("a-logs, b-logs")?;
        assert_eq!(logs.source_buckets, ["a-logs", "b-logs"]);
        assert!(logs.set_source_buckets("a-logs,lake/x").is_err());
        for bad in ["_delta_log", "raw/_x", "a/%2e%2e", "a?b"] {
            let e = err_of(&format!("dead_letter_table = \"{bad}\"\n{BASE}"));
            assert!(
                e.contains("`dead_letter_table`") && e.contains("relative path"),
                "{bad}: {e}"
            );
        }
        Ok(())
    }

    #[test]
    fn load_accepts_inline_toml() -> anyhow::Result<()> {
        let cfg = PipelineConfig::load(BASE)?;
        assert_eq!(cfg.lake.root, "/tmp/l");
        assert_eq!(cfg.dead_letter_table, "dead_letters");
        Ok(())
    }
}
