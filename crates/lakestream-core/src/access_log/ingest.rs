//! Log objects -> per-bucket access-log tables, idempotent per object.
//!
//! Each object's rows are committed with one `txn` per object (appId
//! `<pipeline>/s3/<bucket>/<key>#<etag>`, from the key that was read and the ETag the read
//! answered with, never the notification's text), in the same commit as the rows, on a table whose
//! `delta.setTransactionRetentionDuration` bounds how long those appIds are kept. A redelivered
//! notification (or two notifications for the same object) finds the appId committed and adds
//! nothing. See ARCHITECTURE.md "Access logs" for the choice and its limits.

use super::gather::{Gathered, gather};
use super::object::{Parsed, refused_letter};
use super::planner::ObjectPlanner;
use crate::cdc::files::{CdcFileIngestor, FileSettings};
use crate::clock::Clock;
use crate::commit::{self, CommitSettings};
use crate::dead_letter::{DeadLetter, write_dead_letters};
use crate::error::Result;
use crate::s3_object::ObjectSource;
use crate::s3_object::{ObjectIngestReport, ObjectOutcome};
use crate::storage::Lake;
use crate::table::{TableHandle, WarmHandles};
use deltalake::arrow::record_batch::RecordBatch;
use lakestream_formats::config::{AccessLogLayout, CdcSource, PipelineConfig};
use lakestream_formats::notification::LogObject;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Ingests access-log objects into the lake. Build once, reuse across invocations.
pub struct AccessLogIngestor {
    config: PipelineConfig,
    lake: Lake,
    settings: CommitSettings,
    clock: Arc<dyn Clock>,
    /// Table handles kept warm across invocations (taken out while in use).
    handles: WarmHandles,
    /// The ingestor of the objects of DMS / files CDC families (notified through the same
    /// queue); `None` without such a family.
    files: Option<CdcFileIngestor>,
}

impl AccessLogIngestor {
    /// Build from a validated config.
    pub fn new(config: PipelineConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        let lake = Lake::new(&config.lake)?;
        Ok(Self::with_lake(config, lake, clock))
    }

    /// Build over an already resolved lake (e.g. one with a store wrapper).
    pub fn with_lake(config: PipelineConfig, lake: Lake, clock: Arc<dyn Clock>) -> Self {
        let settings = CommitSettings::from(&config.commit);
        let files = config
            .cdc
            .iter()
            .any(|f| f.source != CdcSource::Debezium)
            .then(|| CdcFileIngestor::with_lake(config.clone(), lake.clone(), clock.clone()));
        Self {
            config,
            lake,
            settings,
            clock,
            handles: WarmHandles::new(),
            files,
        }
    }

    /// Chunk limits of CDC file ingestion.
    pub fn with_file_settings(mut self, settings: FileSettings) -> Self {
        self.files = self.files.map(|f| f.with_files(settings));
        self
    }

    /// The ingestor of `object` when it belongs to a DMS / files CDC family (its family's
    /// `location` bucket and prefix); `None`: an access-log object.
    pub fn cdc_files_for(&self, object: &LogObject) -> Option<&CdcFileIngestor> {
        self.files.as_ref().filter(|f| f.owns(object))
    }

    /// Whether the config reads anything from S3 notifications: access-log source buckets or
    /// a DMS / files CDC family.
    pub fn reads_objects(&self) -> bool {
        !self.config.access_logs.source_buckets.is_empty() || self.files.is_some()
    }

    /// The table a bucket's rows go to.
    pub fn table_for(&self, bucket: &str) -> String {
        match self.config.access_logs.layout {
            AccessLogLayout::PerBucket => {
                format!("{}/{bucket}", self.config.access_logs.table_prefix)
            }
            AccessLogLayout::Single => self.config.access_logs.table_prefix.clone(),
        }
    }

    /// Record inputs that cannot be used at all (e.g. a message body that is not a
    /// notification) in the dead-letter table, idempotently per `id`.
    pub async fn dead_letter_inputs(&self, items: &[(String, Vec<u8>, String)]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let pipeline = &self.config.pipeline;
        let letters: Vec<DeadLetter> = items
            .iter()
            .map(|(id, raw, reason)| {
                let app_id = format!("{pipeline}/input/{id}");
                DeadLetter::input(id.clone(), raw, app_id, reason.clone())
            })
            .collect();
        self.commit_letters(
            &letters,
            &mut ObjectIngestReport::default(),
            self.clock.now(),
        )
        .await
    }

    /// Commit `letters` to the dead-letter table (idempotent per key) and note its version.
    async fn commit_letters(
        &self,
        letters: &[DeadLetter],
        report: &mut ObjectIngestReport,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<()> {
        if letters.is_empty() {
            return Ok(());
        }
        let mut h = self
            .handles
            .take(&self.lake, &self.config.dead_letter_table)
            .await?;
        let out = write_dead_letters(
            &self.lake,
            &mut h,
            &self.config.pipeline,
            &self.settings,
            letters,
            now,
        )
        .await;
        self.handles.put(h);
        if let Some(v) = out?.commit.version {
            report
                .versions
                .insert(self.config.dead_letter_table.clone(), v);
        }
        Ok(())
    }

    /// Append the rows of `parts` (object index, rows) to `h`'s table: the version committed
    /// (none when every object was in already) and the objects whose rows it wrote.
    async fn append(
        &self,
        h: &mut TableHandle,
        objects: &[LogObject],
        parts: &[(usize, RecordBatch)],
    ) -> Result<(Option<u64>, Vec<usize>)> {
        let mut planner = ObjectPlanner {
            pipeline: self.config.pipeline.as_str(),
            objects,
            parts,
            retention_days: self.config.access_logs.txn_retention_days,
            layout: self.config.access_logs.layout,
            written: vec![],
        };
        let outcome = commit::append(&self.lake, h, &self.settings, &mut planner).await?;
        Ok((outcome.version, planner.written))
    }

    /// Read, parse and commit `objects`: one commit per table, dead letters first.
    pub async fn ingest(
        &self,
        objects: &[LogObject],
        source: &impl ObjectSource,
    ) -> Result<ObjectIngestReport> {
        let now = self.clock.now();
        let mut report = ObjectIngestReport::default();
        let Gathered {
            mut outcomes,
            parsed,
            read_objs,
            letters,
            bytes_read,
        } = gather(objects, source, &self.config, self.lake.root(), |b| {
            self.table_for(b)
        })
        .await?;
        report.bytes_read = bytes_read;

        // Dead letters first: the object's data commit is what marks it done.
        self.commit_letters(&letters, &mut report, now).await?;

        // One commit per table, over all objects that have rows for it.
        let appended = self
            .append_tables(
                rows_by_table(&parsed),
                &read_objs,
                &mut outcomes,
                &mut report,
            )
            .await;
        self.commit_letters(&appended.refused, &mut report, now)
            .await?;
        for (i, obj) in objects.iter().enumerate() {
            let outcome = appended.outcome(i, outcomes[i].take(), &parsed[i], &mut report);
            report.objects.push((obj.uri(), outcome));
        }
        Ok(report)
    }

    /// Append each table's rows (`tables`: by object index) in one commit per table. A
    /// retryable failure fails the table's objects (in `outcomes`); a permanent one makes
    /// dead letters of their rows.
    async fn append_tables(
        &self,
        tables: BTreeMap<String, Vec<(usize, RecordBatch)>>,
        read_objs: &[LogObject],
        outcomes: &mut [Option<ObjectOutcome>],
        report: &mut ObjectIngestReport,
    ) -> Appended {
        let pipeline = self.config.pipeline.as_str();
        let mut appended = Appended::default();
        for (table, parts) in tables {
            // A table that cannot be opened (a name the lake refuses, a location too long for
            // the storage) fails its objects only, like a commit that fails.
            let res = match self.handles.take(&self.lake, &table).await {
                Ok(mut h) => {
                    let res = self.append(&mut h, read_objs, &parts).await;
                    self.handles.put(h);
                    res
                }
                Err(e) => Err(e),
            };
            match res {
                Ok((version, written)) => {
                    if let Some(v) = version {
                        report.versions.insert(table.clone(), v);
                    }
                    for (i, _) in &parts {
                        let wrote = version.is_some() && written.contains(i);
                        let e = appended.committed_objects.entry(*i).or_insert(false);
                        *e |= wrote;
                    }
                }
                Err(e) if e.is_retryable() => {
                    for (i, _) in &parts {
                        outcomes[*i] = Some(ObjectOutcome::Failed {
                            reason: e.redacted(),
                        });
                    }
                }
                Err(e) => {
                    // Retrying cannot help: record each object's rows for this table in dead
                    // letters (object, table, line count, reason) and acknowledge.
                    tracing::error!(table = %table, error = %e.redacted(), "table refused the write; dead-lettering its objects' rows");
                    for (i, batch) in &parts {
                        appended.refused.push(refused_letter(
                            &read_objs[*i],
                            pipeline,
                            &table,
                            batch.num_rows(),
                            &e,
                        ));
                        *appended.refused_rows.entry(*i).or_default() += batch.num_rows();
                    }
                }
            }
        }
        appended
    }
}

/// Each table's rows, by object index.
fn rows_by_table(parsed: &[Option<Parsed>]) -> BTreeMap<String, Vec<(usize, RecordBatch)>> {
    let mut tables: BTreeMap<String, Vec<(usize, RecordBatch)>> = BTreeMap::new();
    for (i, p) in parsed.iter().enumerate() {
        if let Some(p) = p {
            for (t, b) in &p.by_table {
                tables.entry(t.clone()).or_default().push((i, b.clone()));
            }
        }
    }
    tables
}

/// What appending the tables' rows did, by object index.
#[derive(Default)]
struct Appended {
    /// True when some table committed rows of the object now.
    committed_objects: HashMap<usize, bool>,
    /// Dead letters of rows a table refused for good.
    refused: Vec<DeadLetter>,
    /// Rows of the object a table refused for good.
    refused_rows: HashMap<usize, usize>,
}

impl Appended {
    /// The outcome of object `i`: `settled` when gathering or appending already decided it,
    /// else from its `parsed` content and what was committed (counted in `report`).
    fn outcome(
        &self,
        i: usize,
        settled: Option<ObjectOutcome>,
        parsed: &Option<Parsed>,
        report: &mut ObjectIngestReport,
    ) -> ObjectOutcome {
        match (settled, parsed) {
            (Some(o), _) => o,
            (None, Some(p)) => {
                let refused = self.refused_rows.get(&i).copied().unwrap_or(0);
                let rows = p
                    .by_table
                    .values()
                    .map(RecordBatch::num_rows)
                    .sum::<usize>()
                    - refused;
                if self.committed_objects.get(&i).copied().unwrap_or(false)
                    || refused > 0
                    || (rows == 0 && !p.letters.is_empty())
                {
                    report.rows_written += rows;
                    report.lines_dead_lettered += p.letters.len() + refused;
                    ObjectOutcome::Committed {
                        rows,
                        dead_lettered: p.letters.len() + refused,
                    }
                } else {
                    ObjectOutcome::AlreadyCommitted
                }
            }
            (None, None) => ObjectOutcome::AlreadyCommitted,
        }
    }
}
