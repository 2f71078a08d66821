//! `msk-ingest` Lambda entry point: read the environment once, build the ingestor once, serve.

use lakestream_core::{KafkaIngestor, SystemClock};
use lakestream_formats::kafka::KafkaEvent;
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = FunctionEnv::from_lookup(|k| std::env::var(k).ok())?;
    init_tracing(&env.log_filter, true);
    let config = env.load_config().await?;
    let ingestor = KafkaIngestor::new(config, Arc::new(SystemClock))?;
    let ingestor = &ingestor;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<KafkaEvent>| async move {
            let response = msk_ingest::handle(ingestor, event.payload)
                .await
                .map_err(Diagnostic::from)?;
            println!("{}", response.metrics_line());
            Ok::<_, Diagnostic>(response)
        },
    ))
    .await
}
