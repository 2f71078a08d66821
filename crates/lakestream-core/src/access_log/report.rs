//! The access-pattern report: which datasets of the watched buckets are read most, how old the
//! data read is, and which datasets nobody read lately (candidates for cheaper storage).
//!
//! A dataset is a bucket plus the first `depth` directory segments of the key
//! (`sales/2026/11/part-1.parquet` at depth 1 is `sales`). Requests are reads
//! (`*.GET.*`, `*.HEAD.*` on objects, and a copy's read of its source: `REST.COPY.OBJECT_GET`,
//! `REST.COPY.PART_GET`), writes (`PUT`, `POST`, `DELETE`, and a copy's destination:
//! `REST.COPY.OBJECT`, `REST.COPY.PART`) or other (listing, ACLs, ...). The age of data read is
//! the request time minus a date found in the key (`2026/04/01`, `2026/04`, `date=2026-04-01`
//! or `2026-04-01` segments), else minus the first time the window shows the key written; it
//! is bucketed as new (< 7 days), recent (< 90 days), old, or unknown.
//!
//! Only the window is read (the last `since_days` days before `now`): data files whose `date`
//! partition and `time` statistics cannot hold a request of it are skipped, and of the others
//! only the seven columns used ([`super::window`]). So everything here is about the window: a
//! dataset is known when it had a request in it, and a cold candidate is one with requests
//! (writes, listings, failed reads) but no read in it.

use crate::access_log::window::read_window;
use crate::error::Result;
use crate::read::child_tables;
use crate::storage::Lake;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampMicrosecondType};
use lakestream_formats::config::{AccessLogLayout, PipelineConfig};
use std::collections::{BTreeMap, HashMap, HashSet};

/// What to report on.
#[derive(Debug, Clone, Copy)]
pub struct ReportOptions {
    /// Only requests of the last `since_days` days are read and counted; a dataset with
    /// requests but no read in that window is a cold candidate.
    pub since_days: i64,
    /// Directory segments of the key that name a dataset.
    pub depth: usize,
    /// The report's "now" (injected: tests and reproducible reports).
    pub now: DateTime<Utc>,
}

/// How old the data read was, by request count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AgeBuckets {
    /// Younger than 7 days.
    pub new: u64,
    /// 7 to 90 days.
    pub recent: u64,
    /// 90 days or older.
    pub old: u64,
    /// No date in the key and no write of the key in the logs.
    pub unknown: u64,
}

/// One dataset (or, with an empty `dataset`, one bucket).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct UsageStats {
    /// Bucket.
    pub bucket: String,
    /// Dataset (key prefix), `""` for the bucket total.
    pub dataset: String,
    /// Requests in the window.
    pub requests: u64,
    /// Object reads.
    pub reads: u64,
    /// Object writes.
    pub writes: u64,
    /// Bytes sent to clients.
    pub bytes_sent: u64,
    /// Distinct requesters.
    pub requesters: usize,
    /// Requests answered 4xx/5xx.
    pub errors: u64,
    /// `errors / requests`.
    pub error_rate: f64,
    /// Age of the data read.
    pub age: AgeBuckets,
    /// Last read in the window.
    pub last_read: Option<DateTime<Utc>>,
}

/// The report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AccessReport {
    /// Generated at.
    pub now: DateTime<Utc>,
    /// Window in days.
    pub since_days: i64,
    /// Dataset depth.
    pub depth: usize,
    /// Requests in the window.
    pub rows: u64,
    /// Per bucket, most requests first.
    pub buckets: Vec<UsageStats>,
    /// Per dataset, most reads first.
    pub datasets: Vec<UsageStats>,
    /// Datasets with requests but no read in the window (bucket, dataset, last read: `None`
    /// since the window is all that is read; kept for the JSON shape).
    pub cold: Vec<(String, String, Option<DateTime<Utc>>)>,
}

/// The columns the report uses.
const COLUMNS: &[&str] = &[
    "bucket",
    "time",
    "operation",
    "key",
    "http_status",
    "bytes_sent",
    "requester",
];

/// Read the window of every access-log table of `config` and build the report.
pub async fn access_report(
    lake: &Lake,
    config: &PipelineConfig,
    opts: ReportOptions,
) -> Result<AccessReport> {
    let prefix = &config.access_logs.table_prefix;
    let tables = match config.access_logs.layout {
        AccessLogLayout::PerBucket => child_tables(lake, prefix).await?,
        AccessLogLayout::Single => vec![prefix.clone()],
    };
    let from = opts.now - Duration::days(opts.since_days);
    let mut batches = Vec::new();
    for t in tables {
        batches.extend(read_window(lake, &t, from, opts.now, COLUMNS).await?);
    }
    build(&batches, opts)
}

#[derive(Default)]
struct Acc {
    stats: UsageStats,
    requesters: HashSet<String>,
}

impl Acc {
    fn add(&mut self, r: &Row<'_>, age: Option<i64>) {
        if r.kind == Kind::Read {
            self.stats.last_read = self.stats.last_read.max(Some(r.time));
        }
        let s = &mut self.stats;
        s.requests += 1;
        s.bytes_sent += r.bytes_sent;
        s.errors += u64::from(r.status >= 400);
        self.requesters.insert(r.requester.to_string());
        match r.kind {
            Kind::Read => {
                s.reads += 1;
                match age {
                    Some(d) if d < 7 => s.age.new += 1,
                    Some(d) if d < 90 => s.age.recent += 1,
                    Some(_) => s.age.old += 1,
                    None => s.age.unknown += 1,
                }
            }
            Kind::Write => s.writes += 1,
            Kind::Other => {}
        }
    }

    fn finish(mut self) -> UsageStats {
        self.stats.requesters = self.requesters.len();
        if self.stats.requests > 0 {
            self.stats.error_rate = self.stats.errors as f64 / self.stats.requests as f64;
        }
        self.stats
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Other,
}

struct Row<'a> {
    bucket: &'a str,
    key: Option<&'a str>,
    time: DateTime<Utc>,
    kind: Kind,
    status: i64,
    bytes_sent: u64,
    requester: &'a str,
}

/// Build the report from access-log rows (the access-log table schema); rows outside the
/// window are left out.
pub fn build(batches: &[RecordBatch], opts: ReportOptions) -> Result<AccessReport> {
    let window_start = opts.now - Duration::days(opts.since_days);
    // Casts own their arrays; rows borrow from them.
    let columns = cast_columns(batches)?;
    let rows = window_rows(&columns, window_start, opts.now);
    let (buckets, datasets) = accumulate(&rows, opts.depth);
    let finish = |((bucket, dataset), acc): ((&str, String), Acc)| {
        let mut s = acc.finish();
        s.bucket = bucket.to_string();
        s.dataset = dataset;
        s
    };
    let mut datasets: Vec<UsageStats> = datasets.into_iter().map(finish).collect();
    datasets.sort_by(|a, b| {
        (b.reads, b.requests, &a.bucket, &a.dataset)
            .cmp(&(a.reads, a.requests, &b.bucket, &b.dataset))
    });
    let mut buckets: Vec<UsageStats> = buckets
        .into_iter()
        .map(|(b, acc)| finish(((b, String::new()), acc)))
        .collect();
    buckets.sort_by(|a, b| (b.requests, &a.bucket).cmp(&(a.requests, &b.bucket)));
    let cold = datasets
        .iter()
        .filter(|d| d.reads == 0)
        .map(|d| (d.bucket.clone(), d.dataset.clone(), d.last_read))
        .collect();
    Ok(AccessReport {
        now: opts.now,
        since_days: opts.since_days,
        depth: opts.depth,
        rows: rows.len() as u64,
        buckets,
        datasets,
        cold,
    })
}

/// One cast array.
type Column = std::sync::Arc<dyn Array>;

/// One batch's columns cast to the types the report reads: bucket, time, operation (required),
/// key, http_status, bytes_sent, requester.
type Columns = (
    Column,
    Column,
    Column,
    Option<Column>,
    Option<Column>,
    Option<Column>,
    Option<Column>,
);

/// The report's columns of each batch (a batch without bucket, time or operation is skipped).
fn cast_columns(batches: &[RecordBatch]) -> Result<Vec<Columns>> {
    let mut columns = Vec::new();
    for b in batches {
        let col = |name: &str, t: &DataType| -> Result<Option<std::sync::Arc<dyn Array>>> {
            Ok(match b.column_by_name(name) {
                Some(c) => Some(cast(c, t)?),
                None => None,
            })
        };
        let ts = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let (Some(bucket), Some(time), Some(op)) = (
            col("bucket", &DataType::Utf8)?,
            col("time", &ts)?,
            col("operation", &DataType::Utf8)?,
        ) else {
            continue;
        };
        columns.push((
            bucket,
            time,
            op,
            col("key", &DataType::Utf8)?,
            col("http_status", &DataType::Int64)?,
            col("bytes_sent", &DataType::Int64)?,
            col("requester", &DataType::Utf8)?,
        ));
    }
    Ok(columns)
}

/// The requests of `columns` from `window_start` to `now` (rows without a bucket or a time
/// are left out).
fn window_rows(
    columns: &[Columns],
    window_start: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Vec<Row<'_>> {
    let mut rows = Vec::new();
    for (bucket, time, op, key, status, bytes, requester) in columns {
        let bucket = bucket.as_string::<i32>();
        let time = time.as_primitive::<TimestampMicrosecondType>();
        let op = op.as_string::<i32>();
        let key = key.as_ref().map(|k| k.as_string::<i32>());
        let status = status.as_ref().map(|s| s.as_primitive::<Int64Type>());
        let bytes = bytes.as_ref().map(|s| s.as_primitive::<Int64Type>());
        let requester = requester.as_ref().map(|s| s.as_string::<i32>());
        for i in 0..bucket.len() {
            if bucket.is_null(i) || time.is_null(i) {
                continue;
            }
            let Some(t) = DateTime::from_timestamp_micros(time.value(i)) else {
                continue;
            };
            if t < window_start || t > now {
                continue;
            }
            let operation = if op.is_null(i) { "" } else { op.value(i) };
            rows.push(Row {
                bucket: bucket.value(i),
                key: key
                    .filter(|k| k.is_valid(i))
                    .map(|k| k.value(i))
                    .filter(|k| !k.is_empty() && *k != "-"),
                time: t,
                kind: kind(operation),
                status: status.filter(|s| s.is_valid(i)).map_or(0, |s| s.value(i)),
                bytes_sent: bytes
                    .filter(|s| s.is_valid(i))
                    .map_or(0, |s| s.value(i).max(0) as u64),
                requester: requester
                    .filter(|r| r.is_valid(i))
                    .map_or("-", |r| r.value(i)),
            });
        }
    }
    rows
}

/// Requests by bucket.
type ByBucket<'a> = BTreeMap<&'a str, Acc>;
/// Requests by (bucket, dataset).
type ByDataset<'a> = BTreeMap<(&'a str, String), Acc>;

/// Per bucket and per (bucket, dataset at `depth`): the requests of `rows`, each read with
/// the age of the data it read.
fn accumulate<'a>(rows: &[Row<'a>], depth: usize) -> (ByBucket<'a>, ByDataset<'a>) {
    // First write of each key (for keys without a date in them).
    let mut first_write: HashMap<(&str, &str), DateTime<Utc>> = HashMap::new();
    for r in rows.iter().filter(|r| r.kind == Kind::Write) {
        if let Some(k) = r.key {
            let e = first_write.entry((r.bucket, k)).or_insert(r.time);
            *e = (*e).min(r.time);
        }
    }
    let mut buckets: BTreeMap<&str, Acc> = BTreeMap::new();
    let mut datasets: BTreeMap<(&str, String), Acc> = BTreeMap::new();
    for r in rows {
        let age = r.key.and_then(|k| {
            let born = date_in_key(k)
                .map(|d| d.and_time(chrono::NaiveTime::MIN).and_utc())
                .or_else(|| first_write.get(&(r.bucket, k)).copied())?;
            Some((r.time - born).num_days().max(0))
        });
        buckets.entry(r.bucket).or_default().add(r, age);
        if let Some(k) = r.key {
            datasets
                .entry((r.bucket, dataset_of(k, depth)))
                .or_default()
                .add(r, age);
        }
    }
    (buckets, datasets)
}

fn kind(operation: &str) -> Kind {
    let is = |verb: &str| operation.contains(verb);
    if (operation.ends_with(".OBJECT") && (is(".GET.") || is(".HEAD.")))
        // A copy logs a read of its source (`REST.COPY.OBJECT_GET`, `REST.COPY.PART_GET`) in the
        // source bucket's log and a write of its destination (`REST.COPY.OBJECT`) in its own.
        || (is(".COPY.") && operation.ends_with("_GET"))
    {
        Kind::Read
    } else if is(".PUT.") || is(".POST.") || is(".COPY.") || is(".DELETE.") {
        Kind::Write
    } else {
        Kind::Other
    }
}

/// The first `depth` directory segments of `key` (`(root)` for a key at the top).
pub fn dataset_of(key: &str, depth: usize) -> String {
    let dirs: Vec<&str> = key.split('/').collect();
    let dirs = &dirs[..dirs.len().saturating_sub(1)];
    if dirs.is_empty() || depth == 0 {
        return "(root)".into();
    }
    dirs[..depth.min(dirs.len())].join("/")
}

/// A date written in the key: `YYYY/MM/DD`, `YYYY/MM` (the 1st), `date=YYYY-MM-DD` or a
/// `YYYY-MM-DD` segment.
pub fn date_in_key(key: &str) -> Option<NaiveDate> {
    let segs: Vec<&str> = key.split('/').collect();
    let num = |s: &str, len: usize| {
        (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    for (i, s) in segs.iter().enumerate() {
        let value = s.split_once('=').map_or(*s, |(_, v)| v);
        if let Ok(d) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
            return Some(d);
        }
        if let (Some(y), Some(m)) = (num(s, 4), segs.get(i + 1).and_then(|m| num(m, 2))) {
            let d = segs.get(i + 2).and_then(|d| num(d, 2)).unwrap_or(1);
            if let Some(date) = NaiveDate::from_ymd_opt(y as i32, m, d)
                .or_else(|| NaiveDate::from_ymd_opt(y as i32, m, 1))
            {
                return Some(date);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datasets_dates_and_kinds() {
        assert_eq!(dataset_of("sales/2026/11/part-1.parquet", 1), "sales");
        assert_eq!(dataset_of("sales/2026/11/part-1.parquet", 2), "sales/2026");
        assert_eq!(dataset_of("sales/part-1.parquet", 3), "sales");
        assert_eq!(dataset_of("top.csv", 2), "(root)");
        let d = |y, m, dd| NaiveDate::from_ymd_opt(y, m, dd);
        assert_eq!(date_in_key("sales/2026/04/01/x.parquet"), d(2026, 4, 1));
        assert_eq!(date_in_key("sales/2026/04/x.parquet"), d(2026, 4, 1));
        assert_eq!(date_in_key("t/date=2026-04-09/x.parquet"), d(2026, 4, 9));
        assert_eq!(date_in_key("t/2026-04-09/x.parquet"), d(2026, 4, 9));
        assert_eq!(date_in_key("t/1234/x.parquet"), None);
        assert_eq!(date_in_key("t/2026/13/x.parquet"), None);
        assert_eq!(kind("REST.GET.OBJECT"), Kind::Read);
        assert_eq!(kind("REST.HEAD.OBJECT"), Kind::Read);
        assert_eq!(kind("REST.PUT.OBJECT"), Kind::Write);
        assert_eq!(kind("BATCH.DELETE.OBJECT"), Kind::Write);
        assert_eq!(kind("REST.GET.BUCKET"), Kind::Other);
        assert_eq!(kind("REST.COPY.OBJECT_GET"), Kind::Read);
        assert_eq!(kind("REST.COPY.PART_GET"), Kind::Read);
        assert_eq!(kind("REST.COPY.OBJECT"), Kind::Write);
        assert_eq!(kind("REST.COPY.PART"), Kind::Write);
    }
}
