//! Notified objects of DMS / files families -> bronze tables, exactly once per object version.
//!
//! Per object: open the notified version (`If-Match` on its ETag), read the bronze table's
//! `txn` of that version (`<pipeline>/cdc-object/<sha256 of bucket/key#etag>`, version = data
//! rows committed so far; its `/done` marker once the last chunk landed), then stream the rows
//! after it in chunks of [`FileSettings`]: each chunk's bad rows go to the dead-letter table
//! first (keyed per object version and chunk start), then its rows land with the advanced
//! `txn` in one commit on the commit loop. A redelivery of a finished object reads nothing; one
//! after a crash resumes at the first row not committed.

use super::decode::{ChunkLimits, Decoder, FileSpec};
use super::layout::{FileKind, ObjectContext, bronze_batch};
use super::planner::{ChunkPlanner, ObjectTxn};
use crate::clock::Clock;
use crate::commit::{self, CommitSettings};
use crate::dead_letter::{DeadLetter, write_dead_letters};
use crate::error::{Error, Result};
use crate::s3_object::{ObjectIngestReport, ObjectOutcome, ObjectSource, ObjectVersion, Opened};
use crate::storage::Lake;
use crate::table::{TableHandle, WarmHandles};
use futures::FutureExt;
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::config::{CdcFamily, CdcSource, FamilyTable, bronze};
use lakestream_formats::notification::LogObject;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// How large one chunk (one bronze commit) of a file may be.
#[derive(Debug, Clone, Copy)]
pub struct FileSettings {
    /// Data rows per chunk.
    pub chunk_rows: usize,
    /// Raw bytes of text rows per chunk.
    pub chunk_bytes: usize,
}

impl Default for FileSettings {
    fn default() -> Self {
        Self {
            chunk_rows: 250_000,
            chunk_bytes: 64 << 20,
        }
    }
}

/// Ingests DMS / plain file deliveries into bronze tables. Build once, reuse.
pub struct CdcFileIngestor {
    config: PipelineConfig,
    lake: Lake,
    settings: CommitSettings,
    files: FileSettings,
    clock: Arc<dyn Clock>,
    handles: WarmHandles,
}

/// What one object did: rows landed now, rows dead-lettered now.
type Counts = (usize, usize);

impl CdcFileIngestor {
    /// Build over a resolved lake.
    pub fn with_lake(config: PipelineConfig, lake: Lake, clock: Arc<dyn Clock>) -> Self {
        Self {
            settings: CommitSettings::from(&config.commit),
            config,
            lake,
            files: FileSettings::default(),
            clock,
            handles: WarmHandles::new(),
        }
    }

    /// Build from a validated config.
    pub fn new(config: PipelineConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        let lake = Lake::new(&config.lake)?;
        Ok(Self::with_lake(config, lake, clock))
    }

    /// Use `files` chunk limits.
    pub fn with_files(mut self, files: FileSettings) -> Self {
        self.files = files;
        self
    }

    /// Whether `object` belongs to a DMS / files family (its bucket is the family's
    /// `location` bucket and its key is under the prefix, at `<schema>/<table>/<file>`).
    pub fn owns(&self, object: &LogObject) -> bool {
        self.config
            .cdc_object(&object.bucket, &object.key)
            .is_some()
    }

    /// Ingest `objects` (each owned by a family), one after another.
    pub async fn ingest(
        &self,
        objects: &[LogObject],
        source: &impl ObjectSource,
    ) -> Result<ObjectIngestReport> {
        let mut report = ObjectIngestReport::default();
        // Letters for whole objects (missing, superseded, refused): one commit for the call,
        // however many objects a (possibly forged) message names.
        let mut letters: Vec<DeadLetter> = Vec::new();
        for obj in objects {
            // A decoder that panics on a hostile file fails that object only (a dead letter),
            // never the other objects of the batch.
            let attempt = AssertUnwindSafe(self.object(obj, source, &mut report, &mut letters))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Fetch {
                        object: obj.uri(),
                        message: "its decoder failed on the object's content (a panic): the \
                                  file is malformed"
                            .into(),
                        retryable: false,
                    })
                });
            let outcome = match attempt {
                Ok(o) => o,
                Err(e) if e.is_retryable() => ObjectOutcome::Failed {
                    reason: e.redacted(),
                },
                Err(e) => {
                    // Retrying cannot help: one letter for the object, acknowledged.
                    let reason = e.to_string();
                    tracing::warn!(object = %obj.uri(), error = %e.redacted(), "CDC file refused; dead-lettered");
                    letters.push(self.object_letter(obj, "refused", reason.clone()));
                    ObjectOutcome::Refused { reason }
                }
            };
            report.objects.push((obj.uri(), outcome));
        }
        // An object named twice in one call (notifications are at least once) is one letter.
        let mut seen = std::collections::HashSet::new();
        letters.retain(|l| match &l.origin {
            crate::dead_letter::Origin::Object { app_id, .. } => seen.insert(app_id.clone()),
            _ => true,
        });
        // Counted with the bad lines: the `LinesDeadLettered` metric (and its alarm) is every
        // dead letter an invocation wrote.
        report.lines_dead_lettered += letters.len();
        self.letters(&letters, &mut report).await?;
        Ok(report)
    }

    fn object_letter(&self, obj: &LogObject, kind: &str, reason: String) -> DeadLetter {
        let txn = ObjectTxn::of(
            &self.config.pipeline,
            &obj.bucket,
            &obj.key,
            obj.etag.as_deref().unwrap_or(""),
        );
        DeadLetter::object(obj.uri(), format!("{}#{kind}", txn.rows), reason)
    }

    async fn letters(&self, letters: &[DeadLetter], report: &mut ObjectIngestReport) -> Result<()> {
        if letters.is_empty() {
            return Ok(());
        }
        let table = &self.config.dead_letter_table;
        let mut h = self.handles.take(&self.lake, table).await?;
        let out = write_dead_letters(
            &self.lake,
            &mut h,
            &self.config.pipeline,
            &self.settings,
            letters,
            self.clock.now(),
        )
        .await;
        self.handles.put(h);
        if let Some(v) = out?.commit.version {
            report.versions.insert(table.clone(), v);
        }
        Ok(())
    }

    async fn object(
        &self,
        obj: &LogObject,
        source: &impl ObjectSource,
        report: &mut ObjectIngestReport,
        letters: &mut Vec<DeadLetter>,
    ) -> Result<ObjectOutcome> {
        let Some((family, table)) = self.config.cdc_object(&obj.bucket, &obj.key) else {
            return Err(Error::Config(format!(
                "{} belongs to no DMS / files family (`[[cdc]] location`)",
                obj.uri()
            )));
        };
        let Some(kind) = FileKind::of(family.source.kind(), &obj.key) else {
            return Err(Error::Fetch {
                object: obj.uri(),
                message: "not a file format read from a CDC landing prefix: name files \
                          .csv, .parquet, .json / .jsonl / .ndjson"
                    .into(),
                retryable: false,
            });
        };
        let version = match source.open(obj).await? {
            Opened::Version(v) => v,
            Opened::Missing => {
                let l = self.object_letter(obj, "missing", "object no longer exists".into());
                letters.push(l);
                return Ok(ObjectOutcome::Missing);
            }
            Opened::Superseded => {
                let reason = format!(
                    "object was overwritten after this notification (ETag {} is no longer \
                     current); the overwrite's own notification ingests the new content",
                    obj.etag.as_deref().unwrap_or("-")
                );
                letters.push(self.object_letter(obj, "superseded", reason));
                return Ok(ObjectOutcome::Superseded);
            }
        };
        let limit = self.config.cdc_limits.max_object_bytes();
        if version.size() > limit {
            return Err(Error::Fetch {
                object: obj.uri(),
                message: format!(
                    "the object ({} bytes) exceeds `cdc_limits.max_object_mib` ({limit} bytes); \
                     split it at the source or raise the bound",
                    version.size()
                ),
                retryable: false,
            });
        }
        let name = family.bronze_table(&table)?;
        let mut h = self.handles.take(&self.lake, &name).await?;
        let res = self
            .chunks(&mut h, family, &table, obj, version, kind, report)
            .await;
        self.handles.put(h);
        let ((rows, dead), stop) = res?;
        report.rows_written += rows;
        report.lines_dead_lettered += dead;
        if let Some(reason) = stop {
            tracing::warn!(object = %obj.uri(), rows, reason = %reason, "CDC file stopped at a schema change; not finished");
            return Ok(ObjectOutcome::Failed { reason });
        }
        Ok(match (rows, dead) {
            (0, 0) => ObjectOutcome::AlreadyCommitted,
            (rows, dead_lettered) => ObjectOutcome::Committed {
                rows,
                dead_lettered,
            },
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn chunks(
        &self,
        h: &mut TableHandle,
        family: &CdcFamily,
        table: &FamilyTable,
        obj: &LogObject,
        version: Arc<dyn ObjectVersion>,
        kind: FileKind,
        report: &mut ObjectIngestReport,
    ) -> Result<(Counts, Option<String>)> {
        let pipeline = &self.config.pipeline;
        let key = version.key().to_string();
        let txn = ObjectTxn::of(pipeline, &obj.bucket, &key, version.etag());
        h.refresh().await?;
        let committed = h.committed(&[txn.rows.clone(), txn.done.clone()]).await?;
        if committed.contains_key(&txn.done) {
            return Ok(((0, 0), None));
        }
        let skip = committed.get(&txn.rows).copied().unwrap_or(0);
        let uri = format!("s3://{}/{key}", obj.bucket);
        let ingested_at_us = self.clock.now().timestamp_micros();
        let ctx = ObjectContext {
            object: format!("{}/{key}", obj.bucket),
            key: key.clone(),
            etag: version.etag().to_string(),
            // When the object was written, as the read saw it (S3 `Last-Modified`), else now:
            // never the notification's `eventTime`, which whoever can send to the queue sets.
            order: kind.order(
                family.source.kind(),
                Some(version.written_us().unwrap_or(ingested_at_us)),
                ingested_at_us,
            ),
            ingested_at_us,
        };
        let mut spec = FileSpec::of(family, table, kind, uri.clone(), &self.config.cdc_limits)?;
        spec.bronze = bronze_columns(h)?;
        let limits = ChunkLimits {
            rows: self.files.chunk_rows.max(1),
            bytes: self.files.chunk_bytes.max(1),
        };
        let mut decoder = Decoder::open(spec, version, skip, limits).await?;
        let properties = self.properties(family, table);
        let name = h.name().to_string();
        let (mut rows, mut dead) = (0, 0);
        loop {
            let chunk = decoder.next_chunk().await?;
            let letters: Vec<DeadLetter> = chunk
                .bad
                .iter()
                .map(|b| {
                    DeadLetter::object_line(
                        uri.clone(),
                        b.row,
                        &b.raw,
                        format!("{}#rows-{}", txn.rows, chunk.first_row),
                        b.reason.clone(),
                    )
                    .for_table(&name)
                })
                .collect();
            self.letters(&letters, report).await?;
            let batch = bronze_batch(&name, &chunk.decoded, &ctx)?;
            let mut planner = ChunkPlanner {
                table: &name,
                txn: &txn,
                batch: &batch,
                last_row: chunk.last_row,
                eof: chunk.eof,
                properties: properties.clone(),
                // DMS: a value that no longer parses is the source column's type change
                // (the table's apply stops); a plain file's is a bad row of that file.
                set_properties: chunk
                    .bad
                    .iter()
                    .filter(|_| family.source.kind() == CdcSource::Dms)
                    .find_map(|b| b.type_change.clone())
                    .map(|t| vec![(bronze::TYPE_CHANGE_PROPERTY.to_string(), t)])
                    .unwrap_or_default(),
                written: 0,
            };
            let outcome = commit::append(&self.lake, h, &self.settings, &mut planner).await?;
            if let Some(v) = outcome.version {
                report.versions.insert(name.clone(), v);
                rows += planner.written;
                dead += letters.len();
            }
            tracing::debug!(object = %uri, last_row = chunk.last_row, rows = planner.written, "CDC file chunk committed");
            if chunk.stop.is_some() {
                return Ok(((rows, dead), chunk.stop));
            }
            if chunk.eof {
                return Ok(((rows, dead), None));
            }
        }
    }

    /// Bronze properties (ARCHITECTURE.md "Bronze") and the `txn` retention of access-log
    /// tables, so one appId per object version does not stay in the log forever.
    fn properties(&self, family: &CdcFamily, table: &FamilyTable) -> Vec<(String, String)> {
        vec![
            (bronze::FAMILY_PROPERTY.into(), family.family.clone()),
            (bronze::TABLE_PROPERTY.into(), table.qualified()),
            (
                bronze::KEYS_PROPERTY.into(),
                family
                    .declared_keys(table)
                    .map(|k| k.join(","))
                    .unwrap_or_default(),
            ),
            (
                bronze::KEYS_FROM_PROPERTY.into(),
                bronze::KEYS_FROM_CONFIG.into(),
            ),
            (
                "delta.setTransactionRetentionDuration".into(),
                format!(
                    "interval {} days",
                    self.config.access_logs.txn_retention_days
                ),
            ),
        ]
    }
}

/// The row columns of bronze table `h` (loaded), lower-cased; none for a new table.
fn bronze_columns(h: &TableHandle) -> Result<Arc<std::collections::HashSet<String>>> {
    if !h.exists() {
        return Ok(Arc::default());
    }
    Ok(Arc::new(
        h.arrow_schema()?
            .fields()
            .iter()
            .map(|f| f.name().to_lowercase())
            .filter(|n| !n.starts_with("__"))
            .collect(),
    ))
}
