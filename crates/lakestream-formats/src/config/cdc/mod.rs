//! The `[[cdc]]` section: table families of a change-data-capture feed. One block declares
//! every table of a source database — a Debezium topic pattern (`crm.public.*`) or an S3
//! prefix of DMS / plain file deliveries — with name templates for the bronze table (every
//! change, append-only, with its lineage) and the silver table (changes applied per key, SCD
//! type 1 or 2). A table that appears in the feed later gets its tables without a redeploy.
//! Every key is documented in README.md ("CDC table families").

use crate::error::{Error, Result};
use crate::refine::duration;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The `keys` / `columns` entry that applies to every table of a family without its own entry.
pub const EVERY_TABLE: &str = "*";

/// One family of CDC tables.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CdcFamily {
    /// Family name (`[A-Za-z0-9_-]`): part of the apply jobs' names (`cdc-<family>/<schema>.<table>`).
    pub family: String,
    /// The feed's shape.
    pub source: CdcSource,
    /// Debezium: topic patterns `<prefix>.<schema>.<table>`; `*` matches one or more
    /// characters other than `.` (e.g. `crm.public.*`, `crm.*.*`).
    #[serde(default)]
    pub topics: Vec<String>,
    /// DMS / files: `s3://<bucket>/<prefix>/`; objects at `<prefix>/<schema>/<table>/...`.
    /// Locally (`lakestream invoke s3-logs --objects DIR`) the bucket is a directory of `DIR`.
    #[serde(default)]
    pub location: Option<String>,
    /// Bronze table name template (`{schema}` and `{table}` as whole segments).
    #[serde(default)]
    pub bronze: Option<String>,
    /// Silver table name template (`{schema}` and `{table}` as whole segments).
    #[serde(default)]
    pub silver: Option<String>,
    /// `1` (latest row per key) or `2` (history rows with `__START_AT` / `__END_AT`).
    #[serde(default)]
    pub scd: ScdType,
    /// Key columns per table (`"<schema>.<table>" = ["id"]`; `"*"`: every table without its
    /// own entry). Debezium default: the record key's fields; DMS / files: required for every
    /// applied table.
    #[serde(default)]
    pub keys: BTreeMap<String, Vec<String>>,
    /// Declared columns per table (`"<schema>.<table>" = ["id int64", "amount decimal(10,2)"]`;
    /// `"*"`: every table without its own entry), in the source table's order: required for CSV without a header row; elsewhere they fix
    /// the type of the named columns (e.g. Debezium without `schemas.enable`).
    #[serde(default)]
    pub columns: BTreeMap<String, Vec<String>>,
    /// Only these tables (`"<schema>.<table>"`; default: every table of the feed).
    #[serde(default)]
    pub tables: Option<Vec<String>>,
    /// CSV files: the first line names the columns (DMS `AddColumnName=true`). Default: false
    /// for DMS, true for plain files.
    #[serde(default)]
    pub csv_header: Option<bool>,
    /// CSV field delimiter (one ASCII character).
    #[serde(default = "default_delimiter")]
    pub csv_delimiter: String,
    /// DMS: the commit-time column (`TimestampColumnName`): it orders changes before the file
    /// order, and fills `__source_ts`.
    #[serde(default)]
    pub timestamp_column: Option<String>,
    /// How long a delete's tombstone is kept (SCD1): a late older change for the key within
    /// this time is not brought back.
    #[serde(default = "default_tombstone_retention", deserialize_with = "duration")]
    pub tombstone_retention: Duration,
    /// An apply run reads at most this many new bronze data files (whole versions).
    #[serde(default = "default_max_files")]
    pub max_files_per_run: usize,
    /// An apply run reads at most this many MiB of new bronze data files (whole versions).
    #[serde(default = "default_max_mib")]
    pub max_mib_per_run: u64,
}

/// The feed's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CdcSource {
    /// Debezium change events on Kafka (MSK Connect), one topic per table.
    Debezium,
    /// AWS DMS files on S3 (full load `LOAD*.csv|parquet`, then CDC files with an `Op` column).
    Dms,
    /// Plain CSV / JSON lines / Parquet files delivered into a landing prefix (every row an
    /// upsert).
    Files,
}

/// Slowly changing dimension type of the silver tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScdType {
    /// One row per key: the latest change wins; deletes remove the row.
    #[default]
    One,
    /// Every change a row: `__START_AT` / `__END_AT` (open row: null); deletes close the row.
    Two,
}

impl<'de> Deserialize<'de> for ScdType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match u8::deserialize(d)? {
            1 => Ok(Self::One),
            2 => Ok(Self::Two),
            n => Err(serde::de::Error::custom(format!(
                "scd must be 1 or 2, got {n}"
            ))),
        }
    }
}

fn default_delimiter() -> String {
    ",".into()
}
fn default_tombstone_retention() -> Duration {
    Duration::from_secs(30 * 86_400)
}
fn default_max_files() -> usize {
    1000
}
fn default_max_mib() -> u64 {
    64
}

/// Bronze table columns every source writes (then the row's own columns). `__op` is one of
/// [`OP_INSERT`], [`OP_UPDATE`], [`OP_DELETE`], [`OP_SNAPSHOT`], [`OP_TRUNCATE`].
pub mod bronze {
    /// The change: `c`, `u`, `d`, `r` or `t` (Utf8, not null).
    pub const OP: &str = "__op";
    /// Ordering of the table's changes, compared as text (Utf8, not null).
    pub const SEQ: &str = "__seq";
    /// Commit time in the source database (Timestamp µs UTC, nullable).
    pub const SOURCE_TS: &str = "__source_ts";
    /// The Debezium record key as compact JSON (Utf8, nullable).
    pub const KEY: &str = "__key";
    /// Kafka lineage (Utf8 / Int32 / Int64, nullable).
    pub const TOPIC: &str = "__topic";
    /// Kafka partition.
    pub const PARTITION: &str = "__partition";
    /// Kafka offset.
    pub const OFFSET: &str = "__offset";
    /// S3 lineage: bucket/key, ETag, 1-based row number in the object (Utf8 / Utf8 / Int64).
    pub const OBJECT: &str = "__object";
    /// The ETag the object was read with.
    pub const ETAG: &str = "__etag";
    /// Row number (1-based, data rows only) in the object.
    pub const ROW: &str = "__row";
    /// Processing time (Timestamp µs UTC, not null).
    pub const INGESTED_AT: &str = "__ingested_at";
    /// Every bronze metadata column, in table order.
    pub const ALL: [&str; 11] = [
        OP,
        SEQ,
        SOURCE_TS,
        KEY,
        TOPIC,
        PARTITION,
        OFFSET,
        OBJECT,
        ETAG,
        ROW,
        INGESTED_AT,
    ];
    /// `__op` of an insert (Debezium `c`, DMS `I`).
    pub const OP_INSERT: &str = "c";
    /// `__op` of an update (Debezium `u`, DMS `U`).
    pub const OP_UPDATE: &str = "u";
    /// `__op` of a delete (Debezium `d`, DMS `D`); the row holds the last image.
    pub const OP_DELETE: &str = "d";
    /// `__op` of a snapshot / full-load / plain-file row (Debezium `r`, DMS full load).
    pub const OP_SNAPSHOT: &str = "r";
    /// `__op` of a truncate (Debezium `t`): no row data; every earlier change of the table is
    /// void.
    pub const OP_TRUNCATE: &str = "t";
    /// Bronze table properties (set when the table is created).
    pub const FAMILY_PROPERTY: &str = "lakestream.cdc.family";
    /// `<schema>.<table>` of the source table.
    pub const TABLE_PROPERTY: &str = "lakestream.cdc.table";
    /// Key columns, comma separated (from the Debezium record key or the config).
    pub const KEYS_PROPERTY: &str = "lakestream.cdc.keys";
}

/// Silver table columns added to the row's own columns.
pub mod silver {
    /// The sequence of the change the row holds (Utf8, not null).
    pub const SEQ: &str = "__seq";
    /// The source commit time of that change (Timestamp µs UTC, nullable).
    pub const SOURCE_TS: &str = "__source_ts";
    /// SCD2: when the row's version began (the change's commit time; Timestamp µs UTC).
    pub const START_AT: &str = "__START_AT";
    /// SCD2: when it ended (the next change's or the delete's commit time); null: current.
    pub const END_AT: &str = "__END_AT";
    /// SCD2: the sequence of the change that ended the row (Utf8, nullable).
    pub const END_SEQ: &str = "__END_SEQ";
    /// Silver table property: the sequence of the last truncate applied (SCD1 and SCD2).
    pub const TRUNCATED_AT_PROPERTY: &str = "lakestream.cdc.truncated_at";
}

/// One table of a family, as named by the feed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FamilyTable {
    /// Source schema (PostgreSQL schema, MySQL database).
    pub schema: String,
    /// Source table.
    pub table: String,
}

impl FamilyTable {
    /// `<schema>.<table>`, the key of the per-table settings.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

impl CdcFamily {
    /// The bronze template (default `bronze/<family>/{schema}/{table}`).
    pub fn bronze_template(&self) -> String {
        self.bronze
            .clone()
            .unwrap_or_else(|| format!("bronze/{}/{{schema}}/{{table}}", self.family))
    }

    /// The silver template (default `silver/<family>/{schema}/{table}`).
    pub fn silver_template(&self) -> String {
        self.silver
            .clone()
            .unwrap_or_else(|| format!("silver/{}/{{schema}}/{{table}}", self.family))
    }

    /// The directory holding every bronze table of the family (the template's fixed leading
    /// segments): listed to find the family's tables.
    pub fn bronze_directory(&self) -> String {
        fixed_prefix(&self.bronze_template())
    }

    /// The directory holding every silver table of the family.
    pub fn silver_directory(&self) -> String {
        fixed_prefix(&self.silver_template())
    }

    /// The bronze table of `t`; refused when a name segment is not a valid table segment.
    pub fn bronze_table(&self, t: &FamilyTable) -> Result<String> {
        fill(&self.bronze_template(), t)
    }

    /// The silver table of `t`.
    pub fn silver_table(&self, t: &FamilyTable) -> Result<String> {
        fill(&self.silver_template(), t)
    }

    /// The apply job's name for `t` (`cdc-<family>/<schema>.<table>`).
    pub fn job_name(&self, t: &FamilyTable) -> String {
        format!("cdc-{}/{}", self.family, t.qualified())
    }

    /// The bronze table named `name` back to its source table (a listing of
    /// [`bronze_directory`](Self::bronze_directory)); `None` when it does not fit the template.
    pub fn table_of_bronze(&self, name: &str) -> Option<FamilyTable> {
        unfill(&self.bronze_template(), name)
    }

    /// Whether the family applies `t` (its `tables` list, when given).
    pub fn includes(&self, t: &FamilyTable) -> bool {
        self.tables
            .as_ref()
            .is_none_or(|list| list.iter().any(|q| *q == t.qualified()))
    }

    /// Debezium: the table of `topic` (`<prefix>.<schema>.<table>`) when a pattern matches.
    pub fn table_of_topic(&self, topic: &str) -> Option<FamilyTable> {
        if self.source != CdcSource::Debezium {
            return None;
        }
        if !self.topics.iter().any(|p| topic_matches(p, topic)) {
            return None;
        }
        let mut parts = topic.rsplitn(3, '.');
        let table = parts.next()?;
        let schema = parts.next()?;
        let t = FamilyTable {
            schema: schema.to_string(),
            table: table.to_string(),
        };
        self.includes(&t).then_some(t)
    }

    /// DMS / files: `(bucket, prefix)` of [`location`](Self::location), the prefix ending in
    /// `/` (or empty).
    pub fn bucket_and_prefix(&self) -> Option<(String, String)> {
        let rest = self.location.as_deref()?.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = if prefix.is_empty() || prefix.ends_with('/') {
            prefix.to_string()
        } else {
            format!("{prefix}/")
        };
        Some((bucket.to_string(), prefix))
    }

    /// DMS / files: the table of object `key` in `bucket` (`<prefix><schema>/<table>/<...>`).
    pub fn table_of_object(&self, bucket: &str, key: &str) -> Option<FamilyTable> {
        if self.source == CdcSource::Debezium {
            return None;
        }
        let (b, prefix) = self.bucket_and_prefix()?;
        if b != bucket {
            return None;
        }
        let rest = key.strip_prefix(prefix.as_str())?;
        let mut parts = rest.splitn(3, '/');
        let (schema, table, file) = (parts.next()?, parts.next()?, parts.next()?);
        if schema.is_empty() || table.is_empty() || file.is_empty() || file.ends_with('/') {
            return None;
        }
        let t = FamilyTable {
            schema: schema.to_string(),
            table: table.to_string(),
        };
        self.includes(&t).then_some(t)
    }

    /// Declared key columns of `t`, if any: its own entry, else the family-wide `"*"` entry.
    pub fn declared_keys(&self, t: &FamilyTable) -> Option<&[String]> {
        self.keys
            .get(&t.qualified())
            .or_else(|| self.keys.get(EVERY_TABLE))
            .map(Vec::as_slice)
    }

    /// Declared columns of `t` (parsed), in order: its own entry, else the family-wide `"*"`
    /// entry; empty when neither is declared.
    pub fn declared_columns(&self, t: &FamilyTable) -> Result<Vec<CdcColumn>> {
        let Some((name, list)) = self
            .columns
            .get_key_value(&t.qualified())
            .or_else(|| self.columns.get_key_value(EVERY_TABLE))
        else {
            return Ok(vec![]);
        };
        list.iter()
            .map(|c| CdcColumn::parse(c))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Config(format!("`cdc.{}.columns.\"{name}\"`: {e}", self.family)))
    }

    /// CSV files have a header row.
    pub fn has_csv_header(&self) -> bool {
        self.csv_header.unwrap_or(self.source == CdcSource::Files)
    }

    /// Check the block's rules; `key` is its config path (e.g. `cdc[0]`).
    pub fn validate(&self, key: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.family.is_empty()
            || !self
                .family
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return bad(format!(
                "`{key}.family` = \"{}\": use [A-Za-z0-9_-], e.g. crm",
                self.family
            ));
        }
        match self.source {
            CdcSource::Debezium => {
                if self.topics.is_empty() || self.location.is_some() {
                    return bad(format!(
                        "`{key}`: a debezium family names `topics` (e.g. [\"crm.public.*\"]) and no `location`"
                    ));
                }
                for p in &self.topics {
                    if p.split('.').count() < 3 || p.split('.').any(str::is_empty) {
                        return bad(format!(
                            "`{key}.topics`: \"{p}\" is not `<prefix>.<schema>.<table>` (`*` for any segment)"
                        ));
                    }
                }
            }
            CdcSource::Dms | CdcSource::Files => {
                if !self.topics.is_empty() {
                    return bad(format!(
                        "`{key}.topics`: only a debezium family reads topics"
                    ));
                }
                match self.bucket_and_prefix() {
                    Some((b, _)) if crate::names::check_bucket_name(&b).is_ok() => {}
                    _ => {
                        return bad(format!(
                            "`{key}.location` must be s3://<bucket>/<prefix>/ (objects at <prefix>/<schema>/<table>/<file>)"
                        ));
                    }
                }
            }
        }
        for (name, template) in [
            ("bronze", self.bronze_template()),
            ("silver", self.silver_template()),
        ] {
            check_template(&format!("{key}.{name}"), &template)?;
        }
        let (b, s) = (self.bronze_directory(), self.silver_directory());
        if b.eq_ignore_ascii_case(&s) {
            return bad(format!(
                "`{key}.bronze` and `{key}.silver` share the directory \"{b}\": give silver its own (e.g. silver/{{schema}}/{{table}})"
            ));
        }
        if self.csv_delimiter.len() != 1 || !self.csv_delimiter.is_ascii() {
            return bad(format!("`{key}.csv_delimiter` must be one ASCII character"));
        }
        if self.max_files_per_run == 0 || self.max_mib_per_run == 0 {
            return bad(format!(
                "`{key}.max_files_per_run` and `{key}.max_mib_per_run` must be >= 1"
            ));
        }
        for (table, cols) in &self.keys {
            if cols.is_empty() || cols.iter().any(String::is_empty) {
                return bad(format!(
                    "`{key}.keys.\"{table}\"` must name at least one column"
                ));
            }
        }
        for (table, cols) in &self.columns {
            for c in cols {
                if let Err(e) = CdcColumn::parse(c) {
                    return bad(format!("`{key}.columns.\"{table}\"`: {e}"));
                }
            }
        }
        Ok(())
    }
}

/// A declared column: `"<name> <type>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdcColumn {
    /// Column name.
    pub name: String,
    /// Its type.
    pub data_type: CdcType,
}

/// Types a CDC column may be declared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CdcType {
    /// UTF-8 text (`string`).
    String,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float64`.
    Float64,
    /// `boolean`.
    Boolean,
    /// `timestamp`: instant, µs, UTC (ISO-8601 text, or epoch ms / µs / ns per the source).
    Timestamp,
    /// `date` (`YYYY-MM-DD`, or days since the epoch).
    Date,
    /// `decimal(p,s)`: precision <= 38.
    Decimal(u8, i8),
    /// `binary` (bytes; base64 in JSON).
    Binary,
}

impl CdcColumn {
    /// Parse `"<name> <type>"`.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        let (name, ty) = text
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("\"{text}\": write \"<name> <type>\", e.g. \"id int64\""))?;
        let ty = ty.trim().to_ascii_lowercase();
        let data_type = match ty.as_str() {
            "string" => CdcType::String,
            "int32" => CdcType::Int32,
            "int64" => CdcType::Int64,
            "float64" => CdcType::Float64,
            "boolean" => CdcType::Boolean,
            "timestamp" => CdcType::Timestamp,
            "date" => CdcType::Date,
            "binary" => CdcType::Binary,
            d if d.starts_with("decimal(") && d.ends_with(')') => {
                let inner = &d["decimal(".len()..d.len() - 1];
                let (p, s) = inner
                    .split_once(',')
                    .ok_or_else(|| format!("\"{ty}\": write decimal(<precision>,<scale>)"))?;
                let p: u8 = p
                    .trim()
                    .parse()
                    .map_err(|_| format!("\"{ty}\": bad precision"))?;
                let s: i8 = s
                    .trim()
                    .parse()
                    .map_err(|_| format!("\"{ty}\": bad scale"))?;
                if p == 0 || p > 38 || s < 0 || s as u8 > p {
                    return Err(format!(
                        "\"{ty}\": precision 1..=38 and 0 <= scale <= precision"
                    ));
                }
                CdcType::Decimal(p, s)
            }
            _ => {
                return Err(format!(
                    "\"{ty}\" is not a type: use string, int32, int64, float64, boolean, timestamp, date, decimal(p,s) or binary"
                ));
            }
        };
        Ok(Self {
            name: name.to_string(),
            data_type,
        })
    }
}

/// Whether topic pattern `pattern` matches `topic` (`*` = one or more non-`.` characters).
pub fn topic_matches(pattern: &str, topic: &str) -> bool {
    let (p, t): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), topic.split('.').collect());
    p.len() == t.len()
        && p.iter()
            .zip(&t)
            .all(|(p, t)| !t.is_empty() && segment_matches(p, t))
}

fn segment_matches(pattern: &str, text: &str) -> bool {
    let Some((head, tail)) = pattern.split_once('*') else {
        return pattern == text;
    };
    // `*` matches one or more characters, greedily tried at each position.
    let Some(rest) = text.strip_prefix(head) else {
        return false;
    };
    (1..=rest.len())
        .filter(|&i| rest.is_char_boundary(i))
        .any(|i| segment_matches(tail, &rest[i..]))
}

/// The template's segments before the first placeholder.
fn fixed_prefix(template: &str) -> String {
    template
        .split('/')
        .take_while(|s| !s.contains('{'))
        .collect::<Vec<_>>()
        .join("/")
}

fn check_template(key: &str, template: &str) -> Result<()> {
    let segs: Vec<&str> = template.split('/').collect();
    let fixed = segs.iter().take_while(|s| !s.contains('{')).count();
    let rest = &segs[fixed..];
    let ok = fixed >= 1
        && rest.contains(&"{table}")
        && rest.iter().all(|s| matches!(*s, "{schema}" | "{table}"))
        && rest.iter().filter(|s| **s == "{table}").count() == 1
        && rest.iter().filter(|s| **s == "{schema}").count() <= 1;
    if !ok {
        return Err(Error::Config(format!(
            "`{key}` = \"{template}\": write fixed segments, then `{{schema}}` and `{{table}}` as whole segments, e.g. \"bronze/crm/{{schema}}/{{table}}\""
        )));
    }
    let fixed_path = segs[..fixed].join("/");
    if let Err(why) = crate::names::check_table_path(&fixed_path) {
        return Err(Error::Config(format!("`{key}` = \"{template}\": {why}")));
    }
    if segs[..fixed].iter().any(|s| s.starts_with('_')) {
        return Err(Error::Config(format!(
            "`{key}` = \"{template}\": a segment starts with `_`"
        )));
    }
    Ok(())
}

fn fill(template: &str, t: &FamilyTable) -> Result<String> {
    for (what, v) in [("schema", &t.schema), ("table", &t.table)] {
        let ok = !v.is_empty()
            && !v.starts_with(['_', '.'])
            && v.len() <= 128
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '='));
        if !ok {
            return Err(Error::Config(format!(
                "CDC {what} name \"{}\" cannot name a table: use [A-Za-z0-9_.=-], not starting with `_` or `.`, at most 128 characters",
                v.escape_debug()
            )));
        }
    }
    let name = template
        .replace("{schema}", &t.schema)
        .replace("{table}", &t.table);
    crate::names::check_table_path(&name).map_err(Error::Config)?;
    Ok(name)
}

fn unfill(template: &str, name: &str) -> Option<FamilyTable> {
    let (ts, ns): (Vec<&str>, Vec<&str>) =
        (template.split('/').collect(), name.split('/').collect());
    if ts.len() != ns.len() {
        return None;
    }
    let (mut schema, mut table) = (String::new(), None);
    for (t, n) in ts.iter().zip(&ns) {
        match *t {
            "{schema}" => schema = (*n).to_string(),
            "{table}" => table = Some((*n).to_string()),
            fixed if fixed.eq_ignore_ascii_case(n) => {}
            _ => return None,
        }
    }
    let t = FamilyTable {
        schema,
        table: table?,
    };
    fill(template, &t).ok().filter(|n| n == name).map(|_| t)
}

#[cfg(test)]
mod tests;
