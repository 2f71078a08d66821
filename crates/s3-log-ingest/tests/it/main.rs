//! s3-log-ingest against the S3 emulator (S3 + SQS on 127.0.0.1): the sample SQS event with
//! every envelope, a missing object, a test event and an unreachable bucket; redelivery; and
//! drain mode against a real queue.

mod drain_reserve;
mod handler;

use aws_sdk_s3::config::{Credentials, Region};
use lakestream_core::access_log::AccessLogIngestor;
use lakestream_core::{FixedClock, Lake, read};
use lakestream_formats::config::PipelineConfig;
use s3_log_ingest::drain::{DrainSettings, SqsQueue, drain};
use s3_log_ingest::s3::S3Objects;
use std::sync::Arc;
use std::time::Duration;

const PLAIN: &[u8] =
    include_bytes!("../../../../tests/fixtures/access-logs/2026-11-29-08-00-00-A1B2C3D4E5F6.log");
const GZIP: &[u8] = include_bytes!(
    "../../../../tests/fixtures/access-logs/2026-11-29-09-00-00-F6E5D4C3B2A1.log.gz"
);
const SQS_EVENT: &str = include_str!("../../../../events/sqs-s3-notifications.json");
const DIRECT: &str = include_str!("../../../../events/s3-notification.json");
const SNS: &str = include_str!("../../../../events/s3-notification-sns.json");
const TEST_EVENT: &str = include_str!("../../../../events/s3-test-event.json");
const EB_LINE: &str = "owner eventbridge-demo [29/Nov/2026:10:00:00 +0000] 1.2.3.4 req ID REST.GET.OBJECT k \"GET /k HTTP/1.1\" 200 - 1 1 1 1 \"-\" \"ua\" -\n";

struct Env {
    endpoint: String,
    s3: aws_sdk_s3::Client,
    sqs: aws_sdk_sqs::Client,
}

async fn env() -> anyhow::Result<Option<Env>> {
    let Some(endpoint) = lakestream_testkit::s3_endpoint() else {
        return Ok(None);
    };
    let creds = Credentials::new("test", "test", None, None, "test");
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::new()
            .behavior_version_latest()
            .endpoint_url(&endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(creds.clone())
            .force_path_style(true)
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::new()
            .behavior_version_latest()
            .endpoint_url(&endpoint)
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(creds)
            .build(),
    );
    if let Err(e) = s3.create_bucket().bucket("raw-logs").send().await {
        // Created by an earlier test of this run: anything else is a broken emulator.
        let exists = e
            .as_service_error()
            .is_some_and(|e| e.is_bucket_already_owned_by_you() || e.is_bucket_already_exists());
        anyhow::ensure!(exists, "creating the raw-logs bucket: {e:?}");
    }
    for (key, body) in [
        ("logs/2026-11-29-08-00-00-A1B2C3D4E5F6", PLAIN),
        ("logs/2026-11-29-09-00-00-F6E5D4C3B2A1.gz", GZIP),
        ("logs/2026-11-29-10-00-00-0A1B2C3D4E5F", EB_LINE.as_bytes()),
    ] {
        s3.put_object()
            .bucket("raw-logs")
            .key(key)
            .body(body.to_vec().into())
            .send()
            .await?;
    }
    Ok(Some(Env { endpoint, s3, sqs }))
}

/// An access-log ingestor on a fresh lake on the emulator (the endpoint of `env`).
fn ingestor(env: &Env, name: &str) -> anyhow::Result<(AccessLogIngestor, PipelineConfig)> {
    let mut cfg = lakestream_testkit::TestLake::new(lakestream_testkit::Backend::S3, name)?.config;
    cfg.lake.endpoint_url = Some(env.endpoint.clone());
    // The unreachable bucket is a configured source: its GET fails (retryable).
    cfg.access_logs
        .source_buckets
        .push("bucket-that-does-not-exist".into());
    let clock =
        FixedClock::new(chrono::DateTime::from_timestamp(1_795_939_200, 0).unwrap_or_default());
    Ok((AccessLogIngestor::new(cfg.clone(), Arc::new(clock))?, cfg))
}

async fn rows(cfg: &PipelineConfig, table: &str) -> anyhow::Result<usize> {
    let lake = Lake::new(&cfg.lake)?;
    Ok(read::read_table(&lake, table, None).await?.num_rows())
}

fn message(id: &str, body: &str) -> serde_json::Value {
    serde_json::json!({"messageId": id, "receiptHandle": format!("rh-{id}"), "body": body,
        "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:raw-logs-notifications", "awsRegion": "us-east-1"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_batch_exact_rows_and_exact_failures() -> anyhow::Result<()> {
    let Some(env) = env().await? else {
        return Ok(());
    };
    let (ing, cfg) = ingestor(&env, "sqs")?;
    let source = S3Objects::new(env.s3.clone());
    let mut event: serde_json::Value = serde_json::from_str(SQS_EVENT)?;
    let unreachable = DIRECT.replace("\"raw-logs\"", "\"bucket-that-does-not-exist\"");
    if let Some(records) = event["Records"].as_array_mut() {
        records.push(message("m-unreachable", &unreachable));
        records.push(message("m-garbage", "this is not a notification"));
    }
    let sqs_event: aws_lambda_events::sqs::SqsEvent = serde_json::from_value(event.clone())?;
    let (response, report) = s3_log_ingest::handle_sqs(&ing, &source, sqs_event).await;
    let failures: Vec<String> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(
        failures,
        ["m-unreachable"],
        "only the retryable one: {report:?}"
    );
    assert_eq!(
        (report.acknowledged, report.test_events, report.unusable),
        (6, 1, 1)
    );
    assert_eq!(rows(&cfg, "access_logs/datalake-prod").await?, 4);
    assert_eq!(rows(&cfg, "access_logs/analytics-archive").await?, 2);
    assert_eq!(rows(&cfg, "access_logs/amzn-s3-demo-bucket1").await?, 1);
    assert_eq!(rows(&cfg, "access_logs/eventbridge-demo").await?, 1);
    // 2 bad lines + the missing object + the garbage message.
    assert_eq!(rows(&cfg, "dead_letters").await?, 4);

    // Redelivery of the whole batch adds nothing, and fails the same message.
    let sqs_event: aws_lambda_events::sqs::SqsEvent = serde_json::from_value(event)?;
    let (again, _) = s3_log_ingest::handle_sqs(&ing, &source, sqs_event).await;
    assert_eq!(again.batch_item_failures.len(), 1);
    assert_eq!(rows(&cfg, "access_logs/datalake-prod").await?, 4);
    assert_eq!(rows(&cfg, "dead_letters").await?, 4);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_empties_the_queue_and_deletes_only_committed() -> anyhow::Result<()> {
    let Some(env) = env().await? else {
        return Ok(());
    };
    let (ing, cfg) = ingestor(&env, "drain")?;
    let source = S3Objects::new(env.s3.clone());
    let name = format!("drain-{}", lakestream_testkit::unique_suffix());
    let url = env
        .sqs
        .create_queue()
        .queue_name(&name)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            "300",
        )
        .send()
        .await?
        .queue_url
        .unwrap_or_default();
    let unreachable = DIRECT.replace("\"raw-logs\"", "\"bucket-that-does-not-exist\"");
    // 12 messages: more than one receive (10 at most), duplicates of one notification included.
    let mut bodies = vec![DIRECT, SNS, TEST_EVENT, unreachable.as_str()];
    bodies.extend(std::iter::repeat_n(DIRECT, 8));
    for body in bodies {
        env.sqs
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await?;
    }
    let queue = SqsQueue::new(env.sqs.clone(), url.clone());
    let settings = DrainSettings {
        messages_per_round: 10,
        reserve: Duration::from_secs(5),
        wait: Duration::from_secs(1),
    };
    let report = drain(&ing, &source, &queue, &settings, || {
        Duration::from_secs(600)
    })
    .await?;
    assert_eq!(
        (report.received, report.deleted, report.failed),
        (12, 11, 1),
        "{report:?}"
    );
    assert!(report.queue_empty);
    assert_eq!(
        report.rounds, 2,
        "one ingest round per full receive: {report:?}"
    );
    assert_eq!(
        rows(&cfg, "access_logs/datalake-prod").await?,
        4,
        "duplicate notification added nothing"
    );
    assert_eq!(rows(&cfg, "access_logs/analytics-archive").await?, 2);
    let attrs = env
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await?
        .attributes
        .unwrap_or_default();
    let count =
        |k: aws_sdk_sqs::types::QueueAttributeName| attrs.get(&k).cloned().unwrap_or_default();
    assert_eq!(
        count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages),
        "0"
    );
    assert_eq!(
        count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
        "1",
        "the failed message stays for redelivery"
    );
    Ok(())
}

/// An object overwritten before its first notification is processed: the notification names the
/// old ETag, so that notification ingests nothing (recorded, acknowledged), and the overwrite's
/// own notification ingests the new content once. Without `If-Match` the new content was
/// ingested under both ETags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_read_with_the_notified_etag() -> anyhow::Result<()> {
    let Some(env) = env().await? else {
        return Ok(());
    };
    let (ing, cfg) = ingestor(&env, "etag")?;
    let source = S3Objects::new(env.s3.clone());
    let key = format!("logs/overwritten-{}", lakestream_testkit::unique_suffix());
    let put = |body: &'static [u8]| {
        env.s3
            .put_object()
            .bucket("raw-logs")
            .key(&key)
            .body(body.to_vec().into())
            .send()
    };
    let old = put(PLAIN).await?.e_tag.unwrap_or_default();
    let new = put(EB_LINE.as_bytes()).await?.e_tag.unwrap_or_default();
    assert_ne!(old, new);
    let object = |etag: &str| lakestream_formats::notification::LogObject {
        bucket: "raw-logs".into(),
        key: key.clone(),
        alt_key: None,
        etag: Some(etag.trim_matches('"').to_string()),
        event_time: None,
    };
    let first = ing.ingest(&[object(&old)], &source).await?;
    assert!(!first.failed(&object(&old)), "acknowledged: {first:?}");
    assert_eq!(
        first.rows_written, 0,
        "the old ETag's content is gone: {first:?}"
    );
    let second = ing.ingest(&[object(&new)], &source).await?;
    assert_eq!(second.rows_written, 1, "{second:?}");
    assert_eq!(rows(&cfg, "access_logs/eventbridge-demo").await?, 1);
    Ok(())
}

/// Counts the objects fetched through it (issue 24 defect 2: a foreign object is never read).
struct Counting<'a> {
    inner: &'a S3Objects,
    fetched: std::sync::Mutex<Vec<String>>,
}

impl lakestream_core::access_log::ObjectSource for Counting<'_> {
    async fn fetch(
        &self,
        object: &lakestream_formats::notification::LogObject,
        max_bytes: u64,
    ) -> lakestream_core::Result<lakestream_core::access_log::Fetched> {
        if let Ok(mut f) = self.fetched.lock() {
            f.push(object.uri());
        }
        self.inner.fetch(object, max_bytes).await
    }
}

/// The dead letters' (object, error) pairs and every raw byte they kept, as text.
async fn letters(cfg: &PipelineConfig) -> anyhow::Result<(Vec<(String, String)>, String)> {
    use deltalake::arrow::array::{Array, AsArray};
    let lake = Lake::new(&cfg.lake)?;
    let batch = read::read_table(&lake, "dead_letters", None).await?;
    let col = |n: &str| -> anyhow::Result<Vec<Option<String>>> {
        let c = batch
            .column_by_name(n)
            .ok_or_else(|| anyhow::anyhow!("no column {n}"))?
            .as_string::<i32>();
        Ok((0..c.len())
            .map(|i| c.is_valid(i).then(|| c.value(i).to_string()))
            .collect())
    };
    let (uris, errors, raw) = (col("object_uri")?, col("error")?, col("raw_base64")?);
    let mut pairs: Vec<(String, String)> = uris
        .into_iter()
        .zip(errors)
        .map(|(u, e)| (u.unwrap_or_default(), e.unwrap_or_default()))
        .collect();
    pairs.sort();
    use base64::Engine;
    let raw = raw
        .into_iter()
        .flatten()
        .filter_map(|r| base64::engine::general_purpose::STANDARD.decode(r).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    Ok((pairs, raw))
}

/// Issue 24 defect 2: a notification naming the lake's own bucket (its config object, with a
/// credential in it) or any bucket that is not a configured source is dead-lettered with the
/// bucket and the setting named, without a GET, through the SQS trigger and the drain alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_buckets_are_dead_lettered_without_a_get() -> anyhow::Result<()> {
    let Some(env) = env().await? else {
        return Ok(());
    };
    for mode in ["sqs", "drain"] {
        let (ing, cfg) = ingestor(&env, &format!("foreign-{mode}"))?;
        let prefix = cfg
            .lake
            .root
            .trim_start_matches("s3://lakestream-test/")
            .to_string();
        let secret = format!("SECRET-{}", lakestream_testkit::unique_suffix());
        let config_key = format!("{prefix}/_config/lakestream.toml");
        let body = format!(
            "{}aws_secret_access_key = \"{secret}\"\n",
            EB_LINE.replace(" k ", &format!(" {secret} "))
        );
        env.s3
            .put_object()
            .bucket("lakestream-test")
            .key(&config_key)
            .body(body.into_bytes().into())
            .send()
            .await?;
        let lake_config = DIRECT
            .replace("\"raw-logs\"", "\"lakestream-test\"")
            .replace("logs/2026-11-29-08-00-00-A1B2C3D4E5F6", &config_key)
            .replace(
                "2b33f9666134609e014591e09dbd6b5c",
                "00000000000000000000000000000000",
            );
        let never = DIRECT.replace("\"raw-logs\"", "\"never-configured-bucket\"");
        assert_ne!(lake_config, DIRECT);
        let inner = S3Objects::new(env.s3.clone());
        let source = Counting {
            inner: &inner,
            fetched: Default::default(),
        };
        let bodies = [DIRECT, lake_config.as_str(), never.as_str()];
        if mode == "sqs" {
            let event = serde_json::json!({"Records": bodies.iter().enumerate()
                .map(|(i, b)| message(&format!("m{i}"), b)).collect::<Vec<_>>()});
            let (response, report) =
                s3_log_ingest::handle_sqs(&ing, &source, serde_json::from_value(event)?).await;
            assert!(
                response.batch_item_failures.is_empty(),
                "refused for good, not retried: {report:?}"
            );
        } else {
            let url = env
                .sqs
                .create_queue()
                .queue_name(format!("foreign-{}", lakestream_testkit::unique_suffix()))
                .send()
                .await?
                .queue_url
                .unwrap_or_default();
            for b in bodies {
                env.sqs
                    .send_message()
                    .queue_url(&url)
                    .message_body(b)
                    .send()
                    .await?;
            }
            let settings = DrainSettings {
                messages_per_round: 10,
                reserve: Duration::from_secs(5),
                wait: Duration::from_secs(1),
            };
            let queue = SqsQueue::new(env.sqs.clone(), url);
            let report = drain(&ing, &source, &queue, &settings, || {
                Duration::from_secs(600)
            })
            .await?;
            assert_eq!((report.received, report.deleted), (3, 3), "{report:?}");
        }
        let fetched = source.fetched.lock().map(|f| f.clone()).unwrap_or_default();
        assert_eq!(
            fetched,
            ["s3://raw-logs/logs/2026-11-29-08-00-00-A1B2C3D4E5F6"],
            "{mode}: only the configured bucket is read"
        );
        assert_eq!(rows(&cfg, "access_logs/datalake-prod").await?, 4);
        let (pairs, raw) = letters(&cfg).await?;
        assert!(!raw.contains(&secret), "{mode}: no copy of the config");
        for (bucket, uri) in [
            (
                "lakestream-test",
                format!("s3://lakestream-test/{config_key}"),
            ),
            (
                "never-configured-bucket",
                "s3://never-configured-bucket/logs/2026-11-29-08-00-00-A1B2C3D4E5F6".into(),
            ),
        ] {
            let (_, error) = pairs
                .iter()
                .find(|(u, _)| *u == uri)
                .ok_or_else(|| anyhow::anyhow!("{mode}: no letter for {uri}: {pairs:?}"))?;
            assert!(
                error.contains(&format!("`{bucket}`")) && error.contains("source_buckets"),
                "{mode}: the reason names the bucket and the setting: {error}"
            );
        }
    }
    Ok(())
}
