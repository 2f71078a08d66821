//! The msk-ingest handler with the real event samples under `events/`: against a recording
//! sink (adapter behaviour) and against the core ingestor on a filesystem lake.

use lakestream_core::{Error, FixedClock, IngestReport, KafkaIngestor};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::kafka::KafkaEvent;
use lakestream_formats::record::{RecordValue, SourceRecord};
use lakestream_testkit::EXAMPLE;
use lambda_runtime::Diagnostic;
use msk_ingest::{RecordSink, handle};
use std::sync::{Arc, Mutex};

const ORDERS: &[u8] = include_bytes!("../../../../events/msk-orders.json");
const REPLAY: &[u8] = include_bytes!("../../../../events/msk-replay.json");
const BAD: &[u8] = include_bytes!("../../../../events/msk-bad-records.json");
const SELF_MANAGED: &[u8] = include_bytes!("../../../../events/msk-self-managed.json");

#[derive(Default)]
struct Recording(Mutex<Vec<SourceRecord>>, Option<fn() -> Error>);

impl RecordSink for Recording {
    async fn ingest(&self, records: &[SourceRecord]) -> lakestream_core::Result<IngestReport> {
        if let Some(fail) = self.1 {
            return Err(fail());
        }
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(records);
        }
        Ok(IngestReport {
            received: records.len(),
            written: records.len(),
            ..Default::default()
        })
    }
    async fn dead_letter(
        &self,
        records: &[SourceRecord],
        _reason: &str,
    ) -> lakestream_core::Result<IngestReport> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(records);
        }
        Ok(IngestReport {
            received: records.len(),
            dead_lettered: records.len(),
            ..Default::default()
        })
    }
}

fn event(bytes: &[u8]) -> KafkaEvent {
    let parsed = KafkaEvent::from_json(bytes);
    assert!(parsed.is_ok(), "sample event does not parse: {parsed:?}");
    parsed.unwrap_or_default()
}

#[tokio::test]
async fn records_reach_the_sink_in_partition_offset_order() -> anyhow::Result<()> {
    let sink = Recording::default();
    let out = handle(&sink, event(ORDERS)).await?;
    assert_eq!(out.report.received, 6);
    let got = sink
        .0
        .lock()
        .map(|v| {
            v.iter()
                .map(|r| (r.partition, r.offset))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    assert_eq!(
        got,
        [
            (0, 1204310),
            (0, 1204311),
            (1, 1205207),
            (1, 1205208),
            (2, 1206118),
            (2, 1206119)
        ]
    );
    let metrics: serde_json::Value = serde_json::from_str(&out.metrics_line())?;
    assert_eq!(metrics["RecordsReceived"], 6.0);
    // Two metrics (each name is $0.30 a month); the counts are logged on the same line.
    let declared: Vec<&str> = metrics["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .map(|m| m.iter().filter_map(|d| d["Name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(declared, ["RecordsDeadLettered", "MaxRecordLagMs"]);

    let sink = Recording::default();
    handle(&sink, event(SELF_MANAGED)).await?;
    let recs = sink.0.lock().map(|v| v.clone()).unwrap_or_default();
    assert_eq!(recs[0].timestamp_ms, None, "timestamp -1 means none");
    assert_eq!(recs[0].offset, 1204900, "offset given as a string");
    Ok(())
}

#[tokio::test]
async fn only_retryable_failures_fail_the_invocation_with_a_named_cause() {
    let sink = Recording(
        Mutex::default(),
        Some(|| Error::Contention {
            table: "raw/order".into(),
            attempts: 10,
            last: "x".into(),
        }),
    );
    let err = match handle(&sink, event(ORDERS)).await {
        Ok(_) => panic!("must fail"),
        Err(e) => e,
    };
    assert!(err.is_retryable());
    let d = Diagnostic::from(err);
    assert_eq!(d.error_type, "Lakestream.ContentionRetryable");
    assert!(d.error_message.contains("raw/order"), "{}", d.error_message);
}

#[tokio::test]
async fn sample_events_through_the_real_ingestor() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut cfg = PipelineConfig::from_toml(EXAMPLE)?;
    cfg.lake.root = dir.path().to_string_lossy().into_owned();
    let clock =
        FixedClock::new(chrono::DateTime::from_timestamp(1_764_400_000, 0).unwrap_or_default());
    let ing = KafkaIngestor::new(cfg, Arc::new(clock))?;

    let first = handle(&ing, event(ORDERS)).await?.report;
    assert_eq!((first.received, first.written), (6, 6));
    let again = handle(&ing, event(ORDERS)).await?.report;
    assert_eq!((again.written, again.duplicates), (0, 6));
    let resplit = handle(&ing, event(REPLAY)).await?.report;
    assert_eq!((resplit.written, resplit.duplicates), (2, 4));

    let bad = handle(&ing, event(BAD)).await?.report;
    assert_eq!((bad.received, bad.written, bad.dead_lettered), (10, 1, 9));
    let ev = event(BAD);
    let invalid = ev
        .into_source_records()
        .into_iter()
        .filter(|r| matches!(r.value, RecordValue::Invalid { .. }))
        .count();
    assert_eq!(invalid, 1, "the not-base64 value is carried, not dropped");
    Ok(())
}

/// A permanent failure (retrying cannot help) dead-letters the batch and the invocation
/// succeeds, so one poison batch does not block its partition until the records expire.
#[tokio::test]
async fn permanent_failures_dead_letter_the_batch_and_succeed() -> anyhow::Result<()> {
    let sink = Recording(
        Mutex::default(),
        Some(|| Error::Schema {
            table: "raw/order".into(),
            reason: "column `x` is required".into(),
        }),
    );
    let out = handle(&sink, event(ORDERS)).await?;
    assert_eq!(
        (
            out.report.received,
            out.report.dead_lettered,
            out.report.written
        ),
        (6, 6, 0)
    );
    let letters = sink.0.lock().map(|v| v.len()).unwrap_or_default();
    assert_eq!(letters, 6, "every record of the batch went to dead letters");
    Ok(())
}
