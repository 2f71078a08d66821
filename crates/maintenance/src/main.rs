//! `maintenance` Lambda entry point: config and lake built once; each scheduled invocation
//! runs one job on the named (or all) tables.

use lakestream_core::{Lake, SystemClock};
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use maintenance::{Request, failures, run};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = FunctionEnv::from_lookup(|k| std::env::var(k).ok())?;
    init_tracing(&env.log_filter, true);
    let config = env.load_config().await?;
    let lake = Lake::new(&config.lake)?;
    let (config, lake) = (&config, &lake);
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let req = Request::from_event(&event.payload).map_err(|e| Diagnostic {
                error_type: "Lakestream.BadInput".into(),
                error_message: lakestream_core::redact::scrub(&e),
            })?;
            let results = run(config, lake, &req, Arc::new(SystemClock)).await;
            if let Some(failed) = failures(&results) {
                // Scheduled invocations are retried twice by Lambda; every job is idempotent.
                return Err(Diagnostic {
                    error_type: "Lakestream.MaintenanceFailed".into(),
                    // Every job's error is redacted already; scrub again so nothing added
                    // on the way (a table name from a listing) can carry a value.
                    error_message: lakestream_core::redact::scrub(&failed),
                });
            }
            serde_json::to_value(&results).map_err(|e| Diagnostic {
                error_type: "Lakestream.Internal".into(),
                error_message: e.to_string(),
            })
        },
    ))
    .await
}
