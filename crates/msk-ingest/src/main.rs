//! `msk-ingest` Lambda entry point: read the environment once, build the ingestor once, serve.

use lakestream_core::{Ingestor, SystemClock};
use lakestream_lambda::config_source::{S3Access, load_config};
use lakestream_lambda::kafka::KafkaEvent;
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    init_tracing(&env("RUST_LOG").unwrap_or_else(|| "info".into()), true);
    let source = env("LAKESTREAM_CONFIG").ok_or(
        "LAKESTREAM_CONFIG is not set: give a TOML file path, an s3:// URI or inline TOML",
    )?;
    let s3 = S3Access {
        endpoint_url: env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL")),
        region: env("AWS_REGION"),
        allow_http: env("AWS_ALLOW_HTTP").is_some_and(|v| v == "true"),
    };
    let mut config = load_config(&source, &s3).await?;
    if let Some(root) = env("LAKESTREAM_LAKE_ROOT") {
        config.lake.root = root;
    }
    let ingestor = Ingestor::new(config, Arc::new(SystemClock))?;
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
