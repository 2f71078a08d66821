//! The event-driven path: refine notices (an SQS batch, as the ingest functions send them)
//! run their jobs and the jobs reading their outputs; a lost notice is caught by the schedule;
//! two invocations with the same notices at once consume each source version once; a spent
//! time budget defers the jobs and hands their notices back; a body that is not a notice is
//! failed back to the queue.

use anyhow::{Context, Result};
use lakestream_core::{KafkaIngestor, SystemClock};
use lakestream_formats::kafka::KafkaEvent;
use lakestream_lambda::notify::RefineNotice;
use lakestream_testkit::{Backend, TestLake, backends, strings};
use refine::Refiner;
use serde_json::{Value, json};
use std::sync::Arc;

const ORDERS: &[u8] = include_bytes!("../../../../events/msk-orders.json");
const MEMBERS: &[u8] = include_bytes!("../../../../events/msk-members.json");
const NOTICES: &str = include_str!("../../../../events/sqs-refine-notices.json");

/// An SQS event carrying `notices` (message ids `m0`, `m1`, ...), as the Lambda poller sends it.
pub(crate) fn sqs_event(notices: &[RefineNotice]) -> Value {
    let records: Vec<Value> = notices
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "messageId": format!("m{i}"),
                "receiptHandle": "r",
                "body": serde_json::to_string(n).unwrap_or_default(),
                "attributes": {"MessageGroupId": n.group_id()},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:notices.fifo",
                "awsRegion": "us-east-1"
            })
        })
        .collect();
    json!({ "Records": records })
}

/// A FIFO queue named `<prefix>-<unique>.fifo` on the emulator at `endpoint` (its visibility
/// timeout when given): the client and the queue URL.
pub(crate) async fn fifo_queue(
    endpoint: &str,
    prefix: &str,
    visibility: Option<&str>,
) -> Result<(aws_sdk_sqs::Client, String)> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let mut create = sqs
        .create_queue()
        .queue_name(format!(
            "{prefix}-{}.fifo",
            lakestream_testkit::unique_suffix()
        ))
        .attributes(QueueAttributeName::FifoQueue, "true");
    if let Some(v) = visibility {
        create = create.attributes(QueueAttributeName::VisibilityTimeout, v);
    }
    let url = create.send().await?.queue_url.context("queue url")?;
    Ok((sqs, url))
}

/// One receive of up to 10 messages, as the Lambda poller makes it.
pub(crate) async fn receive(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
) -> Result<Vec<aws_sdk_sqs::types::Message>> {
    let got = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .send()
        .await?;
    Ok(got.messages.unwrap_or_default())
}

/// A received message as the SQS event record the poller hands the function.
pub(crate) fn sqs_record(m: aws_sdk_sqs::types::Message) -> Value {
    json!({
        "messageId": m.message_id.unwrap_or_default(),
        "receiptHandle": m.receipt_handle.unwrap_or_default(),
        "body": m.body.unwrap_or_default(),
        "attributes": {}, "messageAttributes": {},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q.fifo",
        "awsRegion": "us-east-1"
    })
}

/// Ingest one sample MSK event; the notices its commit sends (as the function's `main` does).
pub(crate) async fn ingest(lake: &TestLake, event: &[u8]) -> Result<Vec<RefineNotice>> {
    let ingestor = KafkaIngestor::new(lake.config.clone(), Arc::new(SystemClock))?;
    let response = msk_ingest::handle(&ingestor, KafkaEvent::from_json(event)?).await?;
    Ok(RefineNotice::for_commits(
        &lake.config,
        &response.advanced(),
        chrono::Utc::now().timestamp_millis(),
    ))
}

fn ran(response: &refine::RefineResponse) -> Vec<&str> {
    response
        .jobs
        .iter()
        .filter(|j| j.due() && j.outcome().is_ok_and(|r| !r.runs.is_empty()))
        .map(|j| j.job.as_str())
        .collect()
}

fn failures(response: &refine::RefineResponse) -> Vec<String> {
    response.batch_item_failures.clone().unwrap_or_default()
}

async fn sorted_ids(lake: &TestLake, table: &str) -> Result<Vec<String>> {
    let batch = lake.read(table).await?;
    let mut ids: Vec<String> = strings(&batch, "order_id")?.into_iter().flatten().collect();
    ids.sort();
    Ok(ids)
}

const SIX: [&str; 6] = ["1", "2", "3", "4", "5", "6"];

/// The metric names the EMF line of `job` declares (`None`: no such line), and its `LagSeconds`.
fn declared(response: &refine::RefineResponse, job: &str) -> Option<(Vec<String>, Option<f64>)> {
    response.metrics_line().lines().find_map(|l| {
        let v: Value = serde_json::from_str(l).ok()?;
        (v["Job"] == job).then(|| {
            let names = v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .map(|m| {
                    m.iter()
                        .filter_map(|d| d["Name"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            (names, v["LagSeconds"].as_f64())
        })
    })
}

/// The sample notices (events/) parse, and each commit's notices name every job reading it.
#[tokio::test]
async fn notices_run_their_jobs_then_the_jobs_reading_their_outputs() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-notices")?;
    let mut notices = ingest(&lake, ORDERS).await?;
    notices.extend(ingest(&lake, MEMBERS).await?);
    let mut named: Vec<(String, String)> = notices
        .iter()
        .map(|n| (n.job.clone(), n.table.clone()))
        .collect();
    named.sort();
    assert_eq!(
        named,
        [
            ("curated", "raw/member"),
            ("curated", "raw/order"),
            ("gold", "raw/order")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let refiner = Refiner::new(lake.config.clone(), Arc::new(SystemClock))?;
    let event: Value = serde_json::from_str(NOTICES)?;
    let response = refine::handle(&refiner, &event).await?.into_result()?;
    // processed reads curated/order: it runs after curated in the same invocation.
    assert_eq!(ran(&response), ["curated", "processed", "gold"]);
    assert!(failures(&response).is_empty(), "{:?}", failures(&response));
    let body = serde_json::to_value(&response)?;
    assert_eq!(body["batchItemFailures"], json!([]), "{body}");
    assert_eq!(sorted_ids(&lake, "curated/order").await?, SIX);
    assert_eq!(sorted_ids(&lake, "processed/order").await?, SIX);
    // The sample's versions were committed in 2022: curated is far behind its 60 s target, so
    // its line publishes the two freshness metrics (and logs the rest).
    let (names, lag) = declared(&response, "curated").context("a line for curated")?;
    assert_eq!(names, ["BehindTarget", "LagSeconds"]);
    assert!(lag.is_some_and(|l| l > 3600.0 * 24.0 * 365.0), "{lag:?}");
    assert!(
        response.metrics_line().contains("\"JobsBehindTarget\":2"),
        "{}",
        response.metrics_line()
    );
    // The invocation's line publishes three metrics (each name is $0.30 a month); the alarms
    // read two of them.
    let invocation = response
        .metrics_line()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["Job"].is_null())
        .context("the invocation's line")?;
    let names: Vec<&str> = invocation["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .map(|m| m.iter().filter_map(|d| d["Name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["JobsFailed", "JobsBehindTarget", "MaxLagSeconds"]);
    assert_eq!(invocation["JobsDeferred"], 0.0, "logged on the line");
    // The same notices again (a redelivery): nothing is due, nothing is loaded or written.
    let again = refine::handle(&refiner, &event).await?.into_result()?;
    assert!(ran(&again).is_empty(), "{:?}", ran(&again));
    assert!(again.jobs.iter().all(|j| !j.due()), "{:?}", again.jobs);
    assert_eq!(sorted_ids(&lake, "curated/order").await?, SIX);
    // The invocation's EMF line counts what ran and what had nothing new.
    assert!(
        again.metrics_line().contains("\"JobsNotDue\":3"),
        "{}",
        again.metrics_line()
    );
    Ok(())
}

/// A notice that was never sent: the next notice-driven invocation (for another job) does not
/// run the job, the schedule's tick finds the new version with its HEAD probe and runs it.
#[tokio::test]
async fn a_lost_notice_is_caught_by_the_schedule() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "refine-lost-notice")?;
        let mut notices = ingest(&lake, MEMBERS).await?;
        notices.extend(ingest(&lake, ORDERS).await?);
        let refiner = Refiner::new(lake.config.clone(), Arc::new(SystemClock))?;
        refine::handle(&refiner, &sqs_event(&notices))
            .await?
            .into_result()?;
        assert_eq!(sorted_ids(&lake, "curated/order").await?, SIX);
        // More orders (a replayed sample with new offsets: a new raw/order version); its
        // notices are lost.
        let replay =
            String::from_utf8(ORDERS.to_vec())?.replace("\"offset\": 12", "\"offset\": 92");
        let lost = ingest(&lake, replay.as_bytes()).await?;
        assert!(!lost.is_empty(), "the commit would have sent notices");
        // A notice for gold alone runs gold, not curated (no request about raw/order's readers
        // beyond the notice's own job).
        let gold_only: Vec<RefineNotice> =
            lost.iter().filter(|n| n.job == "gold").cloned().collect();
        let r = refine::handle(&refiner, &sqs_event(&gold_only))
            .await?
            .into_result()?;
        assert_eq!(ran(&r), ["gold"], "{backend:?}");
        // Notified moments after its commit: gold is within its target, so its line declares
        // no metric (a custom metric per job costs money) but logs its lag.
        let (names, lag) = declared(&r, "gold").context("a line for gold")?;
        assert!(names.is_empty(), "{names:?}");
        assert!(lag.is_some_and(|l| l < 60.0), "{lag:?}");
        assert_eq!(
            sorted_ids(&lake, "curated/order").await?,
            SIX,
            "{backend:?}"
        );
        // The safety-net tick: curated (and processed after it) run on what was not notified.
        let tick = refine::handle(&refiner, &json!({})).await?.into_result()?;
        assert_eq!(ran(&tick), ["curated", "processed"], "{backend:?}");
        let mut want: Vec<String> = SIX.iter().map(|s| s.to_string()).collect();
        want.extend(SIX.iter().map(|s| s.to_string()));
        want.sort();
        assert_eq!(
            sorted_ids(&lake, "curated/order").await?,
            want,
            "{backend:?}: each order of both versions once"
        );
        // Nothing new: the next tick runs nothing.
        let quiet = refine::handle(&refiner, &json!({})).await?.into_result()?;
        assert!(ran(&quiet).is_empty(), "{backend:?}: {:?}", ran(&quiet));
    }
    Ok(())
}

/// Two refine instances handle the same notices at the same moment (a redelivery racing the
/// first delivery, or a notice and a tick): every source version is consumed once.
#[tokio::test]
async fn two_notices_at_once_consume_each_source_version_once() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "refine-notices-race")?;
        let mut notices = ingest(&lake, MEMBERS).await?;
        notices.extend(ingest(&lake, ORDERS).await?);
        let event = sqs_event(&notices);
        let (a, b) = (
            Refiner::new(lake.config.clone(), Arc::new(SystemClock))?,
            Refiner::new(lake.config.clone(), Arc::new(SystemClock))?,
        );
        let (ra, rb) = tokio::join!(refine::handle(&a, &event), refine::handle(&b, &event));
        for r in [ra?, rb?] {
            assert!(
                failures(&r).is_empty() || r.jobs.iter().any(|j| j.retryable()),
                "{:?}",
                r.jobs
            );
        }
        // Whatever was handed back is redelivered: deliver it once more to each.
        refine::handle(&a, &event).await?;
        refine::handle(&b, &json!({})).await?.into_result()?;
        assert_eq!(
            sorted_ids(&lake, "curated/order").await?,
            SIX,
            "{backend:?}"
        );
        assert_eq!(
            sorted_ids(&lake, "processed/order").await?,
            SIX,
            "{backend:?}"
        );
        let gold = lake.read("gold/order_hourly").await?;
        let orders: i64 = lakestream_testkit::int64s(&gold, "orders")?
            .into_iter()
            .flatten()
            .sum();
        assert_eq!(
            orders, 6,
            "{backend:?}: the gold table counts each order once"
        );
    }
    Ok(())
}

/// A budget spent before the first job: every job is deferred and every notice goes back.
/// A body that is not a notice goes back too (the queue's redrive policy dead-letters it).
#[tokio::test]
async fn a_spent_budget_and_a_malformed_body_hand_notices_back() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-notices-budget")?;
    let notices = ingest(&lake, ORDERS).await?;
    let refiner = Refiner::new(lake.config.clone(), Arc::new(SystemClock))?;
    let mut event = sqs_event(&notices);
    let records = event["Records"].as_array_mut().context("records")?;
    let mut bad = records[0].clone();
    bad["messageId"] = json!("bad");
    bad["body"] = json!("{\"table\":\"raw/order\"}");
    records.push(bad);
    let spent = std::time::Instant::now();
    let response = refine::handle_until(&refiner, &event, Some(spent))
        .await?
        .into_result()?;
    assert!(
        response.jobs.iter().all(|j| j.deferred()),
        "{:?}",
        response.jobs
    );
    let mut back = failures(&response);
    back.sort();
    let mut want: Vec<String> = (0..notices.len()).map(|i| format!("m{i}")).collect();
    want.push("bad".into());
    want.sort();
    assert_eq!(back, want);
    assert_eq!(lake.count("curated/order").await.unwrap_or(0), 0);
    // Delivered again with time to spare: they run (the malformed one fails again).
    let response = refine::handle(&refiner, &event).await?.into_result()?;
    assert_eq!(failures(&response), ["bad"]);
    assert_eq!(ran(&response), ["gold"], "curated waits for raw/member");
    Ok(())
}

/// The whole event path on the emulator: the notices of two commits go through a real SQS FIFO
/// queue (`SqsNotifier`, as the ingest functions send them), are received as the Lambda poller
/// receives them, and run the jobs; the same commit's notices sent twice (a retried send) are
/// one message per job and version.
#[tokio::test]
async fn notices_through_an_sqs_fifo_queue() -> Result<()> {
    let Some(endpoint) = lakestream_testkit::s3_endpoint() else {
        return Ok(());
    };
    let lake = TestLake::new(Backend::S3, "refine-sqs-notices")?;
    let (sqs, url) = fifo_queue(&endpoint, "notices", None).await?;
    let notifier = lakestream_lambda::notify::SqsNotifier::new(sqs.clone(), url.clone());
    let mut notices = ingest(&lake, MEMBERS).await?;
    notices.extend(ingest(&lake, ORDERS).await?);
    let config = &lake.config;
    let advanced: Vec<(String, u64)> = notices
        .iter()
        .map(|n| (n.table.clone(), n.version))
        .collect();
    for _ in 0..2 {
        let sent = lakestream_lambda::notify::notify_refine(&notifier, config, &advanced, 1).await;
        assert_eq!(sent.failed, 0);
    }
    let mut records = Vec::new();
    for _ in 0..5 {
        records.extend(receive(&sqs, &url).await?.into_iter().map(sqs_record));
    }
    // advanced names each (table, version) twice (once per job reading it): the notices
    // deduplicate per job, table and version however often they are sent.
    let mut bodies: Vec<String> = records
        .iter()
        .filter_map(|r| r["body"].as_str().map(String::from))
        .collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(records.len(), bodies.len(), "no message twice: {bodies:?}");
    assert_eq!(records.len(), notices.len(), "{bodies:?}");
    let refiner = Refiner::new(lake.config.clone(), Arc::new(SystemClock))?;
    let response = refine::handle(&refiner, &json!({ "Records": records }))
        .await?
        .into_result()?;
    assert_eq!(ran(&response), ["curated", "processed", "gold"]);
    assert_eq!(sorted_ids(&lake, "processed/order").await?, SIX);
    Ok(())
}

/// Issue 38 (8): a forged notice naming a version far past the table's (10^9) runs the job once,
/// but a warm process does not take that version as seen: the next real notice, of a version
/// below it, still runs the job.
#[tokio::test]
async fn a_forged_notice_version_never_makes_later_notices_look_seen() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-forged-notice")?;
    ingest(&lake, ORDERS).await?;
    ingest(&lake, MEMBERS).await?;
    let refiner = Refiner::new(lake.config.clone(), Arc::new(SystemClock))?;
    let notice = |version: u64| RefineNotice {
        job: "gold".into(),
        table: "raw/order".into(),
        version,
        committed_ms: chrono::Utc::now().timestamp_millis(),
    };
    // A first run: the warm process now knows what gold read.
    let first = refine::handle(&refiner, &sqs_event(&[notice(1)]))
        .await?
        .into_result()?;
    assert!(ran(&first).contains(&"gold"), "{:?}", ran(&first));
    let forged = refine::handle(&refiner, &sqs_event(&[notice(1_000_000_000)]))
        .await?
        .into_result()?;
    // Due (a version past what it saw), it runs and finds nothing new.
    assert!(
        forged.jobs.iter().any(|j| j.job == "gold" && j.due()),
        "{:?}",
        forged.jobs
    );
    // New orders (the sample's records at later offsets): a real version, below 10^9.
    let mut event: Value = serde_json::from_slice(ORDERS)?;
    for records in event["records"]
        .as_object_mut()
        .context("records")?
        .values_mut()
    {
        for r in records.as_array_mut().context("array")? {
            let offset = r["offset"].as_i64().context("offset")?;
            r["offset"] = json!(offset + 100);
        }
    }
    let real = ingest(&lake, &serde_json::to_vec(&event)?).await?;
    let real: Vec<RefineNotice> = real.into_iter().filter(|n| n.job == "gold").collect();
    assert!(real.iter().all(|n| n.version < 1_000_000_000), "{real:?}");
    let response = refine::handle(&refiner, &sqs_event(&real))
        .await?
        .into_result()?;
    assert!(
        ran(&response).contains(&"gold"),
        "the real notice was taken as seen: {:?}",
        response.jobs
    );
    Ok(())
}

/// A job already caught up when a process starts (another container ran it) finds nothing new;
/// it still remembers what it loaded, so the same notice again, and the schedule's probe, find it
/// not due instead of loading its sources on every trigger.
#[tokio::test]
async fn a_caught_up_job_that_found_nothing_is_not_due_again() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-caught-up")?;
    let notices = ingest(&lake, ORDERS).await?;
    let gold: Vec<RefineNotice> = notices.into_iter().filter(|n| n.job == "gold").collect();
    let first = Refiner::new(lake.config.clone(), Arc::new(SystemClock))?;
    let ran_first = refine::handle(&first, &sqs_event(&gold))
        .await?
        .into_result()?;
    assert!(ran(&ran_first).contains(&"gold"), "{:?}", ran_first.jobs);
    // A second process: gold is due (never seen here) and finds nothing new.
    let cold = Refiner::new(lake.config.clone(), Arc::new(SystemClock))?;
    let nothing = refine::handle(&cold, &sqs_event(&gold))
        .await?
        .into_result()?;
    assert!(ran(&nothing).is_empty(), "{:?}", nothing.jobs);
    let again = refine::handle(&cold, &sqs_event(&gold))
        .await?
        .into_result()?;
    assert!(
        again.jobs.iter().all(|j| !j.due()),
        "the caught-up job is due again: {:?}",
        again.jobs
    );
    Ok(())
}
