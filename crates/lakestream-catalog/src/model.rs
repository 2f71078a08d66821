//! What the catalog should hold for a lake table, derived from its Delta log alone: the
//! catalog table (name, location, columns and types, partition keys, storage format, the
//! parameters Athena reads) and, for the manifest form, one partition per partition value of
//! the live files. Pure given a loaded table; compared field by field with what Glue holds.

use crate::error::Result;
use deltalake::arrow::datatypes::Schema;
use lakestream_core::inspect::ddl::hive_type;
use lakestream_core::maintenance::manifest::hive_partition_path;
use lakestream_core::table::TableHandle;
use lakestream_formats::config::CatalogForm;
use std::collections::{BTreeMap, BTreeSet};

/// The parameter naming the lake table a catalog table was registered for: a table that
/// carries it for another table (or not at all, at another location) is never changed.
pub const OWNER_PARAMETER: &str = "lakestream.table";
/// The parameter recording the form (`delta` or `manifest`).
pub const FORM_PARAMETER: &str = "lakestream.form";

/// The Hive formats of the native Delta form (Athena reads `table_type` and the log, not
/// these; Glue requires some).
const PARQUET_INPUT: &str = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat";
const PARQUET_OUTPUT: &str = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat";
const PARQUET_SERDE: &str = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe";
/// The manifest form: each partition directory holds a `manifest` listing data files.
const SYMLINK_INPUT: &str = "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat";
const IGNORE_KEY_OUTPUT: &str = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat";
/// Where the maintenance job writes the manifests, under the table.
pub const MANIFEST_DIR: &str = "_symlink_format_manifest";

/// A column as the catalog stores it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Column {
    /// Lower-cased, as Athena names columns.
    pub name: String,
    /// The Hive type (`bigint`, `timestamp`, `array<string>`, ...).
    pub type_name: String,
}

/// A catalog table: the fields Lakestream manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogTable {
    /// The catalog name (`raw_order`).
    pub name: String,
    /// `s3://bucket/lake/raw/order/` (or its `_symlink_format_manifest/`).
    pub location: String,
    /// Data columns, in schema order.
    pub columns: Vec<Column>,
    /// Partition keys (the manifest form only).
    pub partition_keys: Vec<Column>,
    /// Hive input format.
    pub input_format: String,
    /// Hive output format.
    pub output_format: String,
    /// SerDe class.
    pub serde: String,
    /// Table parameters (a catalog may hold more; these must be among them).
    pub parameters: BTreeMap<String, String>,
}

/// One partition of a manifest-form table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CatalogPartition {
    /// The values, in partition-key order, unescaped; null or empty as
    /// `__HIVE_DEFAULT_PARTITION__` (what Athena reads as NULL).
    pub values: Vec<String>,
    /// The partition's manifest directory.
    pub location: String,
}

impl CatalogTable {
    /// The lake table this was registered for, if Lakestream registered it.
    pub fn owner(&self) -> Option<&str> {
        self.parameters.get(OWNER_PARAMETER).map(String::as_str)
    }

    /// What differs from `want` in the fields Lakestream manages, described for a report
    /// (`columns: + note string`); empty when nothing does.
    pub fn differences(&self, want: &CatalogTable) -> Vec<String> {
        let mut out = Vec::new();
        if trimmed(&self.location) != trimmed(&want.location) {
            out.push(format!("location: {} -> {}", self.location, want.location));
        }
        for (what, have, wanted) in [
            ("columns", &self.columns, &want.columns),
            ("partition keys", &self.partition_keys, &want.partition_keys),
        ] {
            if have != wanted {
                out.push(format!("{what}: {}", column_changes(have, wanted)));
            }
        }
        if (&self.input_format, &self.output_format, &self.serde)
            != (&want.input_format, &want.output_format, &want.serde)
        {
            out.push(format!(
                "format: {} -> {}",
                self.input_format, want.input_format
            ));
        }
        for (k, v) in &want.parameters {
            if self.parameters.get(k) != Some(v) {
                out.push(format!("parameter {k} = {v}"));
            }
        }
        out
    }

    /// `want` with the parameters this table holds beyond Lakestream's kept (a catalog
    /// update replaces the whole table).
    pub fn merged_into(&self, want: &CatalogTable) -> CatalogTable {
        let mut out = want.clone();
        for (k, v) in &self.parameters {
            out.parameters.entry(k.clone()).or_insert_with(|| v.clone());
        }
        out
    }
}

fn trimmed(location: &str) -> &str {
    location.trim_end_matches('/')
}

/// `+ name type`, `- name type`, `~ name old -> new`, joined.
fn column_changes(have: &[Column], want: &[Column]) -> String {
    let mut parts = Vec::new();
    for w in want {
        match have.iter().find(|h| h.name == w.name) {
            None => parts.push(format!("+ {} {}", w.name, w.type_name)),
            Some(h) if h.type_name != w.type_name => {
                parts.push(format!("~ {} {} -> {}", w.name, h.type_name, w.type_name))
            }
            Some(_) => {}
        }
    }
    for h in have {
        if !want.iter().any(|w| w.name == h.name) {
            parts.push(format!("- {} {}", h.name, h.type_name));
        }
    }
    if parts.is_empty() {
        parts.push("order".to_string());
    }
    parts.join(", ")
}

/// The catalog table of lake table `table` (its schema, partition columns and location), as
/// catalog name `name` in `form`. Pure: tested without a table.
pub fn desired_table(
    table: &str,
    name: &str,
    location: &str,
    schema: &Schema,
    partitions: &[String],
    form: CatalogForm,
) -> Result<CatalogTable> {
    let column = |f: &deltalake::arrow::datatypes::Field| -> Result<Column> {
        Ok(Column {
            name: f.name().to_lowercase(),
            type_name: hive_type(f.data_type(), table)?,
        })
    };
    let base = format!("{}/", trimmed(location));
    let mut parameters = BTreeMap::from([
        ("EXTERNAL".to_string(), "TRUE".to_string()),
        (OWNER_PARAMETER.to_string(), table.to_string()),
    ]);
    Ok(match form {
        CatalogForm::Delta => {
            parameters.insert("table_type".into(), "DELTA".into());
            parameters.insert(FORM_PARAMETER.into(), "delta".into());
            CatalogTable {
                name: name.to_string(),
                location: base,
                columns: schema
                    .fields()
                    .iter()
                    .map(|f| column(f))
                    .collect::<Result<_>>()?,
                partition_keys: Vec::new(),
                input_format: PARQUET_INPUT.into(),
                output_format: PARQUET_OUTPUT.into(),
                serde: PARQUET_SERDE.into(),
                parameters,
            }
        }
        CatalogForm::Manifest => {
            parameters.insert(FORM_PARAMETER.into(), "manifest".into());
            let is_partition = |f: &&std::sync::Arc<deltalake::arrow::datatypes::Field>| {
                partitions.contains(f.name())
            };
            let mut partition_keys = Vec::new();
            for p in partitions {
                let f = schema
                    .field_with_name(p)
                    .map_err(|_| lakestream_core::Error::Schema {
                        table: table.to_string(),
                        reason: format!("partition column `{p}` is not in the schema"),
                    })?;
                partition_keys.push(column(f)?);
            }
            CatalogTable {
                name: name.to_string(),
                location: format!("{base}{MANIFEST_DIR}/"),
                columns: schema
                    .fields()
                    .iter()
                    .filter(|f| !is_partition(f))
                    .map(|f| column(f))
                    .collect::<Result<_>>()?,
                partition_keys,
                input_format: SYMLINK_INPUT.into(),
                output_format: IGNORE_KEY_OUTPUT.into(),
                serde: PARQUET_SERDE.into(),
                parameters,
            }
        }
    })
}

/// The partitions of a manifest-form table: one per distinct partition value of its live
/// files, located at the manifest directory the maintenance job writes for it.
pub fn desired_partitions(handle: &TableHandle, location: &str) -> Result<Vec<CatalogPartition>> {
    let columns = handle.partition_columns()?;
    if columns.is_empty() {
        return Ok(Vec::new());
    }
    let base = format!("{}/{MANIFEST_DIR}/", trimmed(location));
    let mut out = BTreeSet::new();
    for f in handle.live_files()? {
        let values = f.partition_values();
        let dir = hive_partition_path(&columns, &values);
        out.insert(CatalogPartition {
            values: columns
                .iter()
                .map(|c| {
                    values
                        .get(c)
                        .cloned()
                        .flatten()
                        .filter(|v| !v.is_empty())
                        .unwrap_or_else(|| {
                            lakestream_core::maintenance::manifest::HIVE_DEFAULT_PARTITION.into()
                        })
                })
                .collect(),
            location: format!("{base}{dir}/"),
        });
    }
    Ok(out.into_iter().collect())
}

/// A table location as the catalog stores it: the lake's URL with its path unescaped (the
/// object key itself, as Athena takes it).
pub fn catalog_location(url: &url::Url) -> String {
    let path = lakestream_core::partition_path::decode(url.path());
    match url.host_str() {
        Some(host) => format!("{}://{host}{path}", url.scheme()),
        None => format!("{}://{path}", url.scheme()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::datatypes::{DataType, Field, TimeUnit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("Order_Id", DataType::Int32, false),
            Field::new(
                "timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Field::new("price", DataType::Decimal128(10, 2), true),
            Field::new("year", DataType::Utf8, false),
        ])
    }

    #[test]
    fn delta_form_has_every_column_and_no_partition_keys() {
        let t = desired_table(
            "raw/order",
            "raw_order",
            "s3://b/lake/raw/order",
            &schema(),
            &["year".to_string()],
            CatalogForm::Delta,
        )
        .expect("table");
        assert_eq!(t.location, "s3://b/lake/raw/order/");
        let cols: Vec<(&str, &str)> = t
            .columns
            .iter()
            .map(|c| (c.name.as_str(), c.type_name.as_str()))
            .collect();
        assert_eq!(
            cols,
            [
                ("order_id", "int"),
                ("timestamp", "timestamp"),
                ("price", "decimal(10,2)"),
                ("year", "string")
            ]
        );
        assert!(t.partition_keys.is_empty());
        assert_eq!(t.parameters["table_type"], "DELTA");
        assert_eq!(t.owner(), Some("raw/order"));
    }

    #[test]
    fn manifest_form_splits_partition_keys_and_points_at_the_manifests() {
        let t = desired_table(
            "raw/order",
            "raw_order",
            "s3://b/lake/raw/order/",
            &schema(),
            &["year".to_string()],
            CatalogForm::Manifest,
        )
        .expect("table");
        assert_eq!(
            t.location,
            "s3://b/lake/raw/order/_symlink_format_manifest/"
        );
        assert_eq!(t.columns.len(), 3);
        assert_eq!(
            t.partition_keys,
            [Column {
                name: "year".into(),
                type_name: "string".into()
            }]
        );
        assert_eq!(t.input_format, SYMLINK_INPUT);
        assert!(!t.parameters.contains_key("table_type"));
    }

    #[test]
    fn differences_name_what_changed_and_ignore_foreign_parameters() {
        let want = desired_table(
            "raw/order",
            "raw_order",
            "s3://b/l/raw/order/",
            &schema(),
            &[],
            CatalogForm::Delta,
        )
        .expect("table");
        let mut have = want.clone();
        have.parameters
            .insert("transient_lastDdlTime".into(), "1".into());
        have.location = "s3://b/l/raw/order".into();
        assert!(have.differences(&want).is_empty());
        have.columns.pop();
        have.columns[0].type_name = "bigint".into();
        assert_eq!(
            have.differences(&want),
            ["columns: ~ order_id bigint -> int, + year string"]
        );
        let merged = have.merged_into(&want);
        assert_eq!(merged.columns, want.columns);
        assert_eq!(merged.parameters["transient_lastDdlTime"], "1");
    }

    #[test]
    fn locations_are_unescaped_object_keys() {
        let url = url::Url::parse("s3://b/my%20lake/raw/order/").expect("url");
        assert_eq!(catalog_location(&url), "s3://b/my lake/raw/order/");
    }
}
