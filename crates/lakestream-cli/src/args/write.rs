//! Arguments of the commands that write tables from other sources: `refine`, `redrive`,
//! `load`.

use super::LakeArgs;

/// `lakestream refine`.
#[derive(clap::Args)]
pub struct RefineArgs {
    /// Jobs to run (default: every `[[refine]]` job of the config).
    pub jobs: Vec<String>,
    /// Record TABLE's version V as consumed by the (one) named job, writing no rows
    /// (`-1`: read it from the start). For versions that are gone or a re-created source.
    #[arg(long, value_name = "TABLE=V", conflicts_with = "rebuild")]
    pub skip_to: Option<String>,
    /// Rebuild the (one) named job's output: empty it and mark its sources unread in one
    /// commit, then run the job (a CDC apply's first run reads bronze's snapshot, so it
    /// works after bronze's early log is cleaned).
    #[arg(long)]
    pub rebuild: bool,
    /// Void the truncate at SEQ (its `__seq` in bronze) for the (one) named CDC apply job and
    /// rebuild its output without it: for a forged or mistaken truncate that emptied silver.
    /// Later runs ignore that truncate wherever it comes from.
    #[arg(long, value_name = "SEQ", conflicts_with = "skip_to")]
    pub void_truncate: Option<String>,
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
