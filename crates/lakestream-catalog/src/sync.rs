//! One sync: per table, create the catalog table if missing, update it when the Delta schema
//! (or the configured form) changed, and for manifest-form tables register the partitions the
//! live files have and the catalog lacks (and deregister the ones no file has any more),
//! bounded per run. Idempotent: a second sync with nothing new makes no changing call. Safe to
//! overlap with itself and with writers: every step re-reads the catalog, an "already exists"
//! from another sync is taken as done, and what a writer adds meanwhile is caught next run.

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::model::{
    CatalogPartition, CatalogTable, MANIFEST_DIR, catalog_location, desired_partitions,
    desired_table,
};
use lakestream_core::Lake;
use lakestream_core::table::TableHandle;
use lakestream_formats::config::{CatalogConfig, CatalogForm};
use std::collections::{BTreeMap, BTreeSet};

/// Glue's limits per batch call.
const CREATE_BATCH: usize = 100;
const DELETE_BATCH: usize = 25;

/// How a sync runs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Report what would change, change nothing (catalog and manifests).
    pub dry_run: bool,
    /// Write the symlink manifests of manifest-form tables first (the CLI; the maintenance
    /// manifest job has just written them).
    pub write_manifests: bool,
    /// At most this many partitions registered plus deregistered per table.
    pub max_partitions: usize,
}

impl SyncOptions {
    /// The options `[catalog]` gives.
    pub fn from_config(config: &CatalogConfig, dry_run: bool, write_manifests: bool) -> Self {
        Self {
            dry_run,
            write_manifests,
            max_partitions: config.max_partitions_per_run,
        }
    }
}

/// What a sync did (or, in a dry run, would do) to a catalog table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// It was missing and is now registered.
    Created,
    /// Its definition changed.
    Updated,
    /// It was as it should be.
    Unchanged,
    /// The lake table does not exist yet: nothing to register.
    Skipped,
}

/// One table's sync.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableSync {
    /// The lake table (`raw/order`).
    pub table: String,
    /// The catalog table (`raw_order`).
    pub name: String,
    /// How it is registered.
    pub form: CatalogForm,
    /// What happened to the table definition.
    pub action: Action,
    /// What changed in it (`columns: + note string`); on create, empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// Partitions the live files have (manifest form).
    pub partitions: usize,
    /// Partitions registered by this run.
    pub partitions_added: usize,
    /// Partitions deregistered by this run (no live file has them any more).
    pub partitions_removed: usize,
    /// Partitions left for the next run (the per-run bound was reached).
    pub partitions_pending: usize,
    /// Nothing was changed: this is what would happen.
    pub dry_run: bool,
}

impl TableSync {
    /// Whether the run changed (or would change) anything.
    pub fn changed(&self) -> bool {
        matches!(self.action, Action::Created | Action::Updated)
            || self.partitions_added + self.partitions_removed > 0
    }
}

/// Make sure `database` exists; `true` when this call created it (or, dry, would).
pub async fn ensure_database(catalog: &dyn Catalog, database: &str, dry_run: bool) -> Result<bool> {
    if catalog.database_exists(database).await? {
        return Ok(false);
    }
    if !dry_run {
        catalog.create_database(database).await?;
    }
    Ok(true)
}

/// Sync lake table `table` as catalog table `name` of `database` in `form`.
pub async fn sync_table(
    catalog: &dyn Catalog,
    lake: &Lake,
    database: &str,
    table: &str,
    name: &str,
    form: CatalogForm,
    opts: &SyncOptions,
) -> Result<TableSync> {
    let mut out = TableSync {
        table: table.to_string(),
        name: name.to_string(),
        form,
        action: Action::Unchanged,
        changes: Vec::new(),
        partitions: 0,
        partitions_added: 0,
        partitions_removed: 0,
        partitions_pending: 0,
        dry_run: opts.dry_run,
    };
    let handle = match TableHandle::open_existing(lake, table).await {
        Ok(h) => h,
        Err(lakestream_core::Error::TableNotFound(_)) => {
            out.action = Action::Skipped;
            return Ok(out);
        }
        Err(e) => return Err(e.into()),
    };
    if form == CatalogForm::Manifest {
        // A manifest lists whole files: a reader of it would see deleted rows again.
        handle.refuse_deletion_vectors()?;
        if opts.write_manifests && !opts.dry_run {
            lakestream_core::maintenance::manifest(lake, table).await?;
        }
    }
    let location = catalog_location(&lake.table_url(table)?);
    let want = desired_table(
        table,
        name,
        &location,
        handle.arrow_schema()?.as_ref(),
        &handle.partition_columns()?,
        form,
    )?;
    match catalog.get_table(database, name).await? {
        None if opts.dry_run => out.action = Action::Created,
        None => {
            if catalog.create_table(database, &want).await? {
                out.action = Action::Created;
            } else {
                // Another sync created it meanwhile: compare with what it wrote.
                let have = catalog.get_table(database, name).await?.ok_or_else(|| {
                    Error::Config(format!(
                        "catalog table `{database}.{name}` was reported to exist, then not found; run the sync again"
                    ))
                })?;
                update_if_needed(catalog, database, table, &have, &want, opts, &mut out).await?;
            }
        }
        Some(have) => {
            update_if_needed(catalog, database, table, &have, &want, opts, &mut out).await?;
        }
    }
    if form == CatalogForm::Manifest && !want.partition_keys.is_empty() {
        sync_partitions(catalog, database, &handle, &location, &want, opts, &mut out).await?;
    }
    Ok(out)
}

/// Update `have` to `want` if they differ in what Lakestream manages, once it is sure the
/// table is Lakestream's for `table`.
async fn update_if_needed(
    catalog: &dyn Catalog,
    database: &str,
    table: &str,
    have: &CatalogTable,
    want: &CatalogTable,
    opts: &SyncOptions,
    out: &mut TableSync,
) -> Result<()> {
    let base = want
        .location
        .strip_suffix(&format!("{MANIFEST_DIR}/"))
        .unwrap_or(&want.location);
    let at_table = |l: &str| {
        let l = l.trim_end_matches('/');
        l == base.trim_end_matches('/')
            || l == format!("{}/{MANIFEST_DIR}", base.trim_end_matches('/'))
    };
    let ours = match have.owner() {
        Some(owner) => owner == table,
        // Registered by hand (`lakestream ddl` pasted into Athena) at the table's location:
        // the same table, adopted.
        None => at_table(&have.location),
    };
    if !ours {
        return Err(Error::Foreign {
            database: database.to_string(),
            name: want.name.clone(),
            table: table.to_string(),
            found: have.location.clone(),
            expected: base.to_string(),
        });
    }
    let changes = have.differences(want);
    if changes.is_empty() {
        return Ok(());
    }
    if !opts.dry_run {
        catalog
            .update_table(database, &have.merged_into(want))
            .await?;
    }
    out.action = Action::Updated;
    out.changes = changes;
    Ok(())
}

/// Register the partitions the live files have and the catalog lacks, deregister the ones no
/// live file has; at most `opts.max_partitions` in all, registrations first.
async fn sync_partitions(
    catalog: &dyn Catalog,
    database: &str,
    handle: &TableHandle,
    location: &str,
    want: &CatalogTable,
    opts: &SyncOptions,
    out: &mut TableSync,
) -> Result<()> {
    let live = desired_partitions(handle, location)?;
    out.partitions = live.len();
    // A table just created (or, dry, to be created) has none.
    let registered: BTreeSet<Vec<String>> = if opts.dry_run && out.action == Action::Created {
        BTreeSet::new()
    } else {
        catalog
            .partition_values(database, &want.name)
            .await?
            .into_iter()
            .collect()
    };
    let live_values: BTreeSet<&Vec<String>> = live.iter().map(|p| &p.values).collect();
    let missing: Vec<&CatalogPartition> = live
        .iter()
        .filter(|p| !registered.contains(&p.values))
        .collect();
    let stale: Vec<&Vec<String>> = registered
        .iter()
        .filter(|v| !live_values.contains(v))
        .collect();
    let add_n = missing.len().min(opts.max_partitions);
    let remove_n = stale.len().min(opts.max_partitions - add_n);
    out.partitions_pending = missing.len() + stale.len() - add_n - remove_n;
    if opts.dry_run {
        out.partitions_added = add_n;
        out.partitions_removed = remove_n;
        return Ok(());
    }
    for chunk in missing[..add_n].chunks(CREATE_BATCH) {
        let chunk: Vec<CatalogPartition> = chunk.iter().map(|p| (*p).clone()).collect();
        out.partitions_added += catalog.create_partitions(database, want, &chunk).await?;
    }
    for chunk in stale[..remove_n].chunks(DELETE_BATCH) {
        let chunk: Vec<Vec<String>> = chunk.iter().map(|v| (*v).clone()).collect();
        out.partitions_removed += catalog
            .delete_partitions(database, &want.name, &chunk)
            .await?;
    }
    Ok(())
}

/// The catalog name and form `config` gives lake table `table`, if it selects it.
pub fn catalog_name(config: &CatalogConfig, table: &str) -> Option<(String, CatalogForm)> {
    let form = config.form_of(table)?;
    let name = config
        .names
        .get(table.trim_matches('/'))
        .cloned()
        .unwrap_or_else(|| lakestream_core::inspect::ddl::athena_name(table));
    Some((name, form))
}

/// The catalog name of each of `tables` that `config` registers, with its form: the
/// `[catalog.names]` entry, else the Athena name (`raw/order` -> `raw_order`); two tables with
/// one name each get an error naming the other (the pipeline sync lets the one the catalog already
/// holds under the name keep it).
pub fn catalog_names(
    config: &CatalogConfig,
    tables: &[String],
) -> BTreeMap<String, Result<(String, CatalogForm), String>> {
    let chosen: Vec<(&String, String, CatalogForm)> = tables
        .iter()
        .filter_map(|t| {
            let (name, form) = catalog_name(config, t)?;
            Some((t, name, form))
        })
        .collect();
    chosen
        .iter()
        .map(|(t, name, form)| {
            let other = chosen
                .iter()
                .find(|(o, n, _)| n == name && o.trim_matches('/') != t.trim_matches('/'));
            let r = match other {
                None => Ok((name.clone(), *form)),
                Some((o, _, _)) => Err(format!(
                    "tables `{t}` and `{o}` both have the catalog name `{name}`; give one of them \
                     another in `[catalog.names]` (lower-case letters, digits, `_`)"
                )),
            };
            ((*t).clone(), r)
        })
        .collect()
}
