//! `lakestream`: run the pipeline locally (demo), push one event through a function handler,
//! maintain and refine tables, and look at them. Uses exactly the handler code the Lambda
//! functions run. This file parses the command line and dispatches; `args.rs` holds the clap
//! types, `commands/` one module per command or group.

mod args;
mod commands;
mod crash;

use anyhow::Result;
use args::{AccessLogsCommand, CatalogCommand, Cli, Command, ReportCommand};
use clap::Parser;
use commands::{inspect, load_config, maintain};

#[tokio::main]
async fn main() -> Result<()> {
    // delta-rs warns on every version race our commit path resolves itself: not for users.
    let log = std::env::var("RUST_LOG")
        .unwrap_or_else(|_| "warn,deltalake_core::kernel::transaction=error".into());
    lakestream_lambda::telemetry::init_tracing(&log, false);
    match Cli::parse().command {
        Command::Demo { lake, records } => commands::demo::run(load_config(&lake)?, records).await,
        Command::Invoke { function } => commands::invoke::run(function).await,
        Command::Redrive(a) => {
            let cfg = load_config(&a.lake)?;
            let lake = commands::open_lake(&cfg, &a.lake)?;
            let clock = std::sync::Arc::new(lakestream_core::SystemClock);
            let ingestor = lakestream_core::KafkaIngestor::with_lake(cfg, lake, clock);
            commands::redrive::run(&ingestor, &a.sources, a.allow_duplicates, a.json).await?;
            Ok(())
        }
        Command::AccessLogs {
            command: AccessLogsCommand::Parse { file },
        } => commands::access_logs::parse(&file),
        Command::Validate { lake } => {
            maintain::validate(&load_config(&lake)?);
            Ok(())
        }
        Command::Optimize(a) => maintain::run_optimize(a).await,
        Command::Vacuum(a) => maintain::run_vacuum(a).await,
        Command::Checkpoint(a) => maintain::run_checkpoint(a).await,
        Command::Manifest(a) => maintain::run_manifest(a).await,
        Command::Refine(a) => commands::refine::run_command(a).await,
        Command::Load(a) => commands::load::run_command(a).await,
        Command::Tables { lake } => commands::tables::list(&lake).await,
        Command::Show(a) => inspect::show_command(a).await,
        Command::Changes(a) => inspect::changes_command(a).await,
        Command::Ddl(a) => commands::tables::ddl(a).await,
        Command::Lag { json, lake } => inspect::lag_command(&lake, json).await,
        Command::Sql(a) => commands::sql(a).await,
        Command::Report {
            report:
                ReportCommand::Access {
                    since,
                    depth,
                    html,
                    json,
                    lake,
                },
        } => {
            let opts = lakestream_core::access_log::report::ReportOptions {
                since_days: since,
                depth,
                now: chrono::Utc::now(),
            };
            commands::report::access(&load_config(&lake)?, opts, html.as_deref(), json).await
        }
        Command::History(a) => inspect::history_command(a).await,
        Command::Catalog {
            command: CatalogCommand::Sync(a),
        } => commands::catalog::sync(a).await,
    }
}
