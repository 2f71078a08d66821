//! `refine` Lambda entry point: read the environment once, build the config and lake once,
//! serve; each scheduled invocation runs the named (or all) refine jobs until nothing is new.

use lakestream_core::SystemClock;
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use refine::Refiner;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = FunctionEnv::from_lookup(|k| std::env::var(k).ok())?;
    init_tracing(&env.log_filter, true);
    let refiner = Refiner::new(env.load_config().await?, Arc::new(SystemClock))?;
    let refiner = &refiner;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let response = refine::handle(refiner, &event.payload).await?;
            println!("{}", response.metrics_line());
            Ok::<_, Diagnostic>(response.into_result()?)
        },
    ))
    .await
}
