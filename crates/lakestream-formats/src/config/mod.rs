//! The pipeline configuration (`lakestream.toml`): where the lake is, which Kafka topic lands in
//! which table with which schema, and how commits behave. Parsed once at start; every error
//! names the offending key so a bad deploy fails fast and says why.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::HashSet;

mod access_logs;
mod catalog;
mod cdc;
mod cdc_limits;
mod freshness;
mod lake;
mod topics;

pub use access_logs::{AccessLogLayout, AccessLogsConfig, LOG_BUCKETS_ENV, SQS_MAX_RETENTION_DAYS};
pub use catalog::{CatalogConfig, CatalogForm, pattern_matches};
pub use cdc::{
    CdcColumn, CdcFamily, CdcSource, CdcType, DEFAULT_TOAST_PLACEHOLDER, FamilyTable, ObjectSource,
    ScdType, SourceSettings, TopicSource, bronze, silver, topic_matches,
};
pub use cdc_limits::CdcLimits;
pub use freshness::{DEFAULT_FRESHNESS, Freshness, MAX_BATCHING_WINDOW};
pub use lake::{CommitConfig, LakeConfig};
pub use topics::{
    ColumnConfig, ColumnType, KafkaMetadataColumn, PROCESSING_TIME_COLUMNS, Partitioning,
    SchemaMode, TopicConfig,
};
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
    pub refine: Vec<crate::refine::RefineJob>,
    /// CDC table families (`[[cdc]]`): Debezium topics or DMS / file deliveries into bronze,
    /// applied per key into silver.
    #[serde(default)]
    pub cdc: Vec<CdcFamily>,
    /// Bounds on CDC landing objects (`[cdc_limits]`).
    #[serde(default)]
    pub cdc_limits: CdcLimits,
    /// Glue Data Catalog registration (`[catalog]`).
    #[serde(default)]
    pub catalog: CatalogConfig,
}

fn default_dead_letter_table() -> String {
    "dead_letters".to_string()
}

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
    pub fn refine_job(&self, job: &str) -> Option<&crate::refine::RefineJob> {
        self.refine.iter().find(|j| j.job == job)
    }

    fn topic_table(&self, table: &str) -> bool {
        self.topics.iter().any(|t| t.table == table)
    }

    /// The topic config for `topic`, if any.
    pub fn topic(&self, topic: &str) -> Option<&TopicConfig> {
        self.topics.iter().find(|t| t.topic == topic)
    }

    /// The CDC family whose topic patterns match `topic` (a configured topic never does).
    pub fn cdc_topic(&self, topic: &str) -> Option<(&CdcFamily, FamilyTable)> {
        self.cdc
            .iter()
            .find_map(|f| f.table_of_topic(topic).map(|t| (f, t)))
    }

    /// The DMS / files family that owns object `key` of `bucket`.
    pub fn cdc_object(&self, bucket: &str, key: &str) -> Option<(&CdcFamily, FamilyTable)> {
        self.cdc
            .iter()
            .find_map(|f| f.table_of_object(bucket, key).map(|t| (f, t)))
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
        self.catalog.validate()?;
        validate_table_name("dead_letter_table", &self.dead_letter_table)?;
        validate_table_name("access_logs.table_prefix", &self.access_logs.table_prefix)?;
        self.access_logs.validate()?;
        self.cdc_limits.validate()?;
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
            self.check_job_freshness(&key, j)?;
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
            t.validate(&key)?;
        }
        let mut families = HashSet::new();
        for (i, f) in self.cdc.iter().enumerate() {
            let key = format!("cdc[{i}]");
            f.validate(&key)?;
            if !families.insert(f.family.to_ascii_lowercase()) {
                return bad(format!(
                    "`{key}.family`: family \"{}\" is listed twice",
                    f.family
                ));
            }
            self.check_location_outside_lake(&key, f)?;
            if let Some(t) = self.topics.iter().find(|t| {
                f.source
                    .topics()
                    .iter()
                    .any(|p| cdc::topic_matches(p, &t.topic))
            }) {
                return bad(format!(
                    "`{key}.topics` matches topic \"{}\" of `[[topics]]`: a topic has one reader; narrow the pattern or drop the topic",
                    t.topic
                ));
            }
        }
        crate::tables::check(self)
    }
}

impl PipelineConfig {
    /// A DMS / files family's landing prefix and the lake do not overlap: landing objects
    /// inside the lake would be table files to one reader and CDC input to another.
    fn check_location_outside_lake(&self, key: &str, f: &CdcFamily) -> Result<()> {
        let (Some((bucket, prefix)), Some(root)) =
            (f.bucket_and_prefix(), self.lake.root.strip_prefix("s3://"))
        else {
            return Ok(());
        };
        let (lake_bucket, lake_prefix) = root.split_once('/').unwrap_or((root, ""));
        let lake_prefix = format!("{}/", lake_prefix.trim_end_matches('/'));
        let lake_prefix = lake_prefix.trim_start_matches('/');
        if bucket == lake_bucket
            && (prefix.starts_with(lake_prefix) || lake_prefix.starts_with(prefix.as_str()))
        {
            return Err(Error::Config(format!(
                "`{key}.location` (s3://{bucket}/{prefix}) overlaps the lake (`lake.root` = \
                 \"{}\"): land CDC files outside the lake (another bucket or prefix)",
                self.lake.root
            )));
        }
        Ok(())
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

    const EXAMPLE: &str = include_str!("../../../../lakestream.toml");

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
