//! `lakestream demo`: the seed pipeline's raw layer, end to end on a local lake. Generated
//! orders and memberships are packed into MSK-shaped events (base64 values, per-partition
//! offsets, several partitions per topic) and pushed through the msk-ingest handler.

use anyhow::Result;
use base64::Engine as _;
use lakestream_core::seed::SeedGenerator;
use lakestream_core::{Ingestor, Lake, PipelineConfig, RecordValue, SourceRecord, SystemClock};
use lakestream_lambda::kafka::KafkaEvent;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Records per MSK event.
const BATCH: usize = 250;

/// Pack records into one MSK event exactly as Lambda delivers them.
pub fn msk_event(records: &[SourceRecord]) -> serde_json::Value {
    let mut by_key: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for r in records {
        let value = match &r.value {
            RecordValue::Bytes(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
            RecordValue::Invalid { raw, .. } => json!(raw),
            RecordValue::Null => serde_json::Value::Null,
        };
        by_key
            .entry(format!("{}-{}", r.topic, r.partition))
            .or_default()
            .push(json!({
                "topic": r.topic, "partition": r.partition, "offset": r.offset,
                "timestamp": r.timestamp_ms.unwrap_or(-1), "timestampType": "CREATE_TIME",
                "value": value, "headers": []
            }));
    }
    json!({
        "eventSource": "aws:kafka",
        "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/demo/751d2973-a626-431c-9d4e-d7975eb44dd7-2",
        "bootstrapServers": "b-1.demo.kafka.us-east-1.amazonaws.com:9098",
        "records": by_key
    })
}

/// Run the demo.
pub async fn run(config: PipelineConfig, n: usize) -> Result<()> {
    let started = Instant::now();
    let lake = Lake::new(&config.lake)?;
    println!("lake: {}", lake.root());
    let ingestor = Ingestor::new(config.clone(), Arc::new(SystemClock))?;
    let start = chrono::Utc::now() - chrono::Duration::seconds(n as i64);
    let mut records = SeedGenerator::new(2022, start, 1000).records(n);
    // One poison record and one membership with a field the schema does not have yet.
    if let Some(r) = records.iter_mut().find(|r| r.topic == "orders") {
        r.value = RecordValue::Bytes(br#"{"order_id":"seven","order_owner":"x"}"#.to_vec());
    }
    if let Some(r) = records.iter_mut().rev().find(|r| r.topic == "members") {
        r.value = RecordValue::Bytes(
            br#"{"order_owner":"alice","membership":"platinum","timestamp":"2026-01-01T00:00:00Z","referral_code":"SPRING"}"#.to_vec(),
        );
    }
    let mut events: Vec<serde_json::Value> = records.chunks(BATCH).map(msk_event).collect();
    if let Some(first) = events.first().cloned() {
        events.push(first); // a redelivery: Lambda is at-least-once
    }
    let (mut written, mut dead, mut dups) = (0, 0, 0);
    for (i, ev) in events.iter().enumerate() {
        let ev: KafkaEvent = serde_json::from_value(ev.clone())?;
        let out = msk_ingest::handle(&ingestor, ev).await?;
        let r = &out.report;
        written += r.written;
        dead += r.dead_lettered;
        dups += r.duplicates;
        println!(
            "event {:>3}: {:>4} records -> written {:>4}, dead-lettered {}, duplicates {:>3}{}",
            i + 1,
            r.received,
            r.written,
            r.dead_lettered,
            r.duplicates,
            if i + 1 == events.len() {
                "   (redelivery of event 1)"
            } else {
                ""
            }
        );
    }
    println!(
        "\n{} records in {} events: {written} written, {dead} dead-lettered, {dups} duplicates skipped ({:.2}s)\n",
        n,
        events.len(),
        started.elapsed().as_secs_f64()
    );
    for table in ["raw/order", "raw/member", config.dead_letter_table.as_str()] {
        crate::show(&lake, table, 5).await?;
        println!();
    }
    println!(
        "Look around: lakestream tables --lake {}   |   lakestream show raw/member --lake {}",
        config.lake.root, config.lake.root
    );
    Ok(())
}
