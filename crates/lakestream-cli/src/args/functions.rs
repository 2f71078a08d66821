//! Arguments of the commands around the functions: `report`, `access-logs`, `invoke`
//! (one event file through a function's handler).

use super::LakeArgs;
use clap::Subcommand;
use std::path::PathBuf;

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
