//! `[catalog]`: which tables `lakestream catalog sync` (and the maintenance function's manifest
//! job) keep registered in the Glue Data Catalog, under which database, in which form. Absent
//! (no `database`), nothing is synced.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The catalog section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// The Glue database the tables go to (created if missing); no sync when absent. The
    /// functions take it from `LAKESTREAM_CATALOG_DATABASE` when that is set (the template sets
    /// it, so the IAM policy and the function name one database).
    #[serde(default)]
    pub database: Option<String>,
    /// The tables to register, as patterns over table names (`*` matches any run of
    /// characters, `/` included): default every table the pipeline writes except Lakestream's
    /// own side tables (`_lakestream/...`).
    #[serde(default = "every_table")]
    pub tables: Vec<String>,
    /// Tables left out (patterns), e.g. `["dead_letters"]`.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Tables registered as Hive tables over the symlink manifests (patterns); every other
    /// table is registered as a native Delta table (`table_type = DELTA`, Athena engine v3).
    #[serde(default)]
    pub manifest: Vec<String>,
    /// At most this many partitions registered (or deregistered) per table per run; the rest
    /// follow on the next run.
    #[serde(default = "default_max_partitions")]
    pub max_partitions_per_run: usize,
    /// Catalog names for tables whose default name (`raw/order` -> `raw_order`) collides with
    /// another table's: `{ "raw-order" = "raw_order_2" }`.
    #[serde(default)]
    pub names: BTreeMap<String, String>,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self {
            database: None,
            tables: every_table(),
            exclude: Vec::new(),
            manifest: Vec::new(),
            max_partitions_per_run: default_max_partitions(),
            names: BTreeMap::new(),
        }
    }
}

fn every_table() -> Vec<String> {
    vec!["*".to_string()]
}

fn default_max_partitions() -> usize {
    1000
}

/// How a table is registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogForm {
    /// `table_type = DELTA`: Athena (engine v3), Spark and Trino read the Delta log.
    Delta,
    /// A partitioned Hive table over `_symlink_format_manifest/`.
    Manifest,
}

impl CatalogConfig {
    /// Whether `table` is registered, and how; `None` when the tables patterns leave it out
    /// or it is one of Lakestream's side tables.
    pub fn form_of(&self, table: &str) -> Option<CatalogForm> {
        let t = table.trim_matches('/');
        if t.split('/').any(|s| s.starts_with('_'))
            || !self.tables.iter().any(|p| pattern_matches(p, t))
            || self.exclude.iter().any(|p| pattern_matches(p, t))
        {
            return None;
        }
        Some(if self.manifest.iter().any(|p| pattern_matches(p, t)) {
            CatalogForm::Manifest
        } else {
            CatalogForm::Delta
        })
    }

    /// Check the section: a database name Glue and Athena accept, catalog names likewise, a
    /// positive partition bound.
    pub fn validate(&self) -> Result<()> {
        if let Some(db) = &self.database {
            check_name("catalog.database", db)?;
        }
        for (table, name) in &self.names {
            check_name(&format!("catalog.names.\"{table}\""), name)?;
        }
        if self.max_partitions_per_run == 0 {
            return Err(Error::Config(
                "`catalog.max_partitions_per_run` must be >= 1".into(),
            ));
        }
        Ok(())
    }
}

/// Athena's rule for database and table names: lower-case ASCII letters, digits and `_`,
/// at most 255 characters.
fn check_name(key: &str, name: &str) -> Result<()> {
    if !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "`{key}` = \"{}\": use lower-case letters, digits and `_` (what Athena accepts)",
            name.escape_debug()
        )))
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters.
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_forms() {
        assert!(pattern_matches("*", "raw/order"));
        assert!(pattern_matches("raw/*", "raw/order"));
        assert!(!pattern_matches("raw/*", "curated/order"));
        assert!(pattern_matches(
            "access_logs/*-prod",
            "access_logs/datalake-prod"
        ));
        assert!(!pattern_matches("a*a", "a"));
        assert!(pattern_matches("*order*", "gold/order_hourly"));
        assert!(pattern_matches("dead_letters", "dead_letters"));
        assert!(!pattern_matches("dead_letters", "dead_letters2"));
        let c = CatalogConfig {
            database: Some("lake".into()),
            exclude: vec!["dead_letters".into()],
            manifest: vec!["raw/*".into()],
            ..Default::default()
        };
        assert_eq!(c.form_of("raw/order"), Some(CatalogForm::Manifest));
        assert_eq!(c.form_of("curated/order"), Some(CatalogForm::Delta));
        assert_eq!(c.form_of("dead_letters"), None);
        assert_eq!(c.form_of("_lakestream/silver/tombstones"), None);
        assert!(c.validate().is_ok());
        let bad = CatalogConfig {
            database: Some("My-Lake".into()),
            ..Default::default()
        };
        let err = bad.validate().expect_err("bad name").to_string();
        assert!(
            err.contains("catalog.database") && err.contains("lower-case"),
            "{err}"
        );
    }
}
