//! A sync of every table a pipeline writes ([`lakestream_core::maintenance::maintained_tables`]:
//! topic tables, dead letters, each access-log bucket's table as it appears, refine outputs,
//! CDC bronze and silver tables) that `[catalog]` selects. A table that fails is reported and
//! the others go on.

use crate::catalog::Catalog;
use crate::error::Result;
use crate::sync::{
    SyncOptions, TableSync, catalog_name, catalog_names, ensure_database, sync_table,
};
use lakestream_core::Lake;
use lakestream_formats::config::{CatalogForm, PipelineConfig};

/// One table's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableOutcome {
    /// The lake table.
    pub table: String,
    /// What the sync did, or why it failed.
    #[serde(flatten)]
    pub result: Outcome,
}

/// A table's sync, or its error.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum Outcome {
    /// Synced.
    Synced(TableSync),
    /// Failed (redacted message; `retryable` when the next run may succeed as it is).
    Failed {
        /// The error.
        error: String,
        /// Whether the next run may succeed without a change.
        retryable: bool,
    },
}

/// What a pipeline sync did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyncReport {
    /// The database.
    pub database: String,
    /// Whether it was created by this run.
    pub database_created: bool,
    /// One entry per selected table, sorted by table.
    pub tables: Vec<TableOutcome>,
}

impl SyncReport {
    /// The failed tables as `table: error` lines, or `None`.
    pub fn failures(&self) -> Option<String> {
        let failed: Vec<String> = self
            .tables
            .iter()
            .filter_map(|t| match &t.result {
                Outcome::Failed { error, .. } => Some(format!("{}: {error}", t.table)),
                Outcome::Synced(_) => None,
            })
            .collect();
        (!failed.is_empty()).then(|| failed.join("\n"))
    }
}

/// Of tables colliding on one catalog name, the one the catalog already holds under it (its
/// owner property) keeps it: a new table differing only in case never freezes the sync of
/// the table that owns the name. The newcomer fails, naming the collision.
async fn owner_keeps_its_name(
    catalog: &dyn Catalog,
    config: &PipelineConfig,
    database: &str,
    table: &str,
) -> Result<Option<(String, CatalogForm)>> {
    let Some((name, form)) = catalog_name(&config.catalog, table) else {
        return Ok(None);
    };
    // A catalog that cannot answer keeps the collision (that table fails, the others go on).
    let owner = catalog.get_table(database, &name).await.ok().flatten();
    Ok(owner
        .filter(|t| t.owner() == Some(table))
        .map(|_| (name, form)))
}

/// Sync every table of `config` that `[catalog]` selects into `database`.
pub async fn sync_pipeline(
    catalog: &dyn Catalog,
    lake: &Lake,
    config: &PipelineConfig,
    database: &str,
    opts: &SyncOptions,
) -> Result<SyncReport> {
    let tables: Vec<String> = lakestream_core::maintenance::maintained_tables(config, lake)
        .await?
        .into_iter()
        .map(|t| t.name)
        .collect();
    let database_created = ensure_database(catalog, database, opts.dry_run).await?;
    let mut out = Vec::new();
    for (table, named) in catalog_names(&config.catalog, &tables) {
        let named = match named {
            Err(collision) => owner_keeps_its_name(catalog, config, database, &table)
                .await?
                .ok_or(collision),
            ok => ok,
        };
        let result = match named {
            Err(e) => Outcome::Failed {
                error: e,
                retryable: false,
            },
            Ok((name, form)) => {
                match sync_table(catalog, lake, database, &table, &name, form, opts).await {
                    Ok(s) => Outcome::Synced(s),
                    Err(e) => Outcome::Failed {
                        error: e.redacted(),
                        retryable: e.retryable(),
                    },
                }
            }
        };
        out.push(TableOutcome { table, result });
    }
    Ok(SyncReport {
        database: database.to_string(),
        database_created,
        tables: out,
    })
}
