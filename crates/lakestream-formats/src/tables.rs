//! Every table a pipeline writes, named once: topic tables, the dead-letter table, the
//! access-log table(s), refine outputs and the CDC jobs' tombstone tables. The maintenance
//! schedule and the CLI run on this list ([`PipelineConfig::tables`]), and config validation
//! uses it to refuse names that collide ([`check`]): two writers of one table, or a table inside
//! another — vacuuming `raw` would delete `raw/order`'s log and data, since vacuum treats every
//! file under a table's root that its log does not reference as an orphan.

use crate::config::{AccessLogLayout, PipelineConfig, TopicConfig};
use crate::error::{Error, Result};

/// Where the conditional-put probe writes (`<root>/_lakestream/probe/<uuid>`): no table may be
/// there.
pub const PROBE_DIRECTORY: &str = "_lakestream/probe";

/// The tombstone table of CDC upsert job `job`.
pub fn tombstone_table(job: &str) -> String {
    format!("_lakestream/{job}/tombstones")
}

/// The directory of a CDC family's tombstone tables (SCD1 deletes): one table per source table
/// below it (`_lakestream/cdc-<family>/<schema>.<table>/tombstones`).
pub fn cdc_tombstone_directory(family: &str) -> String {
    format!("_lakestream/cdc-{family}")
}

/// What a table of the pipeline holds (who writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableKind {
    /// A Kafka topic's table (`msk-ingest`).
    Topic,
    /// The dead-letter table.
    DeadLetters,
    /// An access-log table: `<prefix>` in the `single` layout, `<prefix>/<bucket>` per bucket.
    AccessLogs,
    /// The `per_bucket` layout's directory `<prefix>`: one access-log table per observed
    /// bucket below it, found by listing (not a table itself).
    AccessLogDirectory,
    /// A refine job's output.
    RefineOutput,
    /// A CDC upsert job's tombstone table (`_lakestream/<job>/tombstones`).
    Tombstones,
    /// A CDC family's directory of tables, one per source table below it, found by listing
    /// (bronze, silver, or the apply jobs' tombstones `_lakestream/cdc-<family>`).
    CdcDirectory,
}

impl TableKind {
    /// A short description, for listings.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Topic => "topic table",
            Self::DeadLetters => "dead letters",
            Self::AccessLogs => "access logs",
            Self::AccessLogDirectory => "access logs, one table per bucket",
            Self::RefineOutput => "refine output",
            Self::Tombstones => "tombstones",
            Self::CdcDirectory => "CDC family, one table per source table",
        }
    }
}

/// A table the pipeline writes (or, for [`TableKind::AccessLogDirectory`], the directory of
/// its per-bucket tables).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PipelineTable {
    /// Path relative to the lake root.
    pub name: String,
    /// What it holds.
    pub kind: TableKind,
    /// The config key that names it (a derived name: the key it is derived from, e.g.
    /// `refine[1].upsert.op` for a tombstone table).
    pub key: String,
}

impl PipelineTable {
    /// How an error names it: the key and the value, plus what a derived name stands for.
    fn label(&self) -> String {
        match self.kind {
            TableKind::Tombstones => {
                format!("`{}` (its tombstone table \"{}\")", self.key, self.name)
            }
            TableKind::CdcDirectory => format!(
                "`{}` (the family's tables under \"{}/\")",
                self.key, self.name
            ),
            TableKind::AccessLogDirectory => format!(
                "`{}` = \"{}\" (the per-bucket tables `{}/<bucket>`)",
                self.key, self.name, self.name
            ),
            _ => format!("`{}` = \"{}\"", self.key, self.name),
        }
    }
}

impl PipelineConfig {
    /// Every table the pipeline writes, each once, in config order: topic tables (topics
    /// sharing a table give it once, under the first one's key), the dead-letter table, the
    /// access-log table or directory, refine outputs, tombstone tables of CDC upserts.
    pub fn tables(&self) -> Vec<PipelineTable> {
        let mut out: Vec<PipelineTable> = Vec::new();
        for (i, t) in self.topics.iter().enumerate() {
            if !out.iter().any(|o| o.name == t.table) {
                out.push(PipelineTable {
                    name: t.table.clone(),
                    kind: TableKind::Topic,
                    key: format!("topics[{i}].table"),
                });
            }
        }
        out.push(PipelineTable {
            name: self.dead_letter_table.clone(),
            kind: TableKind::DeadLetters,
            key: "dead_letter_table".into(),
        });
        out.push(PipelineTable {
            name: self.access_logs.table_prefix.clone(),
            kind: match self.access_logs.layout {
                AccessLogLayout::Single => TableKind::AccessLogs,
                AccessLogLayout::PerBucket => TableKind::AccessLogDirectory,
            },
            key: "access_logs.table_prefix".into(),
        });
        for (i, j) in self.refine.iter().enumerate() {
            out.push(PipelineTable {
                name: j.output.clone(),
                kind: TableKind::RefineOutput,
                key: format!("refine[{i}].output"),
            });
        }
        for (i, f) in self.cdc.iter().enumerate() {
            for (name, what) in [
                (f.bronze_directory(), "bronze"),
                (f.silver_directory(), "silver"),
                (cdc_tombstone_directory(&f.family), "scd"),
            ] {
                out.push(PipelineTable {
                    name,
                    kind: TableKind::CdcDirectory,
                    key: format!("cdc[{i}].{what}"),
                });
            }
        }
        for (i, j) in self.refine.iter().enumerate() {
            let key = match &j.kind {
                crate::refine::JobKind::Upsert(u) if u.op.is_some() => "upsert.op",
                // SCD1: its tombstones; SCD2: the deletes and truncates silver has no trace of.
                crate::refine::JobKind::Cdc(_) => "cdc",
                _ => continue,
            };
            out.push(PipelineTable {
                name: tombstone_table(&j.job),
                kind: TableKind::Tombstones,
                key: format!("refine[{i}].{key}"),
            });
        }
        out
    }
}

/// Refuse topics that share a table with another shape, and any two names of [`tables`]
/// (plus [`PROBE_DIRECTORY`]) that are one table or one inside the other, segment by segment
/// and ignoring case (`raw` vs `raw/order`, `Raw` vs `raw`; not `raw` vs `rawx`).
///
/// [`tables`]: PipelineConfig::tables
pub(crate) fn check(cfg: &PipelineConfig) -> Result<()> {
    check_shared_topic_tables(&cfg.topics)?;
    let mut claims = cfg.tables();
    claims.push(PipelineTable {
        name: PROBE_DIRECTORY.into(),
        kind: TableKind::Tombstones, // never listed; only its label's shape matters
        key: String::new(),
    });
    let label = |c: &PipelineTable| {
        if c.key.is_empty() {
            format!("the reserved `{PROBE_DIRECTORY}` (where the start-up write probe writes)")
        } else {
            c.label()
        }
    };
    let segments = |c: &PipelineTable| -> Vec<String> {
        c.name.split('/').map(str::to_ascii_lowercase).collect()
    };
    for (i, a) in claims.iter().enumerate() {
        for b in &claims[i + 1..] {
            let (sa, sb) = (segments(a), segments(b));
            let case = if a.name != b.name && sa == sb {
                " (names that differ only in case are one directory on case-insensitive file systems)"
            } else {
                ""
            };
            if sa == sb {
                return Err(Error::Config(format!(
                    "{} and {} are one table{case}: a table has one writer, or its rows mix; give \
                     one of them another name",
                    label(a),
                    label(b)
                )));
            }
            let (outer, inner) = if sb.starts_with(&sa) {
                (a, b)
            } else if sa.starts_with(&sb) {
                (b, a)
            } else {
                continue;
            };
            return Err(Error::Config(format!(
                "{} is inside {}: a table may not hold another (vacuuming \"{}\" would delete \
                 \"{}\"'s log and data, as files its log does not reference); move one of them, \
                 e.g. \"{}\" -> \"{}/main\" next to it",
                label(inner),
                label(outer),
                outer.name,
                inner.name,
                outer.name,
                outer.name
            )));
        }
    }
    Ok(())
}

/// Topics may share a table only if they declare the same shape: ingestion decodes a table's
/// records against one layout, so a second topic's other columns would silently be dropped or
/// mixed into the first one's.
fn check_shared_topic_tables(topics: &[TopicConfig]) -> Result<()> {
    for (i, t) in topics.iter().enumerate() {
        let Some((j, first)) = topics[..i]
            .iter()
            .enumerate()
            .find(|(_, o)| o.table == t.table)
        else {
            continue;
        };
        let field = if t.columns != first.columns {
            "columns"
        } else if t.partition_by != first.partition_by {
            "partition_by"
        } else if t.schema_mode != first.schema_mode {
            "schema_mode"
        } else if t.kafka_metadata != first.kafka_metadata {
            "kafka_metadata"
        } else {
            continue;
        };
        return Err(Error::Config(format!(
            "`topics[{i}].{field}` differs from `topics[{j}].{field}`, and both topics write \
             \"{}\": topics sharing a table must declare the same columns (names, types, \
             nullability, order), partition_by, schema_mode and kafka_metadata; copy \
             topics[{j}]'s or give topics[{i}] its own `table`",
            t.table
        )));
    }
    Ok(())
}
