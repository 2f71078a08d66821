//! `refine` Lambda entry point: read the environment once, build the config, lake and warm
//! state once, serve; each invocation (schedule tick or a batch of refine notices) runs the due
//! jobs until nothing is new or the time budget (the deadline less a reserve) is spent.

use lakestream_core::SystemClock;
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::postpone::{SqsPostponer, postpone_notices};
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use refine::Refiner;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = FunctionEnv::from_lookup(|k| std::env::var(k).ok())?;
    init_tracing(&env.log_filter, true);
    let mut config = env.load_config().await?;
    if let Some(mb) = env.memory_mb {
        for c in refine::memory::fit_chunks(&mut config, mb) {
            tracing::warn!(
                "{}: max_mib_per_run {} is more than {mb} MB of memory holds; its runs read at \
                 most {} MiB (raise RefineMemory to read more per run)",
                c.what,
                c.configured,
                c.cap
            );
        }
    }
    let mut refiner = Refiner::new(config, Arc::new(SystemClock))?;
    if let Some(v) = &env.job_metrics {
        refiner.settings.job_metrics = refine::report::JobMetrics::parse(v).ok_or_else(|| {
            lakestream_core::Error::Config(format!(
                "LAKESTREAM_JOB_METRICS = `{v}`: use `behind` (default) or `all`"
            ))
        })?;
    }
    let postponer = match &env.refine_queue_url {
        Some(url) => {
            let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            Some(SqsPostponer::new(
                aws_sdk_sqs::Client::new(&aws),
                url.clone(),
            ))
        }
        None => None,
    };
    let (refiner, postponer) = (&refiner, &postponer);
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let deadline = lakestream_lambda::deadline::effective_deadline(
                event.context.deadline(),
                std::time::SystemTime::now(),
            );
            let until = refine::budget_until(deadline, refiner.settings.reserve);
            // Boxed: the job loop's future is deep (every job kind's phases); its layout is
            // computed once here instead of inside the runtime's service future.
            let response =
                Box::pin(refine::handle_until(refiner, &event.payload, Some(until))).await?;
            if let Some(p) = postponer {
                postpone_notices(p, &response.postponed).await;
            }
            println!("{}", response.metrics_line());
            Ok::<_, Diagnostic>(response.into_result()?)
        },
    ))
    .await
}
