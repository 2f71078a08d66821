//! `lakestream demo`, the CDC part: the two families of `examples/cdc-crm.toml` on the demo's
//! lake. Debezium-shaped change events of two PostgreSQL tables (snapshot rows, inserts,
//! updates, a delete with its tombstone, a new column, and an update re-sent out of order after
//! a "connector restart") go through the msk-ingest handler into bronze; one AWS DMS delivery
//! (a full load, then a CDC file with I/U/D rows) goes through the s3-log-ingest handler; the
//! refine function applies both families (SCD1 for Debezium, SCD2 for DMS) with the change data
//! feed; then silver, the SCD2 history and the change feed are printed.

use super::demo::msk_event;
use anyhow::{Context, Result};
use lakestream_core::access_log::{AccessLogIngestor, LocalObjects};
use lakestream_core::{KafkaIngestor, Lake, SystemClock};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::kafka::KafkaEvent;
use lakestream_formats::record::{RecordValue, SourceRecord};
use serde_json::{Value, json};
use std::sync::Arc;

/// The example families (`examples/cdc-crm.toml`), compiled in.
const FAMILIES: &str = include_str!("../../../../examples/cdc-crm.toml");

/// The demo config with the example CDC families added (when it declares none).
pub fn with_families(config: &PipelineConfig) -> Result<PipelineConfig> {
    let mut config = config.clone();
    if config.cdc.is_empty() {
        config.cdc = PipelineConfig::from_toml(FAMILIES)?.cdc;
    }
    Ok(config)
}

/// One Debezium change event (JSON converter, `schemas.enable=false`) of `crm.public.<table>`.
struct Change {
    table: &'static str,
    offset: i64,
    key: Value,
    /// `None`: a tombstone.
    value: Option<Value>,
}

fn envelope(table: &str, op: &str, before: Value, after: Value, lsn: u64) -> Value {
    let ts_ms = 1_764_412_000_000 + lsn as i64;
    json!({
        "before": before, "after": after, "op": op, "ts_ms": ts_ms + 50, "transaction": null,
        "source": {"version": "2.7.3.Final", "connector": "postgresql", "name": "crm",
            "ts_ms": ts_ms, "snapshot": if op == "r" { "true" } else { "false" }, "db": "crm",
            "schema": "public", "table": table, "txId": 500 + lsn, "lsn": lsn, "xmin": null}
    })
}

fn customer(id: i64, name: &str, tier: &str) -> Value {
    json!({"id": id, "name": name, "tier": tier})
}

fn order(id: i64, customer: i64, amount: &str) -> Value {
    json!({"order_id": id, "customer_id": customer, "amount": amount, "created_at": 1_764_412_000_000_i64 + id})
}

/// The change stream, in delivery order; the last event is the out-of-order re-send.
fn changes() -> Vec<Vec<Change>> {
    vec![
        snapshot_and_inserts(),
        updates_and_a_delete(),
        resent_update(),
    ]
}

/// A change of `crm.public.customers` (key `id`).
fn c(offset: i64, key: i64, value: Option<Value>) -> Change {
    Change {
        table: "customers",
        offset,
        key: json!({"id": key}),
        value,
    }
}

/// A change of `crm.public.orders` (key `order_id`).
fn o(offset: i64, key: i64, value: Option<Value>) -> Change {
    Change {
        table: "orders",
        offset,
        key: json!({"order_id": key}),
        value,
    }
}

/// Event 1: the snapshot of two customers, a new customer and two orders.
fn snapshot_and_inserts() -> Vec<Change> {
    let null = Value::Null;
    vec![
        c(
            0,
            1,
            Some(envelope(
                "customers",
                "r",
                null.clone(),
                customer(1, "alice", "silver"),
                100,
            )),
        ),
        c(
            1,
            2,
            Some(envelope(
                "customers",
                "r",
                null.clone(),
                customer(2, "bob", "silver"),
                100,
            )),
        ),
        c(
            2,
            3,
            Some(envelope(
                "customers",
                "c",
                null.clone(),
                customer(3, "carol", "basic"),
                200,
            )),
        ),
        o(
            0,
            10,
            Some(envelope(
                "orders",
                "c",
                null.clone(),
                order(10, 1, "20.00"),
                210,
            )),
        ),
        o(
            1,
            11,
            Some(envelope(
                "orders",
                "c",
                null.clone(),
                order(11, 3, "7.50"),
                220,
            )),
        ),
    ]
}

/// Event 2: an update, a delete with its tombstone, a customer with a new column, an order
/// update.
fn updates_and_a_delete() -> Vec<Change> {
    let null = Value::Null;
    vec![
        c(
            3,
            1,
            Some(envelope(
                "customers",
                "u",
                null.clone(),
                customer(1, "alice", "gold"),
                300,
            )),
        ),
        c(
            4,
            2,
            Some(envelope(
                "customers",
                "d",
                json!({"id": 2}),
                null.clone(),
                400,
            )),
        ),
        c(5, 2, None),
        c(
            6,
            4,
            Some(envelope(
                "customers",
                "c",
                null.clone(),
                json!({"id": 4, "name": "dave", "tier": "basic", "email": "dave@example.com"}),
                500,
            )),
        ),
        o(
            2,
            10,
            Some(envelope(
                "orders",
                "u",
                null.clone(),
                order(10, 1, "25.00"),
                350,
            )),
        ),
    ]
}

/// Event 3: the out-of-order re-send.
fn resent_update() -> Vec<Change> {
    let null = Value::Null;
    // After a connector restart an older update of order 10 (position 320 < 350) arrives
    // again: the sequence keeps silver at 25.00.
    vec![o(
        3,
        10,
        Some(envelope("orders", "u", null, order(10, 1, "21.00"), 320)),
    )]
}

fn records(batch: &[Change]) -> Vec<SourceRecord> {
    batch
        .iter()
        .map(|ch| {
            let topic = format!("crm.public.{}", ch.table);
            let key = ch.key.to_string();
            let mut r = match &ch.value {
                Some(v) => SourceRecord::new(
                    &topic,
                    0,
                    ch.offset,
                    1_764_412_000_000,
                    v.to_string().as_bytes(),
                ),
                None => SourceRecord::new(&topic, 0, ch.offset, 1_764_412_000_000, b""),
            };
            if ch.value.is_none() {
                r.value = RecordValue::Null;
            }
            r.with_key(key.as_bytes())
        })
        .collect()
}

/// One Debezium event through the msk-ingest handler into bronze.
async fn debezium(ingestor: &KafkaIngestor, i: usize, batch: &[Change]) -> Result<()> {
    let ev: KafkaEvent = serde_json::from_value(msk_event(&records(batch)))?;
    let out = msk_ingest::handle(ingestor, ev).await?;
    let r = &out.report;
    println!(
        "debezium event {}: {} records -> written {}, tombstones skipped {}, dead-lettered {}",
        i + 1,
        r.received,
        r.written,
        r.tombstones_skipped,
        r.dead_lettered
    );
    Ok(())
}

/// One DMS delivery of `dbo.accounts` (CSV without header: `Op` on CDC rows, then the commit
/// time, then the columns): the full load, then a CDC file that updates account 1 twice (in
/// commit order), deletes account 2 and inserts account 3.
const DMS_FILES: [(&str, &str); 2] = [
    (
        "LOAD00000001.csv",
        "2026-11-29 10:00:00.000000,1,Acme,basic\n2026-11-29 10:00:00.000000,2,Globex,basic\n",
    ),
    (
        "20261129-113401000.csv",
        "U,2026-11-29 11:34:01.000000,1,Acme,premium\nI,2026-11-29 11:34:02.000000,3,Initech,basic\n\
         D,2026-11-29 11:34:03.000000,2,Globex,basic\nU,2026-11-29 11:40:00.000000,1,Acme,enterprise\n",
    ),
];

/// The DMS delivery through the s3-log-ingest handler (S3 notifications in an SQS event; a
/// directory stands for the landing bucket).
async fn dms(config: &PipelineConfig, lake: &Lake) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("lakestream-demo-dms-{}", std::process::id()));
    let folder = dir.join("crm-landing/dms/legacy/dbo/accounts");
    std::fs::create_dir_all(&folder)?;
    let mut records = Vec::new();
    for (i, (name, body)) in DMS_FILES.iter().enumerate() {
        std::fs::write(folder.join(name), body)?;
        let etag = format!("{:x}", <md5::Md5 as md5::Digest>::digest(body.as_bytes()));
        let note = json!({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3",
            "eventName": "ObjectCreated:Put", "eventTime": "2026-11-29T11:45:00.000Z",
            "s3": {"bucket": {"name": "crm-landing"},
                   "object": {"key": format!("dms/legacy/dbo/accounts/{name}"), "eTag": etag}}}]});
        records.push(
            json!({"messageId": format!("dms-{i}"), "receiptHandle": "rh",
            "body": note.to_string(), "eventSource": "aws:sqs"}),
        );
    }
    let event: aws_lambda_events::sqs::SqsEvent =
        serde_json::from_value(json!({"Records": records}))?;
    let ingestor =
        AccessLogIngestor::with_lake(config.clone(), lake.clone(), Arc::new(SystemClock));
    let (response, report) =
        s3_log_ingest::handle_sqs(&ingestor, &LocalObjects(dir.clone()), event).await;
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "dms delivery: {} objects -> {} messages acknowledged, {} to retry",
        DMS_FILES.len(),
        report.acknowledged,
        response.batch_item_failures.len()
    );
    Ok(())
}

/// Run the CDC part on `lake`: each Debezium event is followed by a refine run (as the
/// schedule would), so silver's change feed shows inserts, updates and a delete.
pub async fn run(config: &PipelineConfig, lake: &Lake) -> Result<()> {
    println!(
        "CDC: the families of examples/cdc-crm.toml (Debezium crm.public.*, SCD1; DMS legacy, SCD2)"
    );
    let ingestor = KafkaIngestor::with_lake(config.clone(), lake.clone(), Arc::new(SystemClock));
    for (i, batch) in changes().iter().enumerate() {
        debezium(&ingestor, i, batch).await?;
        if i == 0 {
            dms(config, lake).await?;
        }
        super::refine::run(config.clone(), lake.clone(), &[], 10_000, false)
            .await
            .context("applying the CDC families")?;
    }
    println!();
    for table in ["silver/crm/public/customers", "silver/crm/public/orders"] {
        super::inspect::show(lake, table, 10).await?;
        println!();
    }
    println!("SCD2 history of the DMS table (__END_AT null: the current version):");
    super::inspect::show(lake, "silver/legacy/dbo/accounts", 20).await?;
    println!(
        "\nchange data feed of silver/crm/public/customers (Delta _change_data files; a version that only inserts: its adds):"
    );
    super::inspect::changes(lake, "silver/crm/public/customers", 0, None, 20, false).await?;
    println!();
    Ok(())
}
