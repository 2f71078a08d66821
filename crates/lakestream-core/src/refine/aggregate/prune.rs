//! Which files can hold rows of given groups: the source's files when groups are recomputed
//! (partition values of plain group columns, min/max statistics of plain columns and of the
//! timestamp under `date(col)`), and the output's files holding touched groups (its partition
//! values, which are group columns).
//!
//! Partition values are compared as text only for types whose text Delta writers and arrow agree
//! on (strings, integers, dates, booleans); a timestamp or float partition value (`2026-12-01
//! 10:00:00.000000` vs arrow's `2026-12-01T10:00:00Z`, `1` vs `1.0`) never rules a file out.
//! Nor do `""` (null and `""` are one group in a string partition column, and statistics ignore
//! nulls), NaN, or statistics that cannot be read.

use super::groups::Evaluator;
use crate::error::Result;
use crate::table::PartitionValues;
use deltalake::arrow::array::{Array, ArrayRef, AsArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::DataType;
use lakestream_formats::refine::aggregate::GroupExpr;

/// A file's statistics as the log records them (`LiveFile::stats`), if any and valid.
type FileStats = Option<serde_json::Value>;

/// One group column's value as files are compared with it.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    /// Any file may hold it (null, `hour(..)`, a type statistics do not order).
    Any,
    /// A number.
    Number(f64),
    /// Text.
    Text(String),
    /// A UTC date `YYYY-MM-DD` of a `date(col)` group.
    Day(String),
}

/// The groups to find, one row of values per group.
pub(crate) struct Wanted {
    /// Per group column: the source column and whether it is a source partition column.
    columns: Vec<(String, bool, bool)>,
    /// Per group: per group column, the value (and its partition text).
    groups: Vec<Vec<(Value, Option<String>)>>,
}

fn values(a: &ArrayRef, expr: &GroupExpr) -> Result<Vec<(Value, Option<String>)>> {
    let text = cast(a, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let nums = match a.data_type() {
        t if t.is_numeric() => Some(cast(a, &DataType::Float64)?),
        _ => None,
    };
    let mut out = Vec::with_capacity(a.len());
    for i in 0..a.len() {
        let t = text.is_valid(i).then(|| text.value(i).to_string());
        let v = match (expr, &t, &nums) {
            (_, None, _) | (GroupExpr::Hour(_), _, _) => Value::Any,
            (GroupExpr::Date(_), Some(d), _) => Value::Day(d.clone()),
            (GroupExpr::Column(_), Some(_), Some(n)) => {
                let x = n
                    .as_primitive::<deltalake::arrow::datatypes::Float64Type>()
                    .value(i);
                if x.is_nan() {
                    Value::Any
                } else {
                    Value::Number(x)
                }
            }
            (GroupExpr::Column(_), Some(s), None)
                if a.data_type() == &DataType::Utf8 && !s.is_empty() =>
            {
                Value::Text(s.clone())
            }
            _ => Value::Any,
        };
        out.push((v, t));
    }
    Ok(out)
}

impl Wanted {
    /// The groups `keys` of `ev`; `partitioned(column)` says whether a source column is a
    /// partition column of the table searched, `output` that the table is the output (its
    /// columns are the group columns' names).
    pub fn new(
        ev: &Evaluator,
        names: &[String],
        keys: &[Vec<u8>],
        partitioned: impl Fn(&str) -> bool,
        output: bool,
    ) -> Result<Self> {
        let arrays = ev.key_arrays(keys)?;
        let mut per_column = Vec::new();
        let mut columns = Vec::new();
        for ((a, e), name) in arrays.iter().zip(ev.exprs()).zip(names) {
            let column = if output {
                name.clone()
            } else {
                e.column().to_string()
            };
            let is_part = partitioned(&column)
                && (output || matches!(e, GroupExpr::Column(_)))
                && text_agrees(a.data_type());
            columns.push((column, is_part, output));
            per_column.push(values(a, e)?);
        }
        let groups = (0..keys.len())
            .map(|g| per_column.iter().map(|c| c[g].clone()).collect())
            .collect();
        Ok(Self { columns, groups })
    }

    /// Can a file with these partition values and statistics hold a row of a wanted group?
    pub fn may_hold(&self, partitions: &PartitionValues, stats: &FileStats) -> bool {
        self.groups.iter().any(|g| {
            g.iter()
                .zip(&self.columns)
                .all(|((v, text), (col, is_part, output))| {
                    if *is_part {
                        let stored = partitions.get(col).cloned().flatten();
                        // "" and null are one partition value.
                        return stored.unwrap_or_default() == text.clone().unwrap_or_default();
                    }
                    if *output {
                        return true;
                    }
                    in_range(v, col, stats)
                })
        })
    }
}

/// Do Delta writers write partition values of this type as arrow casts it to text?
fn text_agrees(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Boolean
    )
}

/// The UTC date of a timestamp statistic: RFC 3339 with an offset (converted), or a naive
/// `YYYY-MM-DDTHH:MM:SS...` (a UTC or timestamp_ntz value, as delta-rs writes them).
fn utc_day(stat: &str) -> Option<String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(stat) {
        return Some(t.with_timezone(&chrono::Utc).format("%Y-%m-%d").to_string());
    }
    let day = stat.get(..10)?;
    let rest = stat.get(10..).unwrap_or_default();
    // A naive value: no offset after the time.
    let naive = !rest.contains('+') && !rest[rest.find(':').unwrap_or(0)..].contains('-');
    (naive && chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").is_ok()).then(|| day.to_string())
}

/// May a file whose statistics are `stats` hold `v` in column `col`?
fn in_range(v: &Value, col: &str, stats: &FileStats) -> bool {
    let bound = |kind: &str| stats.as_ref()?.get(kind)?.get(col).cloned();
    let (Some(lo), Some(hi)) = (bound("minValues"), bound("maxValues")) else {
        return true;
    };
    match (v, &lo, &hi) {
        (Value::Any, _, _) => true,
        (Value::Number(x), serde_json::Value::Number(lo), serde_json::Value::Number(hi)) => {
            match (lo.as_f64(), hi.as_f64()) {
                (Some(lo), Some(hi)) => lo <= *x && *x <= hi,
                _ => true,
            }
        }
        (Value::Text(s), serde_json::Value::String(lo), serde_json::Value::String(hi)) => {
            // Long strings may be truncated in statistics: only trust short maxima.
            lo.as_str() <= s.as_str() && (hi.chars().count() >= 32 || s.as_str() <= hi.as_str())
        }
        (Value::Day(d), serde_json::Value::String(lo), serde_json::Value::String(hi)) => {
            match (utc_day(lo), utc_day(hi)) {
                (Some(lo), Some(hi)) => lo.as_str() <= d.as_str() && d.as_str() <= hi.as_str(),
                _ => true,
            }
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn statistics_rule_files_out() {
        let stats = Some(json!({
            "minValues": {"ts": "2026-11-30T23:10:00.000Z", "v": 3, "s": "b"},
            "maxValues": {"ts": "2026-12-01T01:00:00.000Z", "v": 9, "s": "d"}
        }));
        assert!(in_range(&Value::Day("2026-12-01".into()), "ts", &stats));
        assert!(in_range(&Value::Day("2026-11-30".into()), "ts", &stats));
        assert!(!in_range(&Value::Day("2026-12-02".into()), "ts", &stats));
        assert!(in_range(&Value::Number(3.0), "v", &stats));
        assert!(!in_range(&Value::Number(10.0), "v", &stats));
        assert!(!in_range(&Value::Text("a".into()), "s", &stats));
        assert!(in_range(&Value::Text("c".into()), "s", &stats));
        assert!(in_range(&Value::Number(100.0), "other", &stats));
        assert!(in_range(&Value::Any, "v", &stats));
        // Statistics with an offset (Spark writes the session zone) are converted to UTC.
        let offset = Some(json!({
            "minValues": {"ts": "2026-12-01T19:00:00.000-08:00"},
            "maxValues": {"ts": "2026-12-01T20:00:00.000-08:00"}
        }));
        assert!(in_range(&Value::Day("2026-12-02".into()), "ts", &offset));
        assert!(!in_range(&Value::Day("2026-12-01".into()), "ts", &offset));
        assert_eq!(
            utc_day("2026-12-01T10:00:00.000").as_deref(),
            Some("2026-12-01")
        );
        assert_eq!(utc_day("garbage"), None);
    }

    #[test]
    fn only_agreeing_partition_types_are_compared_as_text() {
        assert!(text_agrees(&DataType::Utf8) && text_agrees(&DataType::Date32));
        assert!(!text_agrees(&DataType::Float64));
        assert!(!text_agrees(&DataType::Timestamp(
            deltalake::arrow::datatypes::TimeUnit::Microsecond,
            Some("UTC".into())
        )));
    }
}
