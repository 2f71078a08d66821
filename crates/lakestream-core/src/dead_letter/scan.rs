//! Reading the dead-letter table back, bounded. The table grows with every bad record and
//! every late row, so nothing here loads it whole: files are pruned by their statistics,
//! only the columns asked for are fetched (ranged GETs of their column chunks, never
//! `raw_base64` unless needed), and rows are filtered batch by batch as they stream in.
//! Memory is one record batch plus what the caller keeps.
//!
//! Two readers: which Kafka offsets are already dead-lettered (idempotency below a
//! partition's watermark, [`kafka_letters_present`]) and the rows a refine job found late
//! ([`late_rows`]).

use super::letter::delta_row_uri_prefix;
use crate::error::Result;
use crate::read::{FileStats, scan_live_files};
use crate::table::TableHandle;
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int32Type, Int64Type};
use std::collections::HashSet;

/// A Kafka dead letter's identity: (topic, partition, offset).
pub type KafkaLetter = (String, i32, i64);

/// Statistics of one file (`minValues`, `maxValues`, `nullCount`, `numRecords`).
type Stats = FileStats;

/// Stream `columns` of every live file of `handle` that `keep` does not rule out by its
/// statistics, handing each batch to `each`.
async fn scan(
    handle: &TableHandle,
    columns: &[&str],
    keep: impl Fn(&Stats) -> bool,
    mut each: impl FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    scan_live_files(
        handle,
        columns,
        |_, stats| keep(stats),
        |batch, _| each(batch),
    )
    .await
}

/// `name` of `stats` under `kind` (`minValues`, `maxValues`).
fn stat<'a>(stats: &'a Stats, kind: &str, name: &str) -> Option<&'a serde_json::Value> {
    stats.as_ref()?.get(kind)?.get(name)
}

/// Whether a file's statistics allow a value of integer column `name` in `lo..=hi`.
fn may_hold_int(stats: &Stats, name: &str, lo: i64, hi: i64) -> bool {
    match (
        stat(stats, "minValues", name).and_then(|v| v.as_i64()),
        stat(stats, "maxValues", name).and_then(|v| v.as_i64()),
    ) {
        (Some(min), Some(max)) => min <= hi && lo <= max,
        _ => true,
    }
}

/// Whether a file's statistics allow string column `name` to equal `value`. Long strings may
/// be truncated in statistics: only a short maximum is trusted.
fn may_hold_text(stats: &Stats, name: &str, value: &str) -> bool {
    let all_null = match (
        stats
            .as_ref()
            .and_then(|s| s.get("nullCount")?.get(name)?.as_i64()),
        stats.as_ref().and_then(|s| s.get("numRecords")?.as_i64()),
    ) {
        (Some(nulls), Some(rows)) => nulls >= rows,
        _ => false,
    };
    if all_null {
        return false;
    }
    let min = stat(stats, "minValues", name).and_then(|v| v.as_str());
    let max = stat(stats, "maxValues", name)
        .and_then(|v| v.as_str())
        .filter(|m| m.chars().count() < 32);
    min.is_none_or(|m| m <= value) && max.is_none_or(|m| value <= m)
}

/// A string column of `batch` (cast when stored as another string type).
fn text(batch: &RecordBatch, name: &str) -> Result<Option<deltalake::arrow::array::StringArray>> {
    let Some(c) = batch.column_by_name(name) else {
        return Ok(None);
    };
    Ok(Some(cast(c, &DataType::Utf8)?.as_string::<i32>().clone()))
}

/// Which of `wanted` are rows of the dead-letter table behind `handle` (loaded at the version
/// to check). Only files whose `partition` and `offset` statistics can hold one are read, and
/// only their `topic`, `partition` and `offset` columns.
pub async fn kafka_letters_present(
    handle: &TableHandle,
    wanted: &HashSet<KafkaLetter>,
) -> Result<HashSet<KafkaLetter>> {
    let mut found = HashSet::new();
    if wanted.is_empty() {
        return Ok(found);
    }
    let (lo, hi) = wanted.iter().fold((i64::MAX, i64::MIN), |(lo, hi), w| {
        (lo.min(w.2), hi.max(w.2))
    });
    let parts: HashSet<i32> = wanted.iter().map(|w| w.1).collect();
    let (plo, phi) = (
        parts.iter().copied().min().unwrap_or(0),
        parts.iter().copied().max().unwrap_or(0),
    );
    let keep = |s: &Stats| {
        may_hold_int(s, "offset", lo, hi) && may_hold_int(s, "partition", plo.into(), phi.into())
    };
    scan(handle, &["topic", "partition", "offset"], keep, |batch| {
        let (Some(topic), Some(p), Some(o)) = (
            text(batch, "topic")?,
            batch.column_by_name("partition"),
            batch.column_by_name("offset"),
        ) else {
            return Ok(());
        };
        let p = cast(p, &DataType::Int32)?;
        let o = cast(o, &DataType::Int64)?;
        let (p, o) = (p.as_primitive::<Int32Type>(), o.as_primitive::<Int64Type>());
        for i in 0..batch.num_rows() {
            if topic.is_null(i) || p.is_null(i) || o.is_null(i) {
                continue;
            }
            let key = (topic.value(i).to_string(), p.value(i), o.value(i));
            if wanted.contains(&key) {
                found.insert(key);
            }
        }
        Ok(())
    })
    .await?;
    Ok(found)
}

/// The raw rows (decoded `raw_base64`) of the late (or beyond the future cap) letters that the
/// job writing `output` recorded for source `table` (`object_uri` = `delta:<table>@<version>`,
/// error `late...` or `future...`).
/// Files whose `target_table` statistics cannot hold `output` are skipped; `raw_base64` is
/// fetched only from the others, and only matching rows are kept.
pub async fn late_rows(
    handle: &TableHandle,
    output: &str,
    table: &str,
    mut each: impl FnMut(&[u8]),
) -> Result<()> {
    use base64::Engine as _;
    let prefix = delta_row_uri_prefix(table);
    let keep = |s: &Stats| may_hold_text(s, "target_table", output);
    let columns = ["object_uri", "raw_base64", "error", "target_table"];
    scan(handle, &columns, keep, |batch| {
        let (Some(uri), Some(raw), Some(error), Some(target)) = (
            text(batch, "object_uri")?,
            text(batch, "raw_base64")?,
            text(batch, "error")?,
            text(batch, "target_table")?,
        ) else {
            return Ok(());
        };
        for i in 0..batch.num_rows() {
            let matches = target.is_valid(i)
                && target.value(i) == output
                && error.is_valid(i)
                && (error.value(i).starts_with("late") || error.value(i).starts_with("future"))
                && uri.is_valid(i)
                && uri.value(i).starts_with(&prefix)
                && raw.is_valid(i);
            if !matches {
                continue;
            }
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(raw.value(i)) {
                each(&bytes);
            }
        }
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_rule_out_only_files_that_cannot_hold_the_value() {
        let s: Stats = serde_json::from_str(
            r#"{"numRecords":4,"minValues":{"offset":10,"target_table":"curated/order"},
                "maxValues":{"offset":20,"target_table":"raw/order"},
                "nullCount":{"offset":0,"target_table":0,"object_uri":4}}"#,
        )
        .ok();
        assert!(may_hold_int(&s, "offset", 20, 30));
        assert!(!may_hold_int(&s, "offset", 21, 30));
        assert!(!may_hold_int(&s, "offset", 0, 9));
        assert!(
            may_hold_int(&None, "offset", 0, 1),
            "no statistics: read it"
        );
        assert!(may_hold_text(&s, "target_table", "curated/order"));
        assert!(may_hold_text(&s, "target_table", "raw/member"));
        assert!(!may_hold_text(&s, "target_table", "silver/x"));
        assert!(!may_hold_text(&s, "target_table", "access_logs/b"));
        assert!(!may_hold_text(&s, "object_uri", "delta:x@1"), "all null");
        assert!(may_hold_text(&None, "target_table", "x"));
    }
}
