//! The command line, as clap types: one variant per command, each with its own argument struct
//! that the command's function in `commands/` takes. Parsing only; no behaviour.

use crate::crash;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

mod functions;
mod maintain;
mod read;
mod write;

pub use functions::{AccessLogsCommand, InvokeCommand, ReportCommand};
pub use maintain::{CatalogCommand, CatalogSyncArgs, OptimizeArgs, TablesArgs, VacuumArgs};
#[cfg(feature = "sql")]
pub use read::SqlFormat;
pub use read::{ChangesArgs, DdlArgs, HistoryArgs, ShowArgs, SqlArgs};
pub use write::{LoadArgs, RedriveArgs, RefineArgs};

/// `lakestream`: the parsed command line.
#[derive(Parser)]
#[command(
    name = "lakestream",
    version,
    about = "Event-driven Delta Lake ingestion, locally"
)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Where a command's pipeline and lake come from (every command that touches a lake takes it).
#[derive(clap::Args, Clone)]
pub struct LakeArgs {
    /// Pipeline config (TOML). Default: ./lakestream.toml, else the built-in example.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Lake root directory (overrides `lake.root`).
    #[arg(long, global = true)]
    pub lake: Option<String>,
    /// Test only: abort at a step of the commit path (`after-data-put`, `after-log-put`,
    /// `after-commit`, optionally `:N` for the N-th time). See `crash.rs`.
    #[arg(long, global = true, hide = true)]
    pub crash_at: Option<crash::CrashAt>,
}

/// The commands.
#[derive(Subcommand)]
pub enum Command {
    /// Generate the seed pipeline's data, pack it into MSK events and ingest it into a local lake.
    Demo {
        /// Where the demo writes.
        #[command(flatten)]
        lake: LakeArgs,
        /// Records to generate.
        #[arg(long, default_value_t = 2000)]
        records: usize,
    },
    /// Run one event file through a function handler.
    Invoke {
        /// The function.
        #[command(subcommand)]
        function: InvokeCommand,
    },
    /// S3 server access log tools.
    AccessLogs {
        /// The tool.
        #[command(subcommand)]
        command: AccessLogsCommand,
    },
    /// Check the config and list every table the pipeline writes (what maintenance runs on).
    Validate {
        /// The config to check.
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Compact small files (bin-packing, dataChange=false).
    Optimize(OptimizeArgs),
    /// Delete files no version inside the retention window references (and old orphans).
    Vacuum(VacuumArgs),
    /// Write a checkpoint now and clean expired log files.
    Checkpoint(TablesArgs),
    /// Generate the symlink manifests (incremental) for Athena/Presto/Hive.
    Manifest(TablesArgs),
    /// Run refine jobs (all, or those named) in dependency order until nothing is new.
    Refine(RefineArgs),
    /// Put Kafka batches Lambda gave up on (the failed-batches bucket's on-failure records)
    /// back into the lake, exactly once; safe to run again.
    Redrive(RedriveArgs),
    /// Back-fill: append the rows of Parquet, CSV or JSON-lines files to a table, exactly once
    /// per file content (a re-run writes nothing).
    Load(LoadArgs),
    /// List the tables of the lake.
    Tables {
        /// The lake.
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Print a table's summary and rows (as of an older version or time with --version/--as-of).
    Show(ShowArgs),
    /// The rows versions FROM..=TO inserted or deleted (net of rewrites), with
    /// `_change_type` and `_commit_version`; compactions change nothing.
    Changes(ChangesArgs),
    /// Print the Athena CREATE EXTERNAL TABLE for a table (native Delta, or --manifest).
    Ddl(DdlArgs),
    /// How far behind each job is: Kafka offsets committed per partition, refine sources
    /// consumed vs latest, access-log objects in the last 24 h and the newest log time.
    Lag {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        /// The pipeline.
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// SQL over the lake's tables with DataFusion (tables named by path: raw/order -> raw_order).
    /// Needs the `sql` feature: `cargo run --features sql --bin lakestream -- sql ...`.
    Sql(SqlArgs),
    /// Reports over the lake.
    Report {
        /// The report.
        #[command(subcommand)]
        report: ReportCommand,
    },
    /// A table's commits, newest first: operation, rows/files/bytes added and removed, txns.
    History(HistoryArgs),
    /// The Glue Data Catalog: keep every table registered (`[catalog]` in the config).
    Catalog {
        /// The catalog command.
        #[command(subcommand)]
        command: CatalogCommand,
    },
}
