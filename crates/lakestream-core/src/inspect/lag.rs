//! How far behind each job is, from what the tables themselves record (nothing else is asked):
//! - **Kafka**: per topic and partition, the offset committed in the table (`txn`
//!   `<pipeline>/<topic>/<partition>`; compare with the topic's end offsets in Kafka), and when
//!   the table last committed; a CDC family's Debezium topics from their bronze tables;
//! - **refine**: per job and source, the source version the output consumed (its `txn`) against
//!   the source's latest version, since when the job has versions to read, and until when
//!   maintenance keeps them for it (the source's log retention; see
//!   [`readers`](crate::maintenance::readers)): a job still behind then must skip ahead and
//!   re-read;
//! - **access logs**: per table, the log objects committed in the last 24 hours (one `txn` per
//!   object), and the newest request time in the table (file statistics of `time`).

use crate::error::{Error, Result};
use crate::maintenance::readers;
use crate::read::child_tables;
use crate::storage::Lake;
use crate::table::TableHandle;
use chrono::{DateTime, Duration, Utc};
use lakestream_formats::config::{AccessLogLayout, PipelineConfig, bronze};
use std::collections::BTreeMap;

/// One Kafka topic's table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KafkaLag {
    /// Topic.
    pub topic: String,
    /// Its table.
    pub table: String,
    /// Committed offset per partition (the highest offset the table holds for it).
    pub partitions: BTreeMap<i32, i64>,
    /// The table's latest version and its commit time (`None`: not created yet).
    pub latest: Option<(u64, Option<DateTime<Utc>>)>,
}

/// One source of one refine job.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RefineLag {
    /// Job name.
    pub job: String,
    /// Output table.
    pub output: String,
    /// Source table.
    pub source: String,
    /// Source version the output consumed (`None`: nothing yet).
    pub consumed: Option<u64>,
    /// Source's latest version (`None`: the source does not exist yet).
    pub latest: Option<u64>,
    /// Versions still to read.
    pub behind: u64,
    /// Commit time of the first version not read yet (`None`: caught up, or not recorded).
    pub unread_since: Option<DateTime<Utc>>,
    /// How far behind the job may fall: the source's `delta.logRetentionDuration`, in hours.
    /// Vacuum and log cleanup keep what the job needs until then.
    pub max_lag_hours: Option<i64>,
    /// When the first unread version stops being kept (`unread_since + max_lag_hours`): a job
    /// still behind then loses those versions and must skip ahead and re-read.
    pub must_read_by: Option<DateTime<Utc>>,
    /// The job is already further behind than that (or its next commit is gone).
    pub too_far_behind: bool,
    /// A CDC bronze source: its keys (`lakestream.cdc.keys`) and where they came from
    /// (`lakestream.cdc.keys_from`: `config`, `key-schema`, `key-payload`; `None` for a table
    /// created before it was recorded). Keys not from the config were fixed by the first
    /// record that landed: data, which an operator may want to declare.
    pub keys: Option<(String, Option<String>)>,
}

/// One access-log table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AccessLogLag {
    /// Table.
    pub table: String,
    /// Log objects committed in the 24 hours before `now`.
    pub objects_last_24h: usize,
    /// Newest request time in the table.
    pub newest_log_time: Option<DateTime<Utc>>,
    /// Time of the table's latest commit.
    pub last_commit: Option<DateTime<Utc>>,
}

/// The whole lake's lag.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Lag {
    /// Kafka topics.
    pub kafka: Vec<KafkaLag>,
    /// Refine jobs.
    pub refine: Vec<RefineLag>,
    /// Access-log tables.
    pub access_logs: Vec<AccessLogLag>,
}

/// The Debezium topics of the `[[cdc]]` families, from their bronze tables (found by the
/// apply jobs' listing): the `txn`s `<pipeline>/<topic>/<partition>` whose topic a family
/// matches.
async fn debezium_bronze(
    lake: &Lake,
    config: &PipelineConfig,
    jobs: &[lakestream_formats::refine::RefineJob],
) -> Result<Vec<KafkaLag>> {
    let mut out = Vec::new();
    for job in jobs {
        let lakestream_formats::refine::JobKind::Cdc(apply) = &job.kind else {
            continue;
        };
        // Debezium families only (a DMS bronze's `txn`s are per object, not per partition).
        let debezium = config.cdc.iter().any(|f| {
            Some(&f.family) == apply.family.as_ref()
                && f.source == lakestream_formats::config::CdcSource::Debezium
        });
        if !debezium {
            continue;
        }
        let mut h = TableHandle::open(lake, &apply.source)?;
        if !h.refresh().await? {
            continue;
        }
        let txns = h.all_txns().await?.unwrap_or_default();
        let prefix = format!("{}/", config.pipeline);
        let mut topics: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
        for (app, v) in txns {
            let Some((topic, p)) = app.strip_prefix(&prefix).and_then(|a| a.rsplit_once('/'))
            else {
                continue;
            };
            if let (Ok(p), Some(_)) = (p.parse(), config.cdc_topic(topic)) {
                topics.entry(topic.to_string()).or_default().insert(p, v);
            }
        }
        let latest = h.version().unwrap_or(0);
        let latest = Some((latest, commit_time(&h, latest).await?));
        out.extend(topics.into_iter().map(|(topic, partitions)| KafkaLag {
            topic,
            table: apply.source.clone(),
            partitions,
            latest,
        }));
    }
    Ok(out)
}

/// The lag of every job `config` describes, as of `now`.
pub async fn lag(lake: &Lake, config: &PipelineConfig, now: DateTime<Utc>) -> Result<Lag> {
    let mut kafka = kafka_topics(lake, config).await?;
    let jobs = crate::refine::cdc::family::all_jobs(lake, config).await?;
    kafka.extend(debezium_bronze(lake, config, &jobs).await?);
    Ok(Lag {
        kafka,
        refine: refine_jobs(lake, config, &jobs, now).await?,
        access_logs: access_log_tables(lake, config, now).await?,
    })
}

/// The configured topics' tables: each partition's committed offset and the latest commit.
async fn kafka_topics(lake: &Lake, config: &PipelineConfig) -> Result<Vec<KafkaLag>> {
    let mut out = Vec::new();
    for t in &config.topics {
        let mut h = TableHandle::open(lake, &t.table)?;
        let mut row = KafkaLag {
            topic: t.topic.clone(),
            table: t.table.clone(),
            partitions: BTreeMap::new(),
            latest: None,
        };
        if h.refresh().await? {
            let prefix = format!("{}/{}/", config.pipeline, t.topic);
            let txns = h
                .all_txns()
                .await?
                .ok_or_else(|| Error::VersionUnavailable {
                    table: t.table.clone(),
                    reason: "its `txn`s could not be read in one pass (checkpoint format)".into(),
                })?;
            for (app, v) in txns {
                if let Some(p) = app.strip_prefix(&prefix).and_then(|p| p.parse().ok()) {
                    row.partitions.insert(p, v);
                }
            }
            let latest = h.version().unwrap_or(0);
            row.latest = Some((latest, commit_time(&h, latest).await?));
        }
        out.push(row);
    }
    Ok(out)
}

/// Configured jobs and every `[[cdc]]` family table's apply job (`jobs`): per source, what the
/// output consumed against the source's latest version, and until when it is kept for.
async fn refine_jobs(
    lake: &Lake,
    config: &PipelineConfig,
    jobs: &[lakestream_formats::refine::RefineJob],
    now: DateTime<Utc>,
) -> Result<Vec<RefineLag>> {
    let mut out = Vec::new();
    for job in jobs {
        let cdc = matches!(job.kind, lakestream_formats::refine::JobKind::Cdc(_));
        let mut output = TableHandle::open(lake, &job.output)?;
        let exists = output.refresh().await?;
        for source in job.sources() {
            let consumed =
                readers::consumed_version(&mut output, exists, config, &job.job, source).await?;
            let mut src = TableHandle::open(lake, source)?;
            let (mut unread_since, mut max_lag_hours, mut must_read_by) = (None, None, None);
            let (mut too_far_behind, mut keys) = (false, None);
            let latest = if src.refresh().await? {
                if cdc && let Some(k) = src.property(bronze::KEYS_PROPERTY)? {
                    keys = Some((k, src.property(bronze::KEYS_FROM_PROPERTY)?));
                }
                let limit = readers::max_lag(&src)?;
                max_lag_hours = Some(limit.num_hours());
                // A job that consumed nothing reads from version 0 (readers.rs).
                if let Some(u) = readers::first_unread(&src, consumed).await? {
                    unread_since = u.committed_at;
                    must_read_by = u.committed_at.map(|t| t + limit);
                    too_far_behind = u.gone || must_read_by.is_some_and(|t| t < now);
                }
                src.version()
            } else {
                None
            };
            let behind = match (latest, consumed) {
                (Some(l), Some(c)) => l.saturating_sub(c),
                (Some(l), None) => l + 1,
                (None, _) => 0,
            };
            out.push(RefineLag {
                job: job.job.clone(),
                output: job.output.clone(),
                source: source.to_string(),
                consumed,
                latest,
                behind,
                unread_since,
                max_lag_hours,
                must_read_by,
                too_far_behind,
                keys,
            });
        }
    }
    Ok(out)
}

/// The access-log tables: log objects committed in the 24 hours before `now` (newest commits
/// first, back to the first older one), the last commit and the newest request time.
async fn access_log_tables(
    lake: &Lake,
    config: &PipelineConfig,
    now: DateTime<Utc>,
) -> Result<Vec<AccessLogLag>> {
    let prefix = &config.access_logs.table_prefix;
    let tables = match config.access_logs.layout {
        AccessLogLayout::PerBucket => child_tables(lake, prefix).await?,
        AccessLogLayout::Single => vec![prefix.clone()],
    };
    let log_prefix = format!("{}/s3/", config.pipeline);
    let mut out = Vec::new();
    for table in tables {
        let mut h = TableHandle::open(lake, &table)?;
        if !h.refresh().await? {
            continue;
        }
        let latest = h.version().unwrap_or(0);
        let cutoff = now - Duration::hours(24);
        let mut objects = 0;
        let mut last_commit = None;
        for v in (0..=latest).rev() {
            let Some(commit) = h.commit(v).await? else {
                break; // cleaned up: older than the log retention, so older than 24 h too
            };
            let at = commit.written_at();
            last_commit = last_commit.or(at);
            if at.is_some_and(|t| t < cutoff) {
                break;
            }
            objects += commit
                .txns()
                .iter()
                .filter(|(app, _)| app.starts_with(&log_prefix) && !app.contains("#refused-by:"))
                .count();
        }
        out.push(AccessLogLag {
            newest_log_time: newest_time(&h)?,
            table,
            objects_last_24h: objects,
            last_commit,
        });
    }
    Ok(out)
}

/// The commit time of `version` as its writer recorded it (from its commit file; one GET, no
/// listing of the log: `history` and `show --as-of` use the file time instead).
async fn commit_time(h: &TableHandle, version: u64) -> Result<Option<DateTime<Utc>>> {
    Ok(h.commit(version).await?.and_then(|c| c.written_at()))
}

/// The largest `time` in the table's file statistics.
fn newest_time(h: &TableHandle) -> Result<Option<DateTime<Utc>>> {
    Ok(h.live_files()?
        .iter()
        .filter_map(|f| {
            let stats = f.stats()?;
            let max = stats.get("maxValues")?.get("time")?.as_str()?.to_string();
            DateTime::parse_from_rfc3339(&max)
                .ok()
                .map(|t| t.with_timezone(&Utc))
        })
        .max())
}
