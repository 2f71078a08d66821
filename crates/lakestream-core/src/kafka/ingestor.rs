//! [`KafkaIngestor`]: one invocation, top to bottom: **route** each record to its table, **plan**
//! each table (drop what is committed, decode, find bad records), **dead-letter** the bad ones,
//! **commit** each table once, **settle** every record. Each record's [`RecordOutcome`] is
//! explicit; one left `Pending` at the end is a bug and fails the invocation (the batch is
//! redelivered, nothing is lost). Topics of a Debezium `[[cdc]]` family go to their bronze
//! tables ([`super::bronze`]); a tombstone just after its delete is counted and skipped, any
//! other is a delete of its key (ARCHITECTURE.md "Deletes known only from their tombstone").
//!
//! Order matters for "never lose a record": dead letters are committed *before* the data
//! commit that advances the partition's `txn` version, so a crash in between replays into
//! "dead letters already there, data not yet" and finishes the job. Dead letters are keyed per
//! record, so a second dead-letter commit in the same invocation never hides the first.

use super::bronze::Destination;
use super::planner::TopicPlanner;
use super::report::{IngestReport, RecordOutcome, TableReport};
use crate::cdc::debezium::{BronzeTarget, tombstone_follows_its_delete};
use crate::clock::Clock;
use crate::commit::{self, CommitSettings};
use crate::dead_letter::DeadLetter;
use crate::error::{Error, Result};
use crate::schema::TableLayout;
use crate::storage::Lake;
use crate::table::{TableHandle, WarmHandles};
use chrono::{DateTime, Utc};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::{RecordValue, SourceRecord};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Rounds of "commit, dead-letter what a re-plan rejected, commit again" per table.
const MAX_REJECT_ROUNDS: usize = 3;

/// Ingests batches of source records into the lake. Build once (in `main`), use per event.
pub struct KafkaIngestor {
    pub(super) config: PipelineConfig,
    pub(super) lake: Lake,
    /// Each topic's table layout.
    pub(super) layouts: HashMap<String, TableLayout>,
    pub(super) settings: CommitSettings,
    pub(super) clock: Arc<dyn Clock>,
    /// Table handles kept warm across invocations (taken out while in use).
    pub(super) handles: WarmHandles,
}

/// Records of the batch by destination, after routing.
struct Routed<'a> {
    by_table: BTreeMap<String, TableRoute<'a>>,
    letters: Vec<(usize, DeadLetter)>,
}

/// One table's records after routing.
struct TableRoute<'a> {
    layout: Cow<'a, TableLayout>,
    /// The CDC source table of a bronze table.
    cdc: Option<Arc<BronzeTarget>>,
    idx: Vec<usize>,
}

impl KafkaIngestor {
    /// Build from a validated config.
    pub fn new(config: PipelineConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        let lake = Lake::new(&config.lake)?;
        Ok(Self::with_lake(config, lake, clock))
    }

    /// Build over an already resolved lake (e.g. one with a store wrapper).
    pub fn with_lake(config: PipelineConfig, lake: Lake, clock: Arc<dyn Clock>) -> Self {
        let layouts = config
            .topics
            .iter()
            .map(|t| (t.topic.clone(), TableLayout::for_topic(t)))
            .collect();
        let settings = CommitSettings::from(&config.commit);
        Self {
            config,
            lake,
            layouts,
            settings,
            clock,
            handles: WarmHandles::new(),
        }
    }

    /// The lake this ingestor writes to.
    pub fn lake(&self) -> &Lake {
        &self.lake
    }

    /// The pipeline config.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// Ingest one batch. Bad records and tables that refuse the write for good end in the
    /// dead-letter table; errors are storage/contention failures (retryable: redeliver the
    /// batch, nothing is lost) or a dead-letter table that cannot be written.
    pub async fn ingest(&self, records: &[SourceRecord]) -> Result<IngestReport> {
        self.ingest_under(records, &self.config.pipeline).await
    }

    /// [`KafkaIngestor::ingest`] with the data tables' `txn` appIds under `app_prefix`
    /// (`<app_prefix>/<topic>/<partition>`); dead letters keep the pipeline's keys.
    pub(super) async fn ingest_under(
        &self,
        records: &[SourceRecord],
        app_prefix: &str,
    ) -> Result<IngestReport> {
        let now = self.clock.now();
        let mut outcomes = vec![RecordOutcome::Pending; records.len()];
        let mut report = IngestReport {
            received: records.len(),
            bytes_received: records.iter().map(SourceRecord::value_len).sum(),
            max_lag_ms: records
                .iter()
                .filter_map(|r| r.timestamp_ms)
                .map(|ts| now.timestamp_millis() - ts)
                .max(),
            ..Default::default()
        };

        let Routed { by_table, letters } = self.route(records, &mut outcomes);
        let mut tables = Vec::new();
        let committed = async {
            self.plan(records, by_table, app_prefix, now, &mut tables)
                .await?;
            let mut letters = letters;
            for t in &mut tables {
                letters.extend(t.planner.take_new_rejects());
            }
            self.dead_letter(letters, &mut outcomes, &mut report, now)
                .await?;
            self.commit(records, &mut tables, &mut outcomes, &mut report, now)
                .await
        }
        .await;
        for t in tables.iter_mut() {
            if let Some(h) = t.handle.take() {
                self.handles.put(h);
            }
        }
        committed?;
        self.settle(&tables, &outcomes, &mut report)?;
        Ok(report)
    }

    /// Route records to their tables; repeats of (topic, partition, offset) in the batch,
    /// unknown topics, values that are not bytes and CDC tombstones are settled here.
    fn route<'a>(&'a self, records: &[SourceRecord], outcomes: &mut [RecordOutcome]) -> Routed<'a> {
        let mut seen = HashSet::with_capacity_and_hasher(
            records.len(),
            foldhash::fast::RandomState::default(),
        );
        let mut routed = Routed {
            by_table: BTreeMap::new(),
            letters: Vec::new(),
        };
        let mut last: Option<(&str, Destination<'a>)> = None;
        // The record before each in its (topic, partition), for tombstones.
        let mut in_partition: HashMap<(&str, i32), usize> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            if !seen.insert((r.topic.as_str(), r.partition, r.offset)) {
                outcomes[i] = RecordOutcome::RepeatedInBatch;
                continue;
            }
            let previous = in_partition
                .insert((r.topic.as_str(), r.partition), i)
                .and_then(|j| records.get(j));
            // Batches hold a handful of topics: look a topic up once per run of it.
            let dest = match &last {
                Some((topic, dest)) if *topic == r.topic => dest.clone(),
                _ => {
                    let dest = self.destination(&r.topic);
                    last = Some((r.topic.as_str(), dest.clone()));
                    dest
                }
            };
            let (table, layout, cdc) = match dest {
                Destination::Unknown => {
                    let reason = format!("no table is configured for topic `{}`", r.topic);
                    routed.letters.push((i, DeadLetter::kafka(r, None, reason)));
                    continue;
                }
                // A tombstone (null value after a delete, for log compaction) just after its
                // delete carries nothing more: skipped, never dead-lettered. Any other is a
                // delete known only from its key (`cdc::debezium::tombstone_follows_its_delete`),
                // dead-lettered with the others where the topic cannot name a table.
                Destination::Cdc(_) | Destination::BadCdc(_)
                    if r.value == RecordValue::Null
                        && (r.key == RecordValue::Null
                            || previous.is_some_and(|p| tombstone_follows_its_delete(r, p))) =>
                {
                    outcomes[i] = RecordOutcome::Tombstone;
                    continue;
                }
                Destination::BadCdc(reason) => {
                    routed.letters.push((i, DeadLetter::kafka(r, None, reason)));
                    continue;
                }
                Destination::Topic(layout) => (layout.table.clone(), Cow::Borrowed(layout), None),
                Destination::Cdc(d) => (
                    d.table.clone(),
                    Cow::Owned(d.layout.clone()),
                    Some(d.target.clone()),
                ),
            };
            match &r.value {
                RecordValue::Null if cdc.is_none() => routed.letters.push((
                    i,
                    DeadLetter::kafka(r, Some(&table), "null value (tombstone)".into()),
                )),
                RecordValue::Bytes(_) | RecordValue::Null => {
                    let is_cdc = cdc.is_some();
                    let route = routed.by_table.entry(table).or_insert(TableRoute {
                        layout,
                        cdc,
                        idx: vec![],
                    });
                    if route.cdc.is_some() == is_cdc {
                        route.idx.push(i);
                    } else {
                        let reason = format!(
                            "table `{}` is written by a `[[topics]]` entry and by a CDC family; \
                             give the family another bronze template",
                            route.layout.table
                        );
                        let table = Some(route.layout.table.as_str());
                        routed
                            .letters
                            .push((i, DeadLetter::kafka(r, table, reason)));
                    }
                }
                RecordValue::Invalid { reason, .. } => routed
                    .letters
                    .push((i, DeadLetter::kafka(r, Some(&table), reason.clone()))),
            }
        }
        routed
    }

    /// Plan every table once against its current state; decoding finds the bad records.
    async fn plan<'a>(
        &'a self,
        records: &'a [SourceRecord],
        by_table: BTreeMap<String, TableRoute<'a>>,
        app_prefix: &str,
        now: DateTime<Utc>,
        tables: &mut Vec<TableRun<'a>>,
    ) -> Result<()> {
        for (table, route) in by_table {
            let limits = self.lake.partition_limits(&table)?;
            let mut planner = TopicPlanner::new(
                app_prefix,
                route.layout,
                route.cdc,
                records,
                route.idx,
                now,
                limits,
            );
            // The identity HEAD and a GET of the next commit at once: with two or more
            // instances a topic's batches land on either, so a kept head is often one commit
            // behind, and a plan on it would cost a failed log PUT.
            let mut handle = self.handles.take_fresh(&self.lake, &table).await?;
            let planned = async {
                handle.sync().await?;
                let state =
                    commit::TableState::read(&mut handle, &commit::Planner::app_ids(&planner))
                        .await?;
                commit::Planner::plan(&mut planner, &state).await
            }
            .await;
            // Kept either way, so the caller returns the handle to the warm cache.
            tables.push(TableRun {
                report: TableReport {
                    table,
                    ..Default::default()
                },
                planner,
                handle: Some(handle),
                done: false,
            });
            planned?;
        }
        Ok(())
    }

    /// Commit each table (concurrently). Rejects a re-plan finds (after a concurrent schema
    /// change) are dead-lettered and the table committed again; a table that refuses the write
    /// for good has its pending records dead-lettered with the reason; a transient failure
    /// fails the invocation after the other tables are settled.
    async fn commit(
        &self,
        records: &[SourceRecord],
        tables: &mut [TableRun<'_>],
        outcomes: &mut [RecordOutcome],
        report: &mut IngestReport,
        now: DateTime<Utc>,
    ) -> Result<()> {
        for _ in 0..MAX_REJECT_ROUNDS {
            let runs = tables.iter_mut().filter(|t| !t.done).map(|t| async move {
                let r = match t.handle.as_mut() {
                    Some(h) => commit::append(&self.lake, h, &self.settings, &mut t.planner).await,
                    None => Ok(Default::default()),
                };
                (t, r)
            });
            let mut late = Vec::new();
            let mut first_err = None;
            for (t, r) in futures::future::join_all(runs).await {
                let rejects = t.planner.take_new_rejects();
                let table = t.planner.layout.table.as_str();
                match r {
                    Ok(outcome) => {
                        t.report.record_commit(&outcome);
                        t.done = rejects.is_empty();
                        if t.done {
                            t.planner.settle(outcome.version.is_some(), outcomes);
                        }
                    }
                    Err(e) if e.is_retryable() => {
                        t.done = true;
                        first_err.get_or_insert(e);
                    }
                    Err(e) => {
                        t.done = true;
                        tracing::error!(table, error = %e.redacted(), "table refused the write; dead-lettering its records");
                        t.planner.settle(false, outcomes);
                        let reason = format!("table `{table}` refused the write: {e}");
                        for i in t.planner.pending(outcomes) {
                            late.push((
                                i,
                                DeadLetter::kafka(&records[i], Some(table), reason.clone()),
                            ));
                        }
                        t.report.rejected = Some(reason);
                    }
                }
                late.extend(rejects);
            }
            self.dead_letter(late, outcomes, report, now).await?;
            if let Some(e) = first_err {
                return Err(e);
            }
            if tables.iter().all(|t| t.done) {
                return Ok(());
            }
        }
        Err(Error::Contention {
            table: tables
                .iter()
                .filter(|t| !t.done)
                .map(|t| t.planner.layout.table.as_str())
                .collect::<Vec<_>>()
                .join(","),
            attempts: MAX_REJECT_ROUNDS as u32,
            last: "concurrent schema changes kept making records invalid; those found are \
                   dead-lettered, redeliver the batch"
                .into(),
        })
    }

    /// Per-table reports and totals from the final record outcomes; a record still pending is a
    /// bug, reported as an error so the batch is redelivered rather than a record lost.
    fn settle(
        &self,
        tables: &[TableRun<'_>],
        outcomes: &[RecordOutcome],
        report: &mut IngestReport,
    ) -> Result<()> {
        let pending: Vec<usize> = (0..outcomes.len())
            .filter(|&i| outcomes[i] == RecordOutcome::Pending)
            .collect();
        if !pending.is_empty() {
            return Err(Error::Internal(format!(
                "{} record(s) of the batch (first: index {}) were neither written, dead-lettered \
                 nor found committed; the batch is failed so that nothing is lost",
                pending.len(),
                pending[0]
            )));
        }
        for t in tables {
            let count =
                |s: RecordOutcome| t.planner.idx.iter().filter(|&&i| outcomes[i] == s).count();
            let mut tr = t.report.clone();
            tr.received = t.planner.idx.len();
            tr.written = count(RecordOutcome::Written);
            tr.dead_lettered = count(RecordOutcome::DeadLettered);
            tr.duplicates = count(RecordOutcome::AlreadyCommitted);
            tr.unknown_fields_ignored = t.planner.unknown_ignored;
            tr.columns_added = t.planner.columns_added.clone();
            if tr.written == 0 {
                tr.version = None;
                tr.columns_added.clear();
            }
            report.tables.push(tr);
        }
        report.count(outcomes);
        Ok(())
    }
}

/// One table's run through an invocation.
struct TableRun<'a> {
    planner: TopicPlanner<'a>,
    handle: Option<TableHandle>,
    report: TableReport,
    done: bool,
}
