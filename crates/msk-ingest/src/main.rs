//! `msk-ingest` Lambda entry point: read the environment once, build the ingestor once, serve.

use lakestream_core::{KafkaIngestor, SystemClock};
use lakestream_formats::kafka::KafkaEvent;
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::notify::{SqsNotifier, notify_refine};
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = FunctionEnv::from_lookup(|k| std::env::var(k).ok())?;
    init_tracing(&env.log_filter, true);
    let config = env.load_config().await?;
    let notifier = match &env.refine_queue_url {
        Some(url) => {
            let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            Some(SqsNotifier::new(
                aws_sdk_sqs::Client::new(&aws),
                url.clone(),
            ))
        }
        None => None,
    };
    let ingestor = KafkaIngestor::new(config.clone(), Arc::new(SystemClock))?;
    let (ingestor, notifier, config) = (&ingestor, &notifier, &config);
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<KafkaEvent>| async move {
            let response = msk_ingest::handle(ingestor, event.payload)
                .await
                .map_err(Diagnostic::from)?;
            if let Some(n) = notifier {
                let now = chrono::Utc::now().timestamp_millis();
                notify_refine(n, config, &response.advanced(), now).await;
            }
            println!("{}", response.metrics_line());
            Ok::<_, Diagnostic>(response)
        },
    ))
    .await
}
