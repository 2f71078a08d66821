//! `refine` Lambda entry point: config and lake built once; each scheduled invocation runs the
//! named (or all) refine jobs until nothing is new.

use lakestream_core::{Lake, SystemClock};
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use refine::{Request, run};

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
                error_message: e,
            })?;
            let results = run(config, lake, &req, &SystemClock)
                .await
                .map_err(|e| Diagnostic {
                    error_type: "Lakestream.BadInput".into(),
                    error_message: e.redacted(),
                })?;
            let failed: Vec<String> = results
                .iter()
                .filter_map(|r| r.outcome.as_ref().err().map(|e| format!("{}: {e}", r.job)))
                .collect();
            if !failed.is_empty() {
                // The next tick retries anyway; the type tells alarms whether a human is needed.
                let retryable = results.iter().all(|r| r.outcome.is_ok() || r.retryable);
                return Err(Diagnostic {
                    error_type: if retryable {
                        "Lakestream.Retryable"
                    } else {
                        "Lakestream.SourceError"
                    }
                    .into(),
                    error_message: failed.join("; "),
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
