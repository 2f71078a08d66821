//! Athena DDL for a table, from its Delta schema: the native Delta form (Athena engine v3 reads
//! the log itself), or the Hive form over the symlink manifests the maintenance job writes
//! (`_symlink_format_manifest/`), with exact columns, types and partitions. Table names map to
//! Athena names (`raw/order` -> `raw_order`); two pipeline tables with one name are refused
//! ([`unique_athena_name`]).

use crate::error::{Error, Result};
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use lakestream_formats::config::PipelineConfig;

/// Which `CREATE EXTERNAL TABLE` to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdlForm {
    /// `TBLPROPERTIES ('table_type' = 'DELTA')`: Athena reads the Delta log.
    Native,
    /// A Hive table over the symlink manifests (Presto/Trino/Athena v2 style).
    Manifest,
}

/// The DDL for `table` of `lake`, named [`athena_name`] (see [`ddl_named`]).
pub async fn ddl(lake: &Lake, table: &str, form: DdlForm) -> Result<String> {
    ddl_named(lake, table, &athena_name(table), form).await
}

/// The DDL for `table` of `lake` as Athena table `name` (`<name>_manifest` for the manifest
/// form).
pub async fn ddl_named(lake: &Lake, table: &str, name: &str, form: DdlForm) -> Result<String> {
    let handle = TableHandle::open_existing(lake, table).await?;
    let schema = handle.arrow_schema()?;
    let partitions = handle.partition_columns()?;
    let location = lake.table_url(table)?.to_string();
    render_named(table, name, &location, &schema, &partitions, form)
}

/// Render the DDL (pure: tested without a table), named [`athena_name`].
pub fn render(
    table: &str,
    location: &str,
    schema: &Schema,
    partitions: &[String],
    form: DdlForm,
) -> Result<String> {
    render_named(
        table,
        &athena_name(table),
        location,
        schema,
        partitions,
        form,
    )
}

/// Render the DDL as Athena table `name`.
pub fn render_named(
    table: &str,
    name: &str,
    location: &str,
    schema: &Schema,
    partitions: &[String],
    form: DdlForm,
) -> Result<String> {
    let mut out = String::new();
    if !location.starts_with("s3://") {
        out += &format!(
            "-- {location} is not on S3: Athena reads tables on S3 only; copy the table there (or \
             deploy) and change LOCATION\n"
        );
    }
    match form {
        DdlForm::Native => {
            out += &format!(
                "CREATE EXTERNAL TABLE `{name}`\nLOCATION '{location}'\nTBLPROPERTIES ('table_type' = 'DELTA');\n"
            );
        }
        DdlForm::Manifest => {
            let column = |name: &str, f: &Field| -> Result<String> {
                hive_name(name, table, true)?;
                Ok(format!("  `{name}` {}", hive_type(f.data_type(), table)?))
            };
            let data: Vec<String> = schema
                .fields()
                .iter()
                .filter(|f| !partitions.contains(f.name()))
                .map(|f| column(f.name(), f))
                .collect::<Result<_>>()?;
            let parts: Vec<String> = partitions
                .iter()
                .map(|p| {
                    let f = schema.field_with_name(p).map_err(|_| Error::Schema {
                        table: table.to_string(),
                        reason: format!("partition column `{p}` is not in the schema"),
                    })?;
                    // Lower case, as the manifest directories name them (Hive's `makePartName`).
                    column(&p.to_lowercase(), f).map(|c| c.trim_start().to_string())
                })
                .collect::<Result<_>>()?;
            out += &format!(
                "CREATE EXTERNAL TABLE `{name}_manifest` (\n{})\n",
                data.join(",\n")
            );
            if !parts.is_empty() {
                out += &format!("PARTITIONED BY ({})\n", parts.join(", "));
            }
            out += "ROW FORMAT SERDE 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe'\n\
                    STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'\n\
                    OUTPUTFORMAT 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat'\n";
            out += &format!("LOCATION '{location}_symlink_format_manifest/';\n");
            if !parts.is_empty() {
                out += &format!(
                    "-- partition directories are Hive-escaped (`tag=a%2Fb`; null and empty values are \
                     `__HIVE_DEFAULT_PARTITION__`, read as NULL)\n\
                     -- after new partitions appear (the manifests are rewritten by `lakestream manifest`):\n\
                     MSCK REPAIR TABLE `{name}_manifest`;\n"
                );
            }
        }
    }
    Ok(out)
}

/// Athena table names: lower case letters, digits and `_` (`raw/order` -> `raw_order`). Not
/// injective (`raw/order`, `raw_order`, `raw-order` and `Raw/Order` are all `raw_order`): use
/// [`unique_athena_name`] to name a table among others.
pub fn athena_name(table: &str) -> String {
    table
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// `table`'s Athena name among `tables` (the pipeline's, see [`pipeline_tables`]): its
/// [`athena_name`], unless another table has the same one — then an error naming both, and the
/// caller picks a name (`lakestream ddl --name`). Refusing keeps the familiar names
/// (`raw_order`) for the tables that do not collide; an escaping that never collides would
/// rename every table.
pub fn unique_athena_name(tables: &[String], table: &str) -> Result<String> {
    let name = athena_name(table);
    let mut others: Vec<&String> = tables
        .iter()
        .filter(|t| t.trim_matches('/') != table.trim_matches('/') && athena_name(t) == name)
        .collect();
    others.sort();
    others.dedup();
    match others.first() {
        None => Ok(name),
        Some(other) => Err(Error::Config(format!(
            "tables `{table}` and `{other}` both have the Athena name `{name}`{}; give `{table}` \
             another one with `--name` (lower-case letters, digits, `_`)",
            if others.len() > 1 {
                format!(" (and {} more)", others.len() - 1)
            } else {
                String::new()
            }
        ))),
    }
}

/// Check a name chosen for Athena: lower-case ASCII letters, digits and `_`, not empty.
pub fn valid_athena_name(name: &str) -> Result<String> {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        Ok(name.to_string())
    } else {
        Err(Error::Config(format!(
            "Athena name `{name}`: use lower-case letters, digits and `_`"
        )))
    }
}

/// Every table of the pipeline, by name: the one list maintenance runs on
/// ([`crate::maintenance::maintained_tables`]: topic tables, dead letters, refine outputs and
/// tombstones, access-log tables found under the prefix).
pub async fn pipeline_tables(lake: &Lake, config: &PipelineConfig) -> Result<Vec<String>> {
    Ok(crate::maintenance::maintained_tables(config, lake)
        .await?
        .into_iter()
        .map(|t| t.name)
        .collect())
}

/// The Hive (Athena, Glue) type of an Arrow type as Delta stores it; [`Error::Schema`] for a
/// type Hive has none for.
pub fn hive_type(t: &DataType, table: &str) -> Result<String> {
    let nested = |f: &Field| hive_type(f.data_type(), table);
    Ok(match t {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "int".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Timestamp(_, _) => "timestamp".into(),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("decimal({p},{s})"),
        DataType::List(f) | DataType::LargeList(f) => format!("array<{}>", nested(f)?),
        DataType::Struct(fields) => format!(
            "struct<{}>",
            fields
                .iter()
                .map(|f| {
                    hive_name(f.name(), table, false)?;
                    Ok(format!("{}:{}", f.name(), nested(f)?))
                })
                .collect::<Result<Vec<_>>>()?
                .join(",")
        ),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!("map<{},{}>", nested(&kv[0])?, nested(&kv[1])?)
            }
            other => return Err(unsupported(table, other)),
        },
        other => return Err(unsupported(table, other)),
    })
}

/// A column name (`top`) or a struct field name as Hive's DDL and Glue's type strings carry it:
/// no backtick or control character anywhere, and inside a type string none of `:<>,;'"`,
/// which would end the field and let the name write DDL of its own (`) LOCATION 's3://...'`).
fn hive_name(name: &str, table: &str, top: bool) -> Result<()> {
    let bad = |c: char| {
        c == '`'
            || c.is_control()
            || (!top && matches!(c, ':' | '<' | '>' | ',' | ';' | '\'' | '"'))
    };
    if name.is_empty() || name.chars().any(bad) {
        return Err(Error::Schema {
            table: table.to_string(),
            reason: format!(
                "{} `{}` cannot be written into Athena / Glue DDL (it is empty or holds a \
                 backtick, a control character{}); rename it at the source or read the table \
                 in its native Delta form (without --manifest)",
                if top { "column" } else { "nested field" },
                name.escape_debug(),
                if top { "" } else { " or one of : < > , ; ' \"" }
            ),
        });
    }
    Ok(())
}

fn unsupported(table: &str, t: &DataType) -> Error {
    Error::Schema {
        table: table.to_string(),
        reason: format!("no Athena type for {t}; use the native Delta form (without --manifest)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::datatypes::TimeUnit;
    use std::sync::Arc;

    #[test]
    fn names_that_would_write_ddl_are_refused() {
        use deltalake::arrow::datatypes::Fields;
        let evil = "x int) LOCATION 's3://attacker-bucket/x/' --";
        let t = DataType::Struct(Fields::from(vec![Field::new(evil, DataType::Int64, true)]));
        let e = hive_type(&t, "bronze/a/b/c").unwrap_err().to_string();
        assert!(
            e.contains("nested field") && e.contains("--manifest"),
            "{e}"
        );
        let ok = DataType::Struct(Fields::from(vec![Field::new(
            "zip code",
            DataType::Utf8,
            true,
        )]));
        assert_eq!(hive_type(&ok, "t").unwrap(), "struct<zip code:string>");
        assert!(hive_name("a`b", "t", true).is_err());
        assert!(hive_name("a,b", "t", true).is_ok());
    }

    #[test]
    fn colliding_athena_names_are_refused_naming_both() {
        let tables: Vec<String> = ["raw/order", "raw_order", "raw-order", "raw/member"]
            .iter()
            .map(|t| t.to_string())
            .collect();
        assert_eq!(
            unique_athena_name(&tables, "raw/member").expect("unique"),
            "raw_member"
        );
        let err = unique_athena_name(&tables, "raw-order")
            .expect_err("collides")
            .to_string();
        assert!(
            err.contains("tables `raw-order` and `raw/order` both have the Athena name `raw_order` (and 1 more)")
                && err.contains("--name"),
            "{err}"
        );
        // Not among the tables at all, or only itself: its name.
        assert_eq!(
            unique_athena_name(&tables[..1], "raw/order").expect("alone"),
            "raw_order"
        );
        assert!(valid_athena_name("raw_order_2").is_ok());
        for bad in ["", "Raw", "raw-order", "raw order", "ü"] {
            assert!(valid_athena_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn manifest_ddl_has_exact_columns_types_and_partitions() {
        let schema = Schema::new(vec![
            Field::new("order_id", DataType::Int32, false),
            Field::new("order_owner", DataType::Utf8, false),
            Field::new(
                "timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Field::new("kafka_offset", DataType::Int64, false),
            Field::new("price", DataType::Decimal128(10, 2), true),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
                true,
            ),
            Field::new("year", DataType::Utf8, false),
            Field::new("hour", DataType::Utf8, false),
        ]);
        let parts = vec!["year".to_string(), "hour".to_string()];
        let ddl = render(
            "raw/order",
            "s3://lake/l/raw/order/",
            &schema,
            &parts,
            DdlForm::Manifest,
        )
        .expect("ddl");
        assert_eq!(
            ddl,
            "CREATE EXTERNAL TABLE `raw_order_manifest` (\n  `order_id` int,\n  `order_owner` string,\n  \
             `timestamp` timestamp,\n  `kafka_offset` bigint,\n  `price` decimal(10,2),\n  `tags` array<string>)\n\
             PARTITIONED BY (`year` string, `hour` string)\n\
             ROW FORMAT SERDE 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe'\n\
             STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'\n\
             OUTPUTFORMAT 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat'\n\
             LOCATION 's3://lake/l/raw/order/_symlink_format_manifest/';\n\
             -- partition directories are Hive-escaped (`tag=a%2Fb`; null and empty values are \
             `__HIVE_DEFAULT_PARTITION__`, read as NULL)\n\
             -- after new partitions appear (the manifests are rewritten by `lakestream manifest`):\n\
             MSCK REPAIR TABLE `raw_order_manifest`;\n"
        );
        let native = render(
            "access_logs/datalake-prod",
            "s3://lake/l/access_logs/datalake-prod/",
            &schema,
            &parts,
            DdlForm::Native,
        )
        .expect("ddl");
        assert_eq!(
            native,
            "CREATE EXTERNAL TABLE `access_logs_datalake_prod`\nLOCATION 's3://lake/l/access_logs/datalake-prod/'\nTBLPROPERTIES ('table_type' = 'DELTA');\n"
        );
        let local = render(
            "raw/order",
            "/tmp/lake/raw/order/",
            &schema,
            &parts,
            DdlForm::Native,
        )
        .expect("ddl");
        assert!(
            local.starts_with("-- /tmp/lake/raw/order/ is not on S3"),
            "{local}"
        );
        let odd = Schema::new(vec![Field::new(
            "d",
            DataType::Duration(TimeUnit::Second),
            true,
        )]);
        let err = render("t", "s3://x/t/", &odd, &[], DdlForm::Manifest).expect_err("no type");
        assert!(
            err.to_string().contains("use the native Delta form"),
            "{err}"
        );
    }
}
