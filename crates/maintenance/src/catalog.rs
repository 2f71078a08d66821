//! The manifest job's catalog step: after a table's manifests are written, its catalog table
//! is synced (created, columns following the schema, new partitions registered). The
//! database is made sure of once per invocation; a table the sync fails on fails the job's
//! entry for it (the invocation is retried; every step is idempotent).

use crate::CatalogTarget;
use lakestream_catalog::{SyncOptions, catalog_names, ensure_database, sync_table};
use lakestream_core::Lake;
use lakestream_formats::config::{CatalogForm, PipelineConfig};
use std::collections::BTreeMap;

/// The catalog step of one invocation.
pub(crate) struct CatalogStep<'a> {
    target: &'a CatalogTarget,
    /// Catalog name and form per selected table, or why it cannot be registered.
    names: BTreeMap<String, Result<(String, CatalogForm), String>>,
    /// The database, if it exists (or was created); else why not.
    database: Result<(), String>,
    opts: SyncOptions,
}

impl<'a> CatalogStep<'a> {
    /// Resolve the names of `tables` and make sure the database exists.
    pub(crate) async fn prepare(
        target: &'a CatalogTarget,
        config: &PipelineConfig,
        tables: &[String],
        dry_run: bool,
    ) -> Self {
        let database = ensure_database(target.catalog.as_ref(), &target.database, dry_run)
            .await
            .map(|_| ())
            .map_err(|e| format!("catalog database `{}`: {}", target.database, e.redacted()));
        Self {
            target,
            names: catalog_names(&config.catalog, tables),
            database,
            // The manifests were written by the job itself just before.
            opts: SyncOptions::from_config(&config.catalog, dry_run, false),
        }
    }

    /// Sync `table` (if `[catalog]` selects it) and add what happened to its job `report`
    /// under `catalog`; the error when the sync failed.
    pub(crate) async fn sync(
        &self,
        lake: &Lake,
        table: &str,
        report: &mut serde_json::Value,
    ) -> Result<(), String> {
        let Some(named) = self.names.get(table) else {
            return Ok(());
        };
        // A table that does not exist yet has no manifests and no catalog table either.
        if report.get("skipped").is_some() {
            return Ok(());
        }
        let fail = |e: String| format!("manifests written; catalog sync failed: {e}");
        self.database.clone().map_err(fail)?;
        let (name, form) = named.clone().map_err(fail)?;
        let synced = sync_table(
            self.target.catalog.as_ref(),
            lake,
            &self.target.database,
            table,
            &name,
            form,
            &self.opts,
        )
        .await
        .map_err(|e| fail(e.redacted()))?;
        if let Some(obj) = report.as_object_mut() {
            obj.insert(
                "catalog".into(),
                serde_json::to_value(&synced).map_err(|e| fail(e.to_string()))?,
            );
        }
        Ok(())
    }
}
