//! The read half of an access-log ingest call: for each notified object, refuse what must not be
//! read (a bucket that is not a configured source, an object inside the lake), fetch the rest
//! within the size limits, parse their lines into per-table rows and collect every dead letter
//! (refused, missing, superseded objects and bad lines). Nothing is committed here: the
//! ingestor ([`super::ingest`]) commits the letters first, then the rows.

use super::object::{Limits, Parsed, object_letter, parse_object};
use crate::dead_letter::DeadLetter;
use crate::error::Result;
use crate::s3_object::ObjectOutcome;
use crate::s3_object::{Fetched, ObjectSource, ReadObject};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::notification::LogObject;
use std::collections::HashSet;
use url::Url;

/// What reading one call's objects gave, per input object (by index).
pub(super) struct Gathered {
    /// The outcome of each object already settled here (duplicate, refused, missing,
    /// superseded, deferred, failed); `None` for an object parsed into [`Gathered::parsed`].
    pub(super) outcomes: Vec<Option<ObjectOutcome>>,
    /// The parsed content of each object read.
    pub(super) parsed: Vec<Option<Parsed>>,
    /// The objects as read (key and ETag of the read): what their rows and letters are keyed by.
    pub(super) read_objs: Vec<LogObject>,
    /// Every dead letter found: whole objects and bad lines.
    pub(super) letters: Vec<DeadLetter>,
    /// Bytes read from objects.
    pub(super) bytes_read: usize,
}

/// Read and parse `objects` from `source` under `config`'s limits, routing rows to
/// `table_for(bucket)`; `lake_root` is where objects must not be read from.
pub(super) async fn gather(
    objects: &[LogObject],
    source: &impl ObjectSource,
    config: &PipelineConfig,
    lake_root: &Url,
    table_for: impl Fn(&str) -> String,
) -> Result<Gathered> {
    let cfg = &config.access_logs;
    let mut g = Gathering {
        pipeline: config.pipeline.as_str(),
        limits: Limits::of(cfg),
        out: Gathered {
            outcomes: vec![None; objects.len()],
            parsed: Vec::with_capacity(objects.len()),
            read_objs: objects.to_vec(),
            letters: Vec::new(),
            bytes_read: 0,
        },
        seen_read: HashSet::new(),
        round_bytes: 0,
    };
    let mut seen = HashSet::new();
    let max_object = cfg.max_object_mib.saturating_mul(1 << 20);
    let max_round = cfg.max_round_mib.saturating_mul(1 << 20);
    for (i, obj) in objects.iter().enumerate() {
        if !seen.insert(obj.clone()) {
            g.settle(i, ObjectOutcome::AlreadyCommitted);
            continue;
        }
        if let Some(reason) = refusal(config, lake_root, obj) {
            tracing::warn!(object = %obj.uri(), "notification names an object outside the configured source buckets or inside the lake; dead-lettered, not read");
            g.refuse(i, obj, reason);
            continue;
        }
        if g.round_bytes >= max_round {
            g.settle(
                i,
                ObjectOutcome::Failed {
                    reason: format!(
                        "deferred: this batch already parsed {} MiB (`access_logs.max_round_mib`); \
                         the object is read on its next delivery",
                        g.round_bytes >> 20
                    ),
                },
            );
            continue;
        }
        match source.fetch(obj, max_object).await {
            Ok(Fetched::Object(read)) => g.parse(i, obj, read, &table_for)?,
            Ok(Fetched::TooLarge { size }) => {
                let reason = format!(
                    "object is {size} bytes, over the {} MiB limit \
                     (`access_logs.max_object_mib`): refused before reading, nothing of it \
                     written; raise the limit (and the function's memory) to ingest it",
                    cfg.max_object_mib
                );
                tracing::warn!(object = %obj.uri(), size, "log object over the size limit; recorded in dead letters");
                g.refuse(i, obj, reason);
            }
            Ok(Fetched::Superseded) => g.superseded(i, obj),
            Ok(Fetched::Missing) => {
                tracing::warn!(object = %obj.uri(), "log object no longer exists; dead-lettered");
                g.out.letters.push(object_letter(
                    obj,
                    g.pipeline,
                    "missing",
                    "object no longer exists".into(),
                ));
                g.settle(i, ObjectOutcome::Missing);
            }
            Err(e) if e.is_retryable() => g.settle(
                i,
                ObjectOutcome::Failed {
                    reason: e.redacted(),
                },
            ),
            Err(e) => g.refuse(i, obj, e.to_string()),
        }
    }
    Ok(g.out)
}

/// One gather call under way: what it found so far and what it has read.
struct Gathering<'a> {
    pipeline: &'a str,
    limits: Limits,
    out: Gathered,
    /// The objects as read so far: a second notification of one of them is parsed once.
    seen_read: HashSet<LogObject>,
    /// Bytes parsed (inflated) by this call: past `max_round_mib` the remaining objects
    /// wait for their next delivery, so one batch or drain round holds a bounded amount.
    round_bytes: u64,
}

impl Gathering<'_> {
    /// Object `i` is settled with `outcome`: nothing of it is parsed.
    fn settle(&mut self, i: usize, outcome: ObjectOutcome) {
        self.out.outcomes[i] = Some(outcome);
        self.out.parsed.push(None);
    }

    /// Object `i` is refused for good: a dead letter with the reason, acknowledged.
    fn refuse(&mut self, i: usize, obj: &LogObject, reason: String) {
        self.out
            .letters
            .push(object_letter(obj, self.pipeline, "refused", reason.clone()));
        self.settle(i, ObjectOutcome::Refused { reason });
    }

    /// Object `i` was overwritten after its notification: recorded, acknowledged.
    fn superseded(&mut self, i: usize, obj: &LogObject) {
        tracing::warn!(object = %obj.uri(), etag = ?obj.etag, "log object was overwritten after this notification; recorded, the newer notification ingests it");
        self.out.letters.push(object_letter(
            obj,
            self.pipeline,
            "superseded",
            format!(
                "object was overwritten after this notification (ETag {} is no longer current); \
                 the overwrite's own notification ingests the new content",
                obj.etag.as_deref().unwrap_or("-")
            ),
        ));
        self.settle(i, ObjectOutcome::Superseded);
    }

    /// Parse object `i` (`obj` as notified) as `read`; it is then keyed by the key and ETag
    /// of the read.
    fn parse(
        &mut self,
        i: usize,
        obj: &LogObject,
        read: ReadObject,
        table_for: &impl Fn(&str) -> String,
    ) -> Result<()> {
        self.out.bytes_read += read.bytes.len();
        let read_obj = LogObject {
            bucket: obj.bucket.clone(),
            key: read.key,
            alt_key: None,
            etag: Some(read.etag),
            event_time: None,
        };
        // Two notifications of one batch for the same object (e.g. its key encoded
        // and decoded): read twice, parsed once.
        if !self.seen_read.insert(read_obj.clone()) {
            self.settle(i, ObjectOutcome::AlreadyCommitted);
            return Ok(());
        }
        let parsed_obj = parse_object(
            &read_obj,
            &read.bytes,
            self.pipeline,
            self.limits,
            table_for,
        )?;
        self.out.read_objs[i] = read_obj;
        let obj = &self.out.read_objs[i];
        match parsed_obj {
            Ok(p) => {
                self.round_bytes += p.inflated;
                self.out.letters.extend(p.letters.iter().cloned());
                self.out.parsed.push(Some(p));
            }
            Err((reason, read_bytes)) => {
                // Charged what it read, not the whole `max_inflated`: a small
                // refused object does not defer the good ones after it.
                self.round_bytes += read_bytes;
                tracing::warn!(object = %obj.uri(), "log object refused by a limit; recorded in dead letters");
                self.out
                    .letters
                    .push(object_letter(obj, self.pipeline, "refused", reason.clone()));
                self.out.outcomes[i] = Some(ObjectOutcome::Refused { reason });
                self.out.parsed.push(None);
            }
        }
        Ok(())
    }
}

/// Why `obj` must not be read, if so: a notification names any bucket and key (anyone who
/// can send to the queue writes it), so only the configured source buckets are read, and
/// never an object inside the lake (whose config may hold credentials).
fn refusal(config: &PipelineConfig, lake_root: &Url, obj: &LogObject) -> Option<String> {
    let sources = &config.access_logs;
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
            lakestream_formats::config::LOG_BUCKETS_ENV
        ));
    }
    let root = lake_root;
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
