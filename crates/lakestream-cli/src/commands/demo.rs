//! `lakestream demo`: the seed pipeline end to end on a local lake. Generated orders and
//! memberships are packed into MSK-shaped events (base64 values, per-partition offsets, several
//! partitions per topic) and pushed through the msk-ingest handler; then the refine jobs of the
//! config (the curated interval join) run.

use anyhow::{Context, Result};
use base64::Engine as _;
use lakestream_core::seed::SeedGenerator;
use lakestream_core::{KafkaIngestor, Lake, SystemClock};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::kafka::KafkaEvent;
use lakestream_formats::record::{RecordValue, SourceRecord};
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
        let encode = |v: &RecordValue| match v {
            RecordValue::Bytes(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
            RecordValue::Invalid { raw, .. } => json!(raw),
            RecordValue::Null => serde_json::Value::Null,
        };
        let (value, key) = (encode(&r.value), encode(&r.key));
        by_key
            .entry(format!("{}-{}", r.topic, r.partition))
            .or_default()
            .push(json!({
                "topic": r.topic, "partition": r.partition, "offset": r.offset,
                "timestamp": r.timestamp_ms.unwrap_or(-1), "timestampType": "CREATE_TIME",
                "value": value, "headers": []
            }));
        if !key.is_null()
            && let Some(last) = by_key
                .get_mut(&format!("{}-{}", r.topic, r.partition))
                .and_then(|v| v.last_mut())
        {
            last["key"] = key;
        }
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
    let lake = Lake::new(&config.lake)?;
    println!("lake: {}", lake.root());
    ingest_seed(&config, n).await?;
    access_logs(&config).await?;
    compact_raw(&lake).await?;
    // The curated job: orders joined with their owner's membership of the hour before.
    super::refine::run(config.clone(), lake.clone(), &[], 10_000, false).await?;
    println!();
    show_tables(&config, &lake).await?;
    gold(&config, &lake).await?;
    super::demo_cdc::run(&super::demo_cdc::with_families(&config)?, &lake).await?;
    print_next_steps(&config.lake.root);
    Ok(())
}

/// `n` seed records (one poison record, one membership with a new field) as MSK events, the
/// first one delivered twice, through the msk-ingest handler.
async fn ingest_seed(config: &PipelineConfig, n: usize) -> Result<()> {
    let started = Instant::now();
    let ingestor = KafkaIngestor::new(config.clone(), Arc::new(SystemClock))?;
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
    Ok(())
}

/// Streaming leaves many small files: compact them (what the scheduled maintenance does).
async fn compact_raw(lake: &Lake) -> Result<()> {
    let opts = lakestream_core::maintenance::CompactOptions {
        min_small_files: 2,
        ..Default::default()
    };
    for table in ["raw/order", "raw/member"] {
        let r = lakestream_core::maintenance::compact(
            lake,
            table,
            &opts,
            chrono::Utc::now(),
            &|_, _| {},
        )
        .await?;
        println!(
            "optimize {table}: {} -> {} files ({} partitions, dataChange=false)",
            r.files_before, r.files_after, r.partitions_compacted
        );
    }
    println!();
    Ok(())
}

/// The first rows of every table the demo wrote.
async fn show_tables(config: &PipelineConfig, lake: &Lake) -> Result<()> {
    for table in [
        "raw/order",
        "raw/member",
        "curated/order",
        "access_logs/datalake-prod",
        config.dead_letter_table.as_str(),
    ] {
        super::inspect::show(lake, table, 5).await?;
        println!();
    }
    // What the dashboards read: the latest value and membership of each of the six orders.
    super::inspect::show(lake, "processed/order", 10).await?;
    println!();
    Ok(())
}

/// Commands to look around the demo's lake with.
fn print_next_steps(root: &str) {
    println!("Look around:");
    println!("  lakestream tables --lake {root}");
    println!(
        "  lakestream history raw/order --lake {root}           # every commit, the compaction last"
    );
    println!(
        "  lakestream show raw/order --version 0 --lake {root}  # time travel (or --as-of TIME)"
    );
    for line in [
        format!(
            "lakestream changes raw/order --from 1 --lake {root}  # rows inserted/deleted since v1"
        ),
        format!(
            "lakestream lag --lake {root}                         # offsets committed, refine progress"
        ),
        format!("lakestream report access --since 3650 --html report.html --lake {root}"),
        format!(
            "lakestream ddl raw/order --manifest --lake {root}    # Athena CREATE EXTERNAL TABLE"
        ),
        format!(
            "cargo run --features sql --bin lakestream -- sql \"SELECT count(*) FROM raw_order\" --lake {root}"
        ),
        format!(
            "lakestream catalog sync --lake {root}                # every table into the Glue catalog (AWS_ENDPOINT_URL for an emulator)"
        ),
        format!(
            "lakestream changes silver/crm/public/customers --from 0 --lake {root}  # the change data feed"
        ),
        format!(
            "lakestream history silver/legacy/dbo/accounts --lake {root}  # the SCD2 table's commits"
        ),
    ] {
        println!("  {line}");
    }
}

/// The access-log pipeline: log objects (one gzip) in a directory standing for the raw-logs
/// bucket, S3 notifications in an SQS event, the s3-log-ingest handler, per-bucket tables.
async fn access_logs(config: &PipelineConfig) -> Result<()> {
    use lakestream_core::access_log::generate::generate_lines;
    use lakestream_core::access_log::{AccessLogIngestor, LocalObjects};
    use std::io::Write;
    let dir = std::env::temp_dir().join(format!("lakestream-demo-logs-{}", std::process::id()));
    let logs = dir.join("raw-logs/logs");
    std::fs::create_dir_all(&logs)?;
    let start = chrono::Utc::now() - chrono::Duration::hours(3);
    let mut bodies = Vec::new();
    for (i, name) in [
        "2026-11-29-08-00-00-A1B2C3D4E5F6",
        "2026-11-29-09-00-00-B2C3D4E5F6A1",
        "2026-11-29-10-00-00-C3D4E5F6A1B2.gz",
    ]
    .iter()
    .enumerate()
    {
        let text = generate_lines(
            i as u64,
            400,
            &["datalake-prod", "analytics-archive"],
            start + chrono::Duration::hours(i as i64),
        );
        let text = if i == 1 {
            format!("{text}this line is not an access log record\n")
        } else {
            text
        };
        if name.ends_with(".gz") {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(text.as_bytes())?;
            std::fs::write(logs.join(name), gz.finish()?)?;
        } else {
            std::fs::write(logs.join(name), text)?;
        }
        bodies.push(json!({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
            "s3": {"bucket": {"name": "raw-logs"}, "object": {"key": format!("logs/{name}"), "eTag": format!("etag{i}")}}}]}));
    }
    bodies.push(json!({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "raw-logs"}));
    let records: Vec<serde_json::Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| json!({"messageId": format!("msg-{i}"), "receiptHandle": "rh", "body": b.to_string(), "eventSource": "aws:sqs"}))
        .collect();
    let event: aws_lambda_events::sqs::SqsEvent =
        serde_json::from_value(json!({"Records": records}))?;
    // The demo's own directory stands for the raw-logs bucket: read it whatever the config says.
    let mut config = config.clone();
    if !config.access_logs.is_source("raw-logs") {
        config.access_logs.source_buckets.push("raw-logs".into());
    }
    let ingestor = AccessLogIngestor::new(config, Arc::new(SystemClock))?;
    let started = Instant::now();
    let (response, report) =
        s3_log_ingest::handle_sqs(&ingestor, &LocalObjects(dir.clone()), event).await;
    println!(
        "access logs: {} messages ({} test event) -> {} rows in {} tables, {} lines dead-lettered, {} to retry ({:.2}s)\n",
        report.acknowledged + report.failed.len(),
        report.test_events,
        report.objects.rows_written,
        report
            .objects
            .versions
            .keys()
            .filter(|t| t.starts_with("access_logs/"))
            .count(),
        report.objects.lines_dead_lettered,
        response.batch_item_failures.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The gold table (hourly totals per owner) and a back-fill: a CSV of last year's orders loaded
/// into raw/order exactly once (a second load writes nothing), picked up by the next run.
async fn gold(config: &PipelineConfig, lake: &Lake) -> Result<()> {
    super::inspect::show(lake, "gold/order_hourly", 5).await?;
    let csv = "order_id,order_owner,order_value,timestamp\n\
               9001,backfill,120,2025-12-01T09:15:00Z\n\
               9002,backfill,80,2025-12-01T09:45:00Z\n\
               9003,backfill,,2025-12-01T10:05:00Z\n";
    let file = lakestream_core::load::LoadFile {
        name: "history/orders-2025-12-01.csv".into(),
        bytes: csv.as_bytes().to_vec().into(),
        format: lakestream_core::load::FileFormat::Csv,
    };
    let settings = (&config.commit).into();
    for attempt in ["load", "load again"] {
        let r = lakestream_core::load::load_file(
            lake,
            config,
            &settings,
            chrono::Utc::now(),
            "raw/order",
            &file,
        )
        .await?;
        println!(
            "{attempt} {} into raw/order: {}",
            file.name,
            match r.version {
                Some(v) => format!("{} rows at version {v}", r.rows),
                None => "already loaded, nothing written".into(),
            }
        );
    }
    super::refine::run(config.clone(), lake.clone(), &["gold".into()], 100, false).await?;
    println!("\nThe back-filled day in gold (`lakestream sql` or any Delta reader):");
    let b = lakestream_core::read::read_table(lake, "gold/order_hourly", None).await?;
    let owners = deltalake::arrow::compute::cast(
        b.column_by_name("order_owner").context("order_owner")?,
        &deltalake::arrow::datatypes::DataType::Utf8,
    )?;
    let keep = deltalake::arrow::compute::kernels::cmp::eq(
        &owners,
        &deltalake::arrow::array::StringArray::new_scalar("backfill"),
    )?;
    let rows = deltalake::arrow::compute::filter_record_batch(&b, &keep)?;
    println!("{}", arrow::util::pretty::pretty_format_batches(&[rows])?);
    println!();
    Ok(())
}
