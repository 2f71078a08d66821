//! `maintenance` Lambda entry point: read the environment once, build the config and lake
//! once (and the Glue client, when a catalog database is configured), serve; each scheduled
//! invocation runs one job on the named (or all) tables.

use lakestream_catalog::GlueCatalog;
use lakestream_core::SystemClock;
use lakestream_lambda::config_source::FunctionEnv;
use lakestream_lambda::telemetry::init_tracing;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use maintenance::{CatalogTarget, Maintainer};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let env = FunctionEnv::from_lookup(|k| std::env::var(k).ok())?;
    init_tracing(&env.log_filter, true);
    let mut maintainer = Maintainer::new(env.load_config().await?, Arc::new(SystemClock))?;
    // The Glue database: the environment's (the template's), else `[catalog].database`.
    let database = match env.catalog_database.clone() {
        Some(db) => Some(db).filter(|d| !d.is_empty()),
        None => maintainer.config.catalog.database.clone(),
    };
    if let Some(database) = database {
        let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        maintainer.catalog = Some(CatalogTarget {
            catalog: Arc::new(GlueCatalog::new(aws_sdk_glue::Client::new(&aws))),
            database,
        });
    }
    let maintainer = &maintainer;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let response = maintenance::handle(maintainer, &event.payload).await?;
            println!("{}", response.metrics_line());
            Ok::<_, Diagnostic>(response.into_result()?)
        },
    ))
    .await
}
