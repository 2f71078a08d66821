//! Arguments of the commands that read tables: `show`, `changes`, `ddl`, `sql`, `history`.

use super::LakeArgs;

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
