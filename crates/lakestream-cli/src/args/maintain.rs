//! Arguments of the table maintenance commands (`optimize`, `vacuum`, `checkpoint`,
//! `manifest`) and of `catalog`.

use super::LakeArgs;
use clap::Subcommand;

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
