//! The read half of an access-log ingest call: for each notified object, refuse what must not be
//! read (a bucket that is not a configured source, an object inside the lake), fetch the rest
//! within the size limits, parse their lines into per-table rows and collect every dead letter
//! (refused, missing, superseded objects and bad lines). Nothing is committed here: the
//! ingestor ([`super::ingest`]) commits the letters first, then the rows.

use super::object::{Limits, Parsed, object_letter, parse_object};
use crate::dead_letter::DeadLetter;
use crate::error::Result;
use crate::object::ObjectOutcome;
use crate::object::{Fetched, ObjectSource};
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
    let pipeline = config.pipeline.as_str();
    let mut bytes_read = 0;
    let mut outcomes: Vec<Option<ObjectOutcome>> = vec![None; objects.len()];
    let mut parsed: Vec<Option<Parsed>> = Vec::with_capacity(objects.len());
    let mut letters: Vec<DeadLetter> = Vec::new();
    let mut seen = HashSet::new();
    // The objects as read (key and ETag of the read): what their rows and letters are keyed by.
    let mut read_objs: Vec<LogObject> = objects.to_vec();
    let mut seen_read = HashSet::new();
    let cfg = &config.access_logs;
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
        if let Some(reason) = refusal(config, lake_root, obj) {
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
                bytes_read += read.bytes.len();
                let read_obj = LogObject {
                    bucket: obj.bucket.clone(),
                    key: read.key,
                    alt_key: None,
                    etag: Some(read.etag),
                    event_time: None,
                };
                // Two notifications of one batch for the same object (e.g. its key encoded
                // and decoded): read twice, parsed once.
                if !seen_read.insert(read_obj.clone()) {
                    outcomes[i] = Some(ObjectOutcome::AlreadyCommitted);
                    parsed.push(None);
                    continue;
                }
                let parsed_obj =
                    parse_object(&read_obj, &read.bytes, pipeline, limits, &table_for)?;
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
    Ok(Gathered {
        outcomes,
        parsed,
        read_objs,
        letters,
        bytes_read,
    })
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
