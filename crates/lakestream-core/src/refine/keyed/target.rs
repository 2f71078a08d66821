//! The target side of the upsert (copy-on-write, no DataFusion): which live files can hold an
//! incoming key (partition values and min/max statistics of the first key column) and the key
//! and ordering columns of those files only (a projected read); the files that lose rows are
//! rewritten by [`rewrite`](super::rewrite). In a partition column an empty string and null are
//! one Delta value: both sides match keys with `""` there ([`empty_partition_values`]).

use crate::error::Result;
use crate::table::{DataFile, TableHandle};
use deltalake::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef};
use deltalake::kernel::Remove;
use std::collections::HashMap;
use std::sync::Arc;

/// A live file of the target.
#[derive(Debug, Clone)]
pub struct TargetFile {
    /// The file to read (path, size, partition values as stored in the log).
    pub(crate) file: DataFile,
    /// `min`/`max` statistics of the first key column.
    key_range: Option<(serde_json::Value, serde_json::Value)>,
    /// The remove action that retires this file.
    pub remove: Remove,
}

impl TargetFile {
    /// Partition values as stored in the log.
    pub(crate) fn partitions(&self) -> &HashMap<String, Option<String>> {
        &self.file.partitions
    }
}

/// Live files of the target at the handle's version; a target with deletion vectors is
/// refused (its files are rewritten as plain Parquet, which would bring deleted rows back).
pub fn live_files(handle: &TableHandle, first_key: &str) -> Result<Vec<TargetFile>> {
    handle.refuse_deletion_vectors()?;
    Ok(handle
        .live_files()?
        .iter()
        .map(|f| TargetFile {
            file: f.data_file(),
            key_range: f.min_max(first_key),
            remove: f.remove_action(true),
        })
        .collect())
}

/// A statistics bound of the first key column (from the JSON statistics of a file).
#[derive(Debug, Clone, PartialEq)]
enum Bound {
    Number(f64),
    Text(String),
}

impl Bound {
    fn of(v: &serde_json::Value) -> Option<Self> {
        match v {
            serde_json::Value::Number(n) => n.as_f64().map(Bound::Number),
            serde_json::Value::String(s) => Some(Bound::Text(s.clone())),
            _ => None,
        }
    }
}

/// The incoming values of the first key column, sorted, as statistics compare them.
#[derive(Debug, PartialEq)]
pub enum KeyValues {
    /// Integer and float keys (NaN excluded: then there is no `KeyValues`).
    Numbers(Vec<f64>),
    /// String keys.
    Texts(Vec<String>),
}

impl KeyValues {
    /// Whether a file whose first key column spans `lo..=hi` can hold one of the values.
    fn may_hold(&self, lo: &Bound, hi: &Bound) -> bool {
        match (self, lo, hi) {
            (KeyValues::Numbers(v), Bound::Number(lo), Bound::Number(hi)) => {
                let i = v.partition_point(|k| k < lo);
                v.get(i).is_some_and(|k| k <= hi)
            }
            (KeyValues::Texts(v), Bound::Text(lo), Bound::Text(hi)) => {
                // Long strings may be truncated in statistics: only trust short maxima.
                let hi_trusted = hi.chars().count() < 32;
                let i = v.partition_point(|k| k.as_str() < lo.as_str());
                v.get(i)
                    .is_some_and(|k| !hi_trusted || k.as_str() <= hi.as_str())
            }
            _ => true,
        }
    }
}

/// The values of the first key column as statistics compare them: numbers and text; `None`
/// for other types (dates, timestamps, ...), whose files are then not pruned by statistics.
pub fn key_values(column: &ArrayRef) -> Result<Option<KeyValues>> {
    let t = column.data_type();
    if t.is_numeric() {
        let f = cast(column, &DataType::Float64)?;
        let mut v: Vec<f64> = f.as_primitive::<Float64Type>().iter().flatten().collect();
        if v.iter().any(|x| x.is_nan()) {
            return Ok(None);
        }
        v.sort_by(f64::total_cmp);
        Ok(Some(KeyValues::Numbers(v)))
    } else if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
        let text = cast(column, &DataType::Utf8)?;
        let mut v: Vec<String> = text
            .as_string::<i32>()
            .iter()
            .flatten()
            .map(str::to_string)
            .collect();
        v.sort_unstable();
        Ok(Some(KeyValues::Texts(v)))
    } else {
        Ok(None)
    }
}

/// The files that can hold one of the incoming keys (`first`: the values of the first key
/// column), pruned by its partition value or its min/max statistics.
pub fn candidates<'a>(
    files: &'a [TargetFile],
    first_key: &str,
    first: &ArrayRef,
) -> Result<Vec<&'a TargetFile>> {
    let by_partition = files.iter().any(|f| f.partitions().contains_key(first_key));
    let keys_text: std::collections::HashSet<String> = if by_partition {
        let text = cast(first, &DataType::Utf8)?;
        text.as_string::<i32>()
            .iter()
            .flatten()
            .map(str::to_string)
            .collect()
    } else {
        Default::default()
    };
    let keys = key_values(first)?;
    Ok(files
        .iter()
        .filter(|f| {
            if let Some(Some(v)) = f.partitions().get(first_key) {
                return keys_text.contains(v);
            }
            let (Some(keys), Some((lo, hi))) = (&keys, &f.key_range) else {
                return true;
            };
            let (Some(lo), Some(hi)) = (Bound::of(lo), Bound::of(hi)) else {
                return true;
            };
            keys.may_hold(&lo, &hi)
        })
        .collect())
}

/// Whether `t` is a string type (the only partition type where `""` and null meet).
fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// `batch` with null replaced by `""` in its string `partition_columns`. Delta stores an empty
/// string partition value as null (and other writers write null as `__HIVE_DEFAULT_PARTITION__`),
/// so in a partition column the two are one value: keys are matched, and rows written, as `""`.
pub fn empty_partition_values(
    batch: &RecordBatch,
    partition_columns: &[String],
) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    let mut changed = false;
    for (i, f) in schema.fields().iter().enumerate() {
        if !partition_columns.contains(f.name())
            || !is_text(f.data_type())
            || columns[i].null_count() == 0
        {
            continue;
        }
        let text = cast(&columns[i], &DataType::Utf8)?;
        let filled: StringArray = text
            .as_string::<i32>()
            .iter()
            .map(|v| Some(v.unwrap_or_default()))
            .collect();
        columns[i] = cast(&(Arc::new(filled) as ArrayRef), f.data_type())?;
        changed = true;
    }
    if !changed {
        return Ok(batch.clone());
    }
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// `schema` with its `partition_columns` nullable: an empty string partition value is null to
/// Delta readers (and to delta-rs when it commits), so a non-nullable one cannot be committed.
pub fn nullable_partitions(schema: &SchemaRef, partition_columns: &[String]) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let f = f.as_ref().clone();
            if partition_columns.contains(f.name()) {
                f.with_nullable(true)
            } else {
                f
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The `columns` of one file of `output` (partition values restored), in `schema`'s types
/// (one projected read: ranged GETs of those columns only).
pub async fn read_columns(
    output: &TableHandle,
    f: &TargetFile,
    schema: &SchemaRef,
    columns: &[String],
) -> Result<RecordBatch> {
    let projected: SchemaRef = Arc::new(Schema::new(
        columns
            .iter()
            .filter_map(|c| schema.field_with_name(c).ok().cloned())
            .collect::<Vec<_>>(),
    ));
    // A null string partition value is "" (see `empty_partition_values`): as the incoming keys.
    let partitions: HashMap<String, Option<String>> = f
        .partitions()
        .iter()
        .map(|(k, v)| {
            let text = schema
                .field_with_name(k)
                .is_ok_and(|f| is_text(f.data_type()));
            let v = if text {
                Some(v.clone().unwrap_or_default())
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    let file = DataFile {
        partitions,
        ..f.file.clone()
    };
    let batches = output.read_columns(&file, &projected).await?;
    Ok(deltalake::arrow::compute::concat_batches(
        &projected, &batches,
    )?)
}

/// Every row of one file of `output` in `schema` (for tie-breaks; rare).
pub async fn read_all(
    output: &TableHandle,
    f: &TargetFile,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    read_columns(output, f, schema, &names).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use serde_json::json;

    fn file(name: &str, lo: serde_json::Value, hi: serde_json::Value) -> TargetFile {
        TargetFile {
            file: DataFile {
                path: deltalake::Path::from(name),
                size: None,
                partitions: HashMap::new(),
            },
            key_range: Some((lo, hi)),
            remove: Remove::default(),
        }
    }

    fn names(files: Vec<&TargetFile>) -> Vec<String> {
        files.iter().map(|f| f.file.path.to_string()).collect()
    }

    #[test]
    fn null_and_empty_are_one_partition_value() -> Result<()> {
        let batch = RecordBatch::try_from_iter([
            (
                "region",
                Arc::new(StringArray::from(vec![Some(""), None, Some("eu")])) as ArrayRef,
            ),
            (
                "v",
                Arc::new(StringArray::from(vec![None, Some("x"), None])) as ArrayRef,
            ),
        ])?;
        let out = empty_partition_values(&batch, &["region".to_string()])?;
        let region: Vec<Option<&str>> = out.column(0).as_string::<i32>().iter().collect();
        assert_eq!(region, [Some(""), Some(""), Some("eu")]);
        assert_eq!(out.column(1).null_count(), 2, "other columns untouched");
        let strict = Arc::new(Schema::new(vec![Field::new(
            "region",
            DataType::Utf8,
            false,
        )]));
        let relaxed = nullable_partitions(&strict, &["region".to_string()]);
        assert!(relaxed.field(0).is_nullable());
        Ok(())
    }

    #[test]
    fn numeric_and_text_keys_prune_by_statistics() -> Result<()> {
        let files = [
            file("a", json!(0), json!(99)),
            file("b", json!(100), json!(199)),
            file("c", json!(200), json!(299)),
        ];
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![150, 250, 1000]));
        assert_eq!(names(candidates(&files, "id", &keys)?), ["b", "c"]);

        let files = [
            file("a", json!("a-000"), json!("a-999")),
            file("b", json!("b-000"), json!("b-999")),
        ];
        let keys: ArrayRef = Arc::new(StringArray::from(vec!["b-123"]));
        assert_eq!(names(candidates(&files, "id", &keys)?), ["b"]);
        Ok(())
    }

    #[test]
    fn other_key_types_and_partitioned_keys_are_not_pruned_by_statistics() -> Result<()> {
        // Timestamp statistics are text in another format than a cast would give: no pruning.
        let files = [file(
            "a",
            json!("2026-01-01T00:00:00.000Z"),
            json!("2026-01-01T00:00:00.000Z"),
        )];
        let keys: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![1_900_000_000_000_000]).with_timezone("UTC"),
        );
        assert_eq!(key_values(&keys)?, None);
        assert_eq!(names(candidates(&files, "id", &keys)?), ["a"]);

        let mut by_key = file("p", json!(0), json!(0));
        by_key.file.partitions.insert("id".into(), Some("7".into()));
        let files = [by_key];
        let seven: ArrayRef = Arc::new(Int64Array::from(vec![7]));
        let eight: ArrayRef = Arc::new(Int64Array::from(vec![8]));
        assert_eq!(names(candidates(&files, "id", &seven)?), ["p"]);
        assert!(candidates(&files, "id", &eight)?.is_empty());
        Ok(())
    }
}
