//! `s3-log-ingest` Lambda entry point. Serves two triggers with one binary: an SQS event
//! (partial batch response) and a scheduled event (drain the queue named by
//! `LAKESTREAM_QUEUE_URL`). Reads the environment once, builds the clients and the ingestor
//! once (refusing to start without a bucket to read logs from), serves.

use lakestream_core::SystemClock;
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::notify::{SqsNotifier, notify_refine};
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use s3_log_ingest::drain::SqsQueue;
use s3_log_ingest::handler::{LogIngest, time_left};
use s3_log_ingest::s3::S3Objects;
use serde_json::Value;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = FunctionEnv::from_lookup(|k| std::env::var(k).ok())?;
    init_tracing(&env.log_filter, true);
    let config = env.load_config().await?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let s3 = aws_sdk_s3::config::Builder::from(&aws)
        .force_path_style(env.s3.endpoint_url.is_some())
        .build();
    let objects = S3Objects::new(aws_sdk_s3::Client::from_conf(s3));
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let queue = (env.queue_url.clone()).map(|url| SqsQueue::new(sqs.clone(), url));
    let notifier = (env.refine_queue_url.clone()).map(|url| SqsNotifier::new(sqs, url));
    let deps = LogIngest::new(config.clone(), Arc::new(SystemClock), objects, queue)?;
    let (deps, notifier, config) = (&deps, &notifier, &config);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = lakestream_lambda::deadline::effective_deadline(
            event.context.deadline(),
            std::time::SystemTime::now(),
        );
        let remaining = time_left(deadline);
        let response = s3_log_ingest::handler::handle(deps, event.payload, remaining).await?;
        if let Some(n) = notifier {
            let now = chrono::Utc::now().timestamp_millis();
            notify_refine(n, config, &response.advanced(), now).await;
        }
        println!("{}", response.metrics_line());
        Ok::<_, Diagnostic>(response)
    }))
    .await
}
