//! `lakestream catalog sync`: every table `[catalog]` selects registered in the Glue Data
//! Catalog (see `lakestream_catalog`), with a table of what changed, or JSON.

use super::{load_config, open_lake};
use crate::args::CatalogSyncArgs;
use anyhow::{Result, bail};
use lakestream_catalog::pipeline::Outcome;
use lakestream_catalog::{Action, GlueCatalog, SyncOptions, sync_pipeline};

/// The database when neither `--database` nor `[catalog].database` names one.
pub const DEFAULT_DATABASE: &str = "lakestream";

/// Run the sync; fails (after printing the report) when a table failed.
pub async fn sync(args: CatalogSyncArgs) -> Result<()> {
    // A config without `[[cdc]]` also covers the example families `lakestream demo` writes
    // (`examples/cdc-crm.toml`): their tables are found by listing, so on a lake without them
    // this adds nothing.
    let config = super::demo_cdc::with_families(&load_config(&args.lake)?)?;
    let lake = open_lake(&config, &args.lake)?;
    let database = args
        .database
        .clone()
        .or_else(|| config.catalog.database.clone())
        .unwrap_or_else(|| DEFAULT_DATABASE.to_string());
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let catalog = GlueCatalog::new(aws_sdk_glue::Client::new(&aws));
    let opts = SyncOptions::from_config(&config.catalog, args.dry_run, true);
    let report = sync_pipeline(&catalog, &lake, &config, &database, &opts).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let verb = if args.dry_run { "would be " } else { "" };
        if report.database_created {
            println!("database {database}: {verb}created");
        }
        for t in &report.tables {
            match &t.result {
                Outcome::Synced(s) => {
                    let action = match s.action {
                        Action::Created => format!("{verb}created"),
                        Action::Updated => format!("{verb}updated ({})", s.changes.join("; ")),
                        Action::Unchanged => "unchanged".to_string(),
                        Action::Skipped => "skipped: the table does not exist yet".to_string(),
                    };
                    let parts =
                        if s.partitions_added + s.partitions_removed + s.partitions_pending > 0 {
                            format!(
                                ", partitions +{} -{}{}",
                                s.partitions_added,
                                s.partitions_removed,
                                if s.partitions_pending > 0 {
                                    format!(" ({} next run)", s.partitions_pending)
                                } else {
                                    String::new()
                                }
                            )
                        } else {
                            String::new()
                        };
                    println!(
                        "{:<40} {database}.{} [{:?}] {action}{parts}",
                        t.table, s.name, s.form
                    );
                }
                Outcome::Failed { error, .. } => println!("{:<40} FAILED: {error}", t.table),
            }
        }
    }
    if let Some(failed) = report.failures() {
        bail!("catalog sync failed for:\n{failed}");
    }
    Ok(())
}
