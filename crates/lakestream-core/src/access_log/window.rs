//! Reading an access-log table for a time window, bounded: a data file is read only when its
//! `date` partition (the UTC date of `time`, both layouts) and its `time` statistics allow a
//! request in the window, and only the columns asked for are fetched (ranged GETs of their
//! column chunks). `report access --since N` reads the files of the last N days, not the
//! table's whole history.

use crate::access_log::arrow::DATE;
use crate::error::Result;
use crate::read::{FileStats, PartitionValues, scan_live_files, with_partitions};
use crate::storage::Lake;
use crate::table::TableHandle;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::Schema;
use std::sync::Arc;

/// The request-time column.
const TIME: &str = "time";

/// Statistics are cut to milliseconds (a maximum may be below the true one): files within this
/// much of the window are read.
const SLACK: Duration = Duration::seconds(1);

/// The rows of `table`'s files that may hold a request in `from..=to`, with `columns` only
/// (partition columns restored, columns a file lacks null). Rows outside the window may be
/// among them (a file is read whole): the caller filters by `time`.
pub async fn read_window(
    lake: &Lake,
    table: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    columns: &[&str],
) -> Result<Vec<RecordBatch>> {
    let h = TableHandle::open_existing(lake, table).await?;
    let full = h.arrow_schema()?;
    let schema = Arc::new(Schema::new(
        full.fields()
            .iter()
            .filter(|f| columns.contains(&f.name().as_str()))
            .cloned()
            .collect::<Vec<_>>(),
    ));
    let mut out = Vec::new();
    scan_live_files(
        &h,
        columns,
        |partitions, stats| date_may_hold(partitions, from, to) && time_may_hold(stats, from, to),
        |batch, partitions| {
            out.push(with_partitions(&schema, batch, partitions)?);
            Ok(())
        },
    )
    .await?;
    Ok(out)
}

/// Whether a file's `date` partition is a day of the window (a file without one may hold
/// anything).
fn date_may_hold(partitions: &PartitionValues, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
    match partitions
        .get(DATE)
        .cloned()
        .flatten()
        .and_then(|d| NaiveDate::parse_from_str(&d, "%Y-%m-%d").ok())
    {
        Some(day) => from.date_naive() <= day && day <= to.date_naive(),
        None => true,
    }
}

/// Whether a file's `time` statistics (`minValues`/`maxValues`, RFC 3339) overlap the window
/// (no statistics: it may).
fn time_may_hold(stats: &FileStats, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
    let Some(stats) = stats else {
        return true;
    };
    let at = |kind: &str| {
        let text = stats.get(kind)?.get(TIME)?.as_str()?;
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let below = at("maxValues").is_some_and(|max| max + SLACK < from);
    let above = at("minValues").is_some_and(|min| min - SLACK > to);
    !(below || above)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::collections::HashMap;

    #[test]
    fn files_outside_the_window_are_ruled_out() {
        let t = |d, h| Utc.with_ymd_and_hms(2026, 11, d, h, 0, 0).unwrap();
        let (from, to) = (t(27, 12), t(30, 12));
        let date = |d: &str| HashMap::from([(DATE.to_string(), Some(d.to_string()))]);
        assert!(!date_may_hold(&date("2026-11-26"), from, to));
        assert!(date_may_hold(&date("2026-11-27"), from, to));
        assert!(date_may_hold(&date("2026-11-30"), from, to));
        assert!(!date_may_hold(&date("2026-12-01"), from, to));
        assert!(date_may_hold(&HashMap::new(), from, to), "no partition");
        let stats = |min: &str, max: &str| {
            serde_json::from_str(&format!(
                r#"{{"numRecords":2,"minValues":{{"time":"{min}"}},"maxValues":{{"time":"{max}"}}}}"#
            ))
            .ok()
        };
        assert!(!time_may_hold(
            &stats("2026-11-27T08:00:00.000Z", "2026-11-27T11:00:00.000Z"),
            from,
            to
        ));
        assert!(time_may_hold(
            &stats("2026-11-27T08:00:00.000Z", "2026-11-27T11:59:59.999Z"),
            from,
            to
        ));
        assert!(!time_may_hold(
            &stats("2026-11-30T12:00:02.000Z", "2026-11-30T13:00:00.000Z"),
            from,
            to
        ));
        assert!(time_may_hold(&None, from, to));
    }
}
