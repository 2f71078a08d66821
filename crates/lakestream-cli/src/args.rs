//! The command line, as clap types: one variant per command, each with its own argument struct
//! that the command's function in `commands/` takes. Parsing only; no behaviour.

use crate::crash;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

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

/// `lakestream catalog ...`.
#[derive(Subcommand)]
pub enum CatalogCommand {
    /// Register every table `[catalog]` selects in the Glue database (created if missing):
    /// native Delta tables, or Hive tables over the symlink manifests (written first) with
    /// their partitions; columns follow the Delta schema. Idempotent. Uses the AWS
    /// environment (`AWS_ENDPOINT_URL` for an emulator).
    Sync(CatalogSyncArgs),
}

/// `lakestream catalog sync`.
#[derive(clap::Args)]
pub struct CatalogSyncArgs {
    /// Show what would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The Glue database (default `[catalog].database`, else `lakestream`).
    #[arg(long)]
    pub database: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream optimize`.
#[derive(clap::Args)]
pub struct OptimizeArgs {
    /// Table, e.g. raw/order.
    pub table: Option<String>,
    /// Every table the pipeline writes (the maintenance function's list).
    #[arg(long, conflicts_with = "table")]
    pub all: bool,
    /// Show the plan, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Target file size in MiB.
    #[arg(long, default_value_t = 128)]
    pub target_mib: u64,
    /// Minimum small files in a partition before it is compacted.
    #[arg(long, default_value_t = 4)]
    pub min_files: usize,
    /// Only partitions changed within this many hours.
    #[arg(long)]
    pub changed_within_hours: Option<i64>,
    /// Z-order rows by these columns (comma separated).
    #[arg(long, value_delimiter = ',')]
    pub zorder: Vec<String>,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream vacuum`.
#[derive(clap::Args)]
pub struct VacuumArgs {
    /// Table.
    pub table: Option<String>,
    /// Every table the pipeline writes (the maintenance function's list).
    #[arg(long, conflicts_with = "table")]
    pub all: bool,
    /// List what would be deleted.
    #[arg(long)]
    pub dry_run: bool,
    /// Retention in hours (default: the table's, 168 h).
    #[arg(long)]
    pub retention_hours: Option<i64>,
    /// Allow a window shorter than the table's (untracked files younger than 1 h, which a
    /// writer may be about to commit, are kept whatever the window).
    #[arg(long)]
    pub force: bool,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream checkpoint` and `lakestream manifest`: a table or all, and a dry run.
#[derive(clap::Args)]
pub struct TablesArgs {
    /// Table.
    pub table: Option<String>,
    /// Every table the pipeline writes (the maintenance function's list).
    #[arg(long, conflicts_with = "table")]
    pub all: bool,
    /// Report only.
    #[arg(long)]
    pub dry_run: bool,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream refine`.
#[derive(clap::Args)]
pub struct RefineArgs {
    /// Jobs to run (default: every `[[refine]]` job of the config).
    pub jobs: Vec<String>,
    /// Record TABLE's version V as consumed by the (one) named job, writing no rows
    /// (`-1`: read it from the start). For versions that are gone or a re-created source.
    #[arg(long, value_name = "TABLE=V")]
    pub skip_to: Option<String>,
    /// Stop each job after this many committed runs.
    #[arg(long, default_value_t = 10_000)]
    pub max_runs: usize,
    /// Print the reports as JSON.
    #[arg(long)]
    pub json: bool,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream redrive`.
#[derive(clap::Args)]
pub struct RedriveArgs {
    /// On-failure record files, directories of them, or s3://bucket/prefix.
    #[arg(required = true)]
    pub sources: Vec<String>,
    /// Also write records of tables without kafka_partition/kafka_offset columns, which
    /// cannot be checked against the table (a record that had landed is written twice).
    #[arg(long)]
    pub allow_duplicates: bool,
    /// Print the reports as JSON.
    #[arg(long)]
    pub json: bool,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream load`.
#[derive(clap::Args)]
pub struct LoadArgs {
    /// The table, e.g. raw/order.
    pub table: String,
    /// Files to load (format from the extension: .parquet, .csv, .json/.jsonl).
    #[arg(required = true)]
    pub files: Vec<String>,
    /// The files' format, when the extension does not say: parquet, csv or json.
    #[arg(long)]
    pub format: Option<String>,
    /// Print the reports as JSON.
    #[arg(long)]
    pub json: bool,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream show`.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// Table name, e.g. raw/order.
    pub table: String,
    /// Rows to print.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Read the table as of this version.
    #[arg(long, conflicts_with = "as_of")]
    pub version: Option<u64>,
    /// Read the table as of this time: the latest version committed at or before it
    /// (RFC 3339, e.g. 2026-11-30T21:00:00Z, or a date = midnight UTC).
    #[arg(long)]
    pub as_of: Option<String>,
    /// Print the rows as JSON lines (with --version/--as-of).
    #[arg(long)]
    pub json: bool,
    /// The lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream changes`.
#[derive(clap::Args)]
pub struct ChangesArgs {
    /// Table name.
    pub table: String,
    /// First version.
    #[arg(long)]
    pub from: u64,
    /// Last version (default: the latest).
    #[arg(long)]
    pub to: Option<u64>,
    /// Rows to print (table output).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print every row as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// The lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream ddl`.
#[derive(clap::Args)]
pub struct DdlArgs {
    /// Table name.
    pub table: String,
    /// The Hive form over the symlink manifests, with exact columns and partitions.
    #[arg(long)]
    pub manifest: bool,
    /// Athena table name (default: the path with every other character as `_`, refused when
    /// another table of the pipeline maps to the same name).
    #[arg(long)]
    pub name: Option<String>,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream sql`.
#[derive(clap::Args)]
pub struct SqlArgs {
    /// The query.
    pub query: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: SqlFormat,
    /// Also register TABLE at version V, as <name>_v<V> (e.g. raw/order=3 -> raw_order_v3).
    #[arg(long, value_name = "TABLE=V")]
    pub at: Vec<String>,
    /// The pipeline and lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// `lakestream history`.
#[derive(clap::Args)]
pub struct HistoryArgs {
    /// Table name.
    pub table: String,
    /// Newest N commits only.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    /// The lake.
    #[command(flatten)]
    pub lake: LakeArgs,
}

/// Output of `lakestream sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SqlFormat {
    /// A text table.
    Table,
    /// CSV with a header.
    Csv,
    /// JSON lines.
    Json,
}

/// `lakestream report ...`.
#[derive(Subcommand)]
pub enum ReportCommand {
    /// Which datasets are read most, how old the data read is, what nobody read lately
    /// (over the access-log tables).
    Access {
        /// Window in days: only its requests are read (files pruned by date and time
        /// statistics) and counted; datasets with requests but no read in it are cold candidates.
        #[arg(long, default_value_t = 30)]
        since: i64,
        /// Key segments that name a dataset (`sales/2026/...` at 1: `sales`).
        #[arg(long, default_value_t = 1)]
        depth: usize,
        /// Also write a self-contained HTML page (inline SVG charts, nothing fetched).
        #[arg(long)]
        html: Option<PathBuf>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        /// The pipeline and lake.
        #[command(flatten)]
        lake: LakeArgs,
    },
}

/// `lakestream access-logs ...`.
#[derive(Subcommand)]
pub enum AccessLogsCommand {
    /// Parse a log file (plain or gzip): one JSON object per line, the record or its error.
    Parse {
        /// Access log file.
        file: PathBuf,
    },
}

/// `lakestream invoke ...`: one event file through a function's handler.
#[derive(Subcommand)]
pub enum InvokeCommand {
    /// The msk-ingest handler with an MSK event (e.g. events/msk-orders.json).
    Msk {
        /// Event JSON file.
        #[arg(long)]
        event: PathBuf,
        /// The pipeline and lake.
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// The s3-log-ingest handler with an SQS event (e.g. events/sqs-s3-notifications.json).
    S3Logs {
        /// SQS event JSON file.
        #[arg(long)]
        event: PathBuf,
        /// A directory standing in for buckets (`DIR/<bucket>/<key>`; absolute keys and `..` are
        /// refused); default: read from S3 (AWS_ENDPOINT_URL and the usual AWS variables apply).
        /// Either way only `access_logs.source_buckets` (or LAKESTREAM_LOG_BUCKETS) and the DMS / files `[[cdc]]` families' location buckets are read.
        #[arg(long)]
        objects: Option<PathBuf>,
        /// The pipeline and lake.
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// The maintenance handler with a schedule input (e.g. events/maintenance-optimize.json).
    Maintenance {
        /// Schedule input JSON file.
        #[arg(long)]
        event: PathBuf,
        /// The pipeline and lake.
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// The refine handler with a schedule input (e.g. events/refine-curated.json).
    Refine {
        /// Schedule input JSON file.
        #[arg(long)]
        event: PathBuf,
        /// The pipeline and lake.
        #[command(flatten)]
        lake: LakeArgs,
    },
}
