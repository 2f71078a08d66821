//! Log objects -> per-bucket access-log tables, idempotent per object.
//!
//! Each object's rows are committed with one `txn` per object (appId
//! `<pipeline>/s3/<bucket>/<key>#<etag>`, from the key that was read and the ETag the read
//! answered with, never the notification's text), in the same commit as the rows, on a table whose
//! `delta.setTransactionRetentionDuration` bounds how long those appIds are kept. A redelivered
//! notification (or two notifications for the same object) finds the appId committed and adds
//! nothing. See ARCHITECTURE.md "Access logs" for the choice and its limits.

use super::object::{Limits, Parsed, object_letter, parse_object, refused_letter};
use super::planner::ObjectPlanner;
use super::source::{Fetched, ObjectSource};
use crate::clock::Clock;
use crate::commit::{self, CommitSettings};
use crate::config::{AccessLogLayout, PipelineConfig};
use crate::deadletter::{DeadLetter, write_dead_letters};
use crate::error::Result;
use crate::storage::Lake;
use crate::table::{TableHandle, WarmHandles};
use deltalake::arrow::record_batch::RecordBatch;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub use lakestream_formats::notification::LogObject;

/// What happened to one object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ObjectOutcome {
    /// Rows committed now (plus lines dead-lettered).
    Committed {
        /// Rows written.
        rows: usize,
        /// Lines dead-lettered.
        dead_lettered: usize,
    },
    /// An earlier delivery already committed it.
    AlreadyCommitted,
    /// The object no longer exists; recorded in dead letters.
    Missing,
    /// The object was overwritten after this notification (its ETag no longer matches);
    /// recorded in dead letters, acknowledged: the overwrite's own notification ingests it.
    Superseded,
    /// Not read or not written, for good: its bucket is not a configured source or it lies
    /// inside the lake (never read), the source refused the key, or a limit of
    /// `[access_logs]` refused it as a whole (too large, inflates too far, too many malformed
    /// lines); recorded in dead letters with the reason, acknowledged.
    Refused {
        /// Why, and what to do.
        reason: String,
    },
    /// Could not be processed now; retry later (the message must not be acknowledged).
    Failed {
        /// Why.
        reason: String,
    },
}

/// Result of one ingest call.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ObjectIngestReport {
    /// Outcome per object, in input order.
    pub objects: Vec<(String, ObjectOutcome)>,
    /// Lines parsed into rows (committed now).
    pub rows_written: usize,
    /// Lines dead-lettered.
    pub lines_dead_lettered: usize,
    /// Commits per table: table -> version.
    pub versions: BTreeMap<String, u64>,
    /// Bytes read from objects.
    pub bytes_read: usize,
}

impl ObjectIngestReport {
    /// True when `object` must be retried.
    pub fn failed(&self, object: &LogObject) -> bool {
        let uri = object.uri();
        self.objects
            .iter()
            .any(|(u, o)| *u == uri && matches!(o, ObjectOutcome::Failed { .. }))
    }
}

/// Ingests access-log objects into the lake. Build once, reuse across invocations.
pub struct AccessLogIngestor {
    config: PipelineConfig,
    lake: Lake,
    settings: CommitSettings,
    clock: Arc<dyn Clock>,
    /// Table handles kept warm across invocations (taken out while in use).
    handles: WarmHandles,
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
        Self {
            config,
            lake,
            settings,
            clock,
            handles: WarmHandles::new(),
        }
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
        let letters: Vec<DeadLetter> = items
            .iter()
            .map(|(id, raw, reason)| DeadLetter {
                topic: None,
                partition: None,
                offset: None,
                kafka_timestamp_ms: None,
                object_uri: Some(id.clone()),
                line_number: None,
                raw_base64: Some(DeadLetter::encode_raw(raw)),
                error: reason.clone(),
                target_table: None,
                txn: Some((format!("{}/input/{id}", self.config.pipeline), 1)),
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

    /// Why `obj` must not be read, if so: a notification names any bucket and key (anyone who
    /// can send to the queue writes it), so only the configured source buckets are read, and
    /// never an object inside the lake (whose config may hold credentials).
    fn refusal(&self, obj: &LogObject) -> Option<String> {
        let sources = &self.config.access_logs;
        if !sources.is_source(&obj.bucket) {
            let configured = if sources.source_buckets.is_empty() {
                "none is configured".to_string()
            } else {
                format!("configured: {}", sources.source_buckets.join(", "))
            };
            return Some(format!(
                "bucket `{}` is not an access-log source bucket ({configured}); the object was \
                 not read. If it receives S3 server access logs, add it to \
                 `access_logs.source_buckets` or to {} (the template sets it to the raw-logs \
                 bucket)",
                obj.bucket.escape_debug(),
                crate::config::LOG_BUCKETS_ENV
            ));
        }
        let root = self.lake.root();
        let inside = |key: &str| {
            root.scheme() == "s3"
                && root.host_str() == Some(obj.bucket.as_str())
                && format!("/{}", key.trim_start_matches('/')).starts_with(root.path())
        };
        std::iter::once(&obj.key)
            .chain(obj.alt_key.as_ref())
            .any(|k| inside(k))
            .then(|| {
                format!(
                    "object is inside the lake ({root}); the object was not read: log objects \
                     must not be delivered under the lake prefix"
                )
            })
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
        let pipeline = self.config.pipeline.as_str();
        let now = self.clock.now();
        let mut report = ObjectIngestReport::default();
        let mut outcomes: Vec<Option<ObjectOutcome>> = vec![None; objects.len()];
        let mut parsed: Vec<Option<Parsed>> = Vec::with_capacity(objects.len());
        let mut letters: Vec<DeadLetter> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        // The objects as read (key and ETag of the read): what their rows and letters are keyed by.
        let mut read_objs: Vec<LogObject> = objects.to_vec();
        let mut seen_read = std::collections::HashSet::new();
        let cfg = &self.config.access_logs;
        let limits = Limits::of(cfg);
        let max_object = cfg.max_object_mib.saturating_mul(1 << 20);
        let max_round = cfg.max_round_mib.saturating_mul(1 << 20);
        // Bytes parsed (inflated) by this call: past `max_round_mib` the remaining objects
        // wait for their next delivery, so one batch or drain round holds a bounded amount.
        let mut round_bytes = 0u64;
        for (i, obj) in objects.iter().enumerate() {
            if !seen.insert(obj.clone()) {
                outcomes[i] = Some(ObjectOutcome::AlreadyCommitted);
                parsed.push(None);
                continue;
            }
            if let Some(reason) = self.refusal(obj) {
                tracing::warn!(object = %obj.uri(), "notification names an object outside the configured source buckets or inside the lake; dead-lettered, not read");
                letters.push(object_letter(obj, pipeline, "refused", reason.clone()));
                outcomes[i] = Some(ObjectOutcome::Refused { reason });
                parsed.push(None);
                continue;
            }
            if round_bytes >= max_round {
                outcomes[i] = Some(ObjectOutcome::Failed {
                    reason: format!(
                        "deferred: this batch already parsed {} MiB (`access_logs.max_round_mib`); \
                         the object is read on its next delivery",
                        round_bytes >> 20
                    ),
                });
                parsed.push(None);
                continue;
            }
            match source.fetch(obj, max_object).await {
                Ok(Fetched::Object(read)) => {
                    report.bytes_read += read.bytes.len();
                    let read_obj = LogObject {
                        bucket: obj.bucket.clone(),
                        key: read.key,
                        alt_key: None,
                        etag: Some(read.etag),
                    };
                    // Two notifications of one batch for the same object (e.g. its key encoded
                    // and decoded): read twice, parsed once.
                    if !seen_read.insert(read_obj.clone()) {
                        outcomes[i] = Some(ObjectOutcome::AlreadyCommitted);
                        parsed.push(None);
                        continue;
                    }
                    let parsed_obj = parse_object(&read_obj, &read.bytes, pipeline, limits, |b| {
                        self.table_for(b)
                    })?;
                    read_objs[i] = read_obj;
                    let obj = &read_objs[i];
                    match parsed_obj {
                        Ok(p) => {
                            round_bytes += p.inflated;
                            letters.extend(p.letters.iter().cloned());
                            parsed.push(Some(p));
                        }
                        Err((reason, read_bytes)) => {
                            // Charged what it read, not the whole `max_inflated`: a small
                            // refused object does not defer the good ones after it.
                            round_bytes += read_bytes;
                            tracing::warn!(object = %obj.uri(), "log object refused by a limit; recorded in dead letters");
                            letters.push(object_letter(obj, pipeline, "refused", reason.clone()));
                            outcomes[i] = Some(ObjectOutcome::Refused { reason });
                            parsed.push(None);
                        }
                    }
                }
                Ok(Fetched::TooLarge { size }) => {
                    let reason = format!(
                        "object is {size} bytes, over the {} MiB limit \
                         (`access_logs.max_object_mib`): refused before reading, nothing of it \
                         written; raise the limit (and the function's memory) to ingest it",
                        cfg.max_object_mib
                    );
                    tracing::warn!(object = %obj.uri(), size, "log object over the size limit; recorded in dead letters");
                    letters.push(object_letter(obj, pipeline, "refused", reason.clone()));
                    outcomes[i] = Some(ObjectOutcome::Refused { reason });
                    parsed.push(None);
                }
                Ok(Fetched::Superseded) => {
                    tracing::warn!(object = %obj.uri(), etag = ?obj.etag, "log object was overwritten after this notification; recorded, the newer notification ingests it");
                    letters.push(object_letter(
                        obj,
                        pipeline,
                        "superseded",
                        format!(
                            "object was overwritten after this notification (ETag {} is no longer current); \
                             the overwrite's own notification ingests the new content",
                            obj.etag.as_deref().unwrap_or("-")
                        ),
                    ));
                    outcomes[i] = Some(ObjectOutcome::Superseded);
                    parsed.push(None);
                }
                Ok(Fetched::Missing) => {
                    tracing::warn!(object = %obj.uri(), "log object no longer exists; dead-lettered");
                    letters.push(object_letter(
                        obj,
                        pipeline,
                        "missing",
                        "object no longer exists".into(),
                    ));
                    outcomes[i] = Some(ObjectOutcome::Missing);
                    parsed.push(None);
                }
                Err(e) if e.is_retryable() => {
                    outcomes[i] = Some(ObjectOutcome::Failed {
                        reason: e.redacted(),
                    });
                    parsed.push(None);
                }
                Err(e) => {
                    letters.push(object_letter(obj, pipeline, "refused", e.to_string()));
                    outcomes[i] = Some(ObjectOutcome::Refused {
                        reason: e.to_string(),
                    });
                    parsed.push(None);
                }
            }
        }

        // Dead letters first: the object's data commit is what marks it done.
        self.commit_letters(&letters, &mut report, now).await?;

        // One commit per table, over all objects that have rows for it.
        let mut tables: BTreeMap<String, Vec<(usize, RecordBatch)>> = BTreeMap::new();
        for (i, p) in parsed.iter().enumerate() {
            if let Some(p) = p {
                for (t, b) in &p.by_table {
                    tables.entry(t.clone()).or_default().push((i, b.clone()));
                }
            }
        }
        let mut committed_objects: HashMap<usize, bool> = HashMap::new();
        let mut refused: Vec<DeadLetter> = Vec::new();
        let mut refused_rows: HashMap<usize, usize> = HashMap::new();
        for (table, parts) in tables {
            // A table that cannot be opened (a name the lake refuses, a location too long for
            // the storage) fails its objects only, like a commit that fails.
            let res = match self.handles.take(&self.lake, &table).await {
                Ok(mut h) => {
                    let res = self.append(&mut h, &read_objs, &parts).await;
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
                        let e = committed_objects.entry(*i).or_insert(false);
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
                        refused.push(refused_letter(
                            &read_objs[*i],
                            pipeline,
                            &table,
                            batch.num_rows(),
                            &e,
                        ));
                        *refused_rows.entry(*i).or_default() += batch.num_rows();
                    }
                }
            }
        }
        self.commit_letters(&refused, &mut report, now).await?;
        for (i, obj) in objects.iter().enumerate() {
            let outcome = match (outcomes[i].take(), &parsed[i]) {
                (Some(o), _) => o,
                (None, Some(p)) => {
                    let refused = refused_rows.get(&i).copied().unwrap_or(0);
                    let rows = p
                        .by_table
                        .values()
                        .map(RecordBatch::num_rows)
                        .sum::<usize>()
                        - refused;
                    if committed_objects.get(&i).copied().unwrap_or(false)
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
            };
            report.objects.push((obj.uri(), outcome));
        }
        Ok(report)
    }
}
