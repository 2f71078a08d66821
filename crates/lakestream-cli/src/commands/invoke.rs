//! `lakestream invoke msk|s3-logs|maintenance|refine`: one event file through the function's
//! own handler, on a local or S3 lake, printing what the function would return. The same code
//! the Lambda runs, so this is how the production path is tried locally.

use super::{after_commit, load_config, open_lake};
use crate::args::{InvokeCommand, LakeArgs};
use anyhow::{Context, Result, bail};
use lakestream_core::access_log::{AccessLogIngestor, LocalObjects};
use lakestream_core::{KafkaIngestor, SystemClock};
use lakestream_formats::kafka::KafkaEvent;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Run the invoke subcommand.
pub async fn run(function: InvokeCommand) -> Result<()> {
    match function {
        InvokeCommand::Msk { event, lake } => msk(&event, &lake).await,
        InvokeCommand::S3Logs {
            event,
            objects,
            lake,
        } => s3_logs(&event, objects, &lake).await,
        InvokeCommand::Maintenance { event, lake } => maintenance(&event, &lake).await,
        InvokeCommand::Refine { event, lake } => refine(&event, &lake).await,
    }
}

fn read(event: &Path) -> Result<Vec<u8>> {
    std::fs::read(event).with_context(|| format!("reading {}", event.display()))
}

/// The msk-ingest handler; prints its response.
async fn msk(event: &Path, lake: &LakeArgs) -> Result<()> {
    let cfg = load_config(lake)?;
    let ev = KafkaEvent::from_json(&read(event)?)
        .with_context(|| format!("{} is not an MSK event", event.display()))?;
    let ingestor =
        KafkaIngestor::with_lake(cfg.clone(), open_lake(&cfg, lake)?, Arc::new(SystemClock));
    let out = msk_ingest::handle(&ingestor, ev).await?;
    after_commit(lake);
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// The s3-log-ingest handler on an SQS event, reading objects from `objects` (a directory
/// standing in for buckets) or S3; prints the batch response and the report.
async fn s3_logs(event: &Path, objects: Option<PathBuf>, lake: &LakeArgs) -> Result<()> {
    let mut cfg = load_config(lake)?;
    // The function's setting: only these buckets are read (the template sets it).
    let env = lakestream_formats::config::LOG_BUCKETS_ENV;
    if let Some(list) = std::env::var(env).ok().filter(|v| !v.is_empty()) {
        cfg.access_logs.set_source_buckets(&list)?;
    }
    let ev: aws_lambda_events::sqs::SqsEvent = serde_json::from_slice(&read(event)?)
        .with_context(|| format!("{} is not an SQS event", event.display()))?;
    let ingestor =
        AccessLogIngestor::with_lake(cfg.clone(), open_lake(&cfg, lake)?, Arc::new(SystemClock));
    let (response, report) = match objects {
        Some(dir) => s3_log_ingest::handle_sqs(&ingestor, &LocalObjects(dir), ev).await,
        None => {
            let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let conf = aws_sdk_s3::config::Builder::from(&aws)
                .force_path_style(true)
                .build();
            let src = s3_log_ingest::s3::S3Objects::new(aws_sdk_s3::Client::from_conf(conf));
            s3_log_ingest::handle_sqs(&ingestor, &src, ev).await
        }
    };
    after_commit(lake);
    let out = serde_json::json!({"response": response, "report": report});
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// The maintenance handler on a schedule input (e.g. `events/maintenance-optimize.json`):
/// its EMF lines (stdout, as in Lambda), then its results as JSON on the last line; fails if a
/// table failed.
async fn maintenance(event: &Path, lake: &LakeArgs) -> Result<()> {
    let config = load_config(lake)?;
    // As the function: the Glue database from LAKESTREAM_CATALOG_DATABASE, else the config's.
    let database = match std::env::var("LAKESTREAM_CATALOG_DATABASE").ok() {
        Some(db) => Some(db).filter(|d| !d.is_empty()),
        None => config.catalog.database.clone(),
    };
    let catalog = match database {
        Some(database) => {
            let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            Some(maintenance::CatalogTarget {
                catalog: Arc::new(lakestream_catalog::GlueCatalog::new(
                    aws_sdk_glue::Client::new(&aws),
                )),
                database,
            })
        }
        None => None,
    };
    let maintainer = maintenance::Maintainer {
        lake: open_lake(&config, lake)?,
        config,
        clock: Arc::new(SystemClock),
        catalog,
    };
    let payload: serde_json::Value = serde_json::from_slice(&read(event)?)?;
    let response = maintenance::handle(&maintainer, &payload).await?;
    print_metrics(&response.metrics_line());
    println!("{}", serde_json::to_string(&response)?);
    if let Some(failed) = maintenance::failures(&response.results) {
        bail!("maintenance failed: {failed}");
    }
    Ok(())
}

/// The refine handler on a schedule input (e.g. `events/refine-curated.json`): its EMF lines,
/// then its results as JSON on the last line; fails as the function does when a job failed
/// (the jobs reading a failed job's output are skipped, the others run).
async fn refine(event: &Path, lake: &LakeArgs) -> Result<()> {
    let config = load_config(lake)?;
    let lake_handle = open_lake(&config, lake)?;
    let refiner = refine::Refiner::with_lake(config, lake_handle, Arc::new(SystemClock));
    let payload: serde_json::Value = serde_json::from_slice(&read(event)?)?;
    let response = refine::handle(&refiner, &payload).await?;
    after_commit(lake);
    print_metrics(&response.metrics_line());
    println!("{}", serde_json::to_string(&response)?);
    if let Some(failed) = response.failure() {
        bail!("refine failed: {failed}");
    }
    Ok(())
}

fn print_metrics(lines: &str) {
    if !lines.is_empty() {
        println!("{lines}");
    }
}
