//! `lakestream`: run the pipeline locally (demo), push one event through a function handler,
//! and look at tables. Uses exactly the handler code the Lambda functions run.

mod demo;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use lakestream_core::{Ingestor, Lake, PipelineConfig, SystemClock, read};
use lakestream_lambda::kafka::KafkaEvent;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The example pipeline, used when no config is given and `./lakestream.toml` does not exist.
pub const EXAMPLE_CONFIG: &str = include_str!("../../../lakestream.toml");

#[derive(Parser)]
#[command(
    name = "lakestream",
    version,
    about = "Event-driven Delta Lake ingestion, locally"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct LakeArgs {
    /// Pipeline config (TOML). Default: ./lakestream.toml, else the built-in example.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Lake root directory (overrides `lake.root`).
    #[arg(long, global = true)]
    lake: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Generate the seed pipeline's data, pack it into MSK events and ingest it into a local lake.
    Demo {
        #[command(flatten)]
        lake: LakeArgs,
        /// Records to generate.
        #[arg(long, default_value_t = 2000)]
        records: usize,
    },
    /// Run one event file through a function handler.
    Invoke {
        #[command(subcommand)]
        function: InvokeCommand,
    },
    /// List the tables of the lake.
    Tables {
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Print a table's summary and rows.
    Show {
        /// Table name, e.g. raw/order.
        table: String,
        /// Rows to print.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[command(flatten)]
        lake: LakeArgs,
    },
}

#[derive(Subcommand)]
enum InvokeCommand {
    /// The msk-ingest handler with an MSK event (e.g. events/msk-orders.json).
    Msk {
        /// Event JSON file.
        #[arg(long)]
        event: PathBuf,
        #[command(flatten)]
        lake: LakeArgs,
    },
}

fn load_config(args: &LakeArgs) -> Result<PipelineConfig> {
    let mut cfg = match &args.config {
        Some(p) => PipelineConfig::load(&p.to_string_lossy())?,
        None if Path::new("lakestream.toml").exists() => PipelineConfig::load("lakestream.toml")?,
        None => PipelineConfig::from_toml(EXAMPLE_CONFIG)?,
    };
    if let Some(root) = &args.lake {
        cfg.lake.root = root.clone();
    }
    Ok(cfg)
}

#[tokio::main]
async fn main() -> Result<()> {
    let log = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into());
    lakestream_lambda::telemetry::init_tracing(&log, false);
    match Cli::parse().command {
        Command::Demo { lake, records } => demo::run(load_config(&lake)?, records).await,
        Command::Invoke {
            function: InvokeCommand::Msk { event, lake },
        } => {
            let cfg = load_config(&lake)?;
            let bytes =
                std::fs::read(&event).with_context(|| format!("reading {}", event.display()))?;
            let ev = KafkaEvent::from_json(&bytes)
                .with_context(|| format!("{} is not an MSK event", event.display()))?;
            let ingestor = Ingestor::new(cfg, Arc::new(SystemClock))?;
            let out = msk_ingest::handle(&ingestor, ev).await?;
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(())
        }
        Command::Tables { lake } => {
            let cfg = load_config(&lake)?;
            let l = Lake::new(&cfg.lake)?;
            for name in table_names(&cfg, &l) {
                if let Some(s) = read::summarize(&l, &name).await? {
                    println!(
                        "{:<24} version {:>4}  files {:>5}  rows {:>8}  bytes {:>10}  partitioned by [{}]",
                        s.table,
                        s.version,
                        s.files,
                        s.rows,
                        s.bytes,
                        s.partition_columns.join(", ")
                    );
                }
            }
            Ok(())
        }
        Command::Show { table, limit, lake } => {
            let cfg = load_config(&lake)?;
            let l = Lake::new(&cfg.lake)?;
            show(&l, &table, limit).await
        }
    }
}

/// Tables of a lake: found on disk for a filesystem lake, else those the config names.
fn table_names(cfg: &PipelineConfig, lake: &Lake) -> Vec<String> {
    let mut names: Vec<String> = cfg.topics.iter().map(|t| t.table.clone()).collect();
    names.push(cfg.dead_letter_table.clone());
    if let Ok(root) = lake.root().to_file_path() {
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            if dir.join("_delta_log").is_dir() {
                if let Ok(rel) = dir.strip_prefix(&root) {
                    names.push(rel.to_string_lossy().replace('\\', "/"));
                }
                continue;
            }
            if let Ok(entries) = std::fs::read_dir(&dir) {
                stack.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Print a summary and the first rows of a table.
pub async fn show(lake: &Lake, table: &str, limit: usize) -> Result<()> {
    let Some(s) = read::summarize(lake, table).await? else {
        bail!("no table `{table}` under {}", lake.root());
    };
    println!(
        "{table}: version {}, {} files, {} rows, {} bytes, partitioned by [{}]",
        s.version,
        s.files,
        s.rows,
        s.bytes,
        s.partition_columns.join(", ")
    );
    let batch = read::read_table(lake, table, None).await?;
    let head = batch.slice(0, limit.min(batch.num_rows()));
    println!("{}", arrow::util::pretty::pretty_format_batches(&[head])?);
    Ok(())
}
