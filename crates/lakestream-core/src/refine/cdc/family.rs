//! Family expansion: a `[[cdc]]` family's tables are found at run time by listing its bronze
//! directory down to the template's depth (a folder is a table when it has `_delta_log/`: one
//! HEAD of its `_last_checkpoint`, else one LIST, 16 folders at a time; a warm refine process
//! does not ask again of a folder its previous listing found to be a table,
//! [`all_jobs_after`]);
//! each becomes the apply job [`CdcFamily::apply_job`] (bronze -> silver). Names that do not
//! fit the template, fail the name check or are not in the family's `tables` are skipped with a
//! warning. Refine, maintenance and `lakestream lag` see the same jobs.

use crate::error::{Error, Result};
use crate::storage::Lake;
use crate::table::TableHandle;
use deltalake::Path;
use deltalake::logstore::object_store::ObjectStoreExt;
use futures::StreamExt;
use lakestream_formats::config::{CdcFamily, FamilyTable, PipelineConfig};
use lakestream_formats::refine::{JobKind, RefineJob};
use std::collections::HashSet;

/// The tables of `family` that have a bronze table, sorted. A folder in `known` (a table path
/// an earlier listing found to be a table) is taken as one without a LIST of its own.
pub async fn family_tables(
    lake: &Lake,
    family: &CdcFamily,
    known: &HashSet<String>,
) -> Result<Vec<FamilyTable>> {
    let directory = family.bronze_directory();
    let depth = depth_of(&directory, &family.bronze_template());
    Ok(listed_at(lake, &directory, depth, None, known)
        .await?
        .into_iter()
        .filter_map(|name| match family.table_of_bronze(&name) {
            Some(t) if family.includes(&t) => Some(t),
            Some(_) => None,
            None => {
                tracing::warn!(family = %family.family, folder = %name, "bronze folder skipped: its name does not fit the family's bronze template or cannot name a table");
                None
            }
        })
        .collect())
}

/// Tables (folders with `_delta_log/`) of the template's depth under `directory`, as names
/// relative to the lake root; a missing directory has none.
pub async fn listed(lake: &Lake, directory: &str, template: &str) -> Result<Vec<String>> {
    listed_at(
        lake,
        directory,
        depth_of(directory, template),
        None,
        &HashSet::new(),
    )
    .await
}

fn depth_of(directory: &str, template: &str) -> usize {
    template
        .split('/')
        .count()
        .saturating_sub(directory.split('/').count())
}

/// The tables of every family (bronze, silver, and the apply jobs' tombstones), found by
/// listing, with what each is: `"bronze"`, `"silver"` or `"tombstones"`.
pub async fn family_table_names(
    lake: &Lake,
    config: &PipelineConfig,
) -> Result<Vec<(String, &'static str)>> {
    let mut out = Vec::new();
    for f in &config.cdc {
        for (dir, template, what) in [
            (f.bronze_directory(), f.bronze_template(), "bronze"),
            (f.silver_directory(), f.silver_template(), "silver"),
        ] {
            for t in listed(lake, &dir, &template).await? {
                out.push((t, what));
            }
        }
        let tombs = lakestream_formats::tables::cdc_tombstone_directory(&f.family);
        for t in listed_at(lake, &tombs, 1, Some("tombstones"), &HashSet::new()).await? {
            out.push((t, "tombstones"));
        }
    }
    Ok(out)
}

/// Tables `depth` folders under `directory` (plus `suffix`, a fixed last segment): a folder is
/// one when it has `_delta_log/` ([`is_table`]) or is in `known`.
async fn listed_at(
    lake: &Lake,
    directory: &str,
    depth: usize,
    suffix: Option<&str>,
    known: &HashSet<String>,
) -> Result<Vec<String>> {
    let root = TableHandle::open(lake, directory)?;
    let store = root.object_store();
    let mut level: Vec<String> = vec![String::new()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for rel in &level {
            let prefix = (!rel.is_empty()).then(|| Path::from(rel.as_str()));
            let listing = store
                .list_with_delimiter(prefix.as_ref())
                .await
                .map_err(|e| Error::storage(directory, e))?;
            for dir in listing.common_prefixes {
                let name = dir.filename().unwrap_or_default();
                if name.is_empty() || name.starts_with('_') {
                    continue;
                }
                next.push(if rel.is_empty() {
                    name.to_string()
                } else {
                    format!("{rel}/{name}")
                });
            }
        }
        level = next;
    }
    let candidates: Vec<(String, String)> = level
        .into_iter()
        .map(|rel| {
            let rel = match suffix {
                Some(s) => format!("{rel}/{s}"),
                None => rel,
            };
            (format!("{directory}/{rel}"), rel)
        })
        .collect();
    // The folders not known are asked FOLDERS_AT_ONCE at a time (a cold listing of a family of
    // 70 tables waited for 70 LISTs one after another).
    let asked = futures::stream::iter(candidates)
        .map(|(table, rel)| {
            let store = store.clone();
            async move {
                let table_here = known.contains(&table) || is_table(&*store, &rel).await?;
                Ok::<_, deltalake::DeltaTableError>(table_here.then_some(table))
            }
        })
        .buffered(FOLDERS_AT_ONCE)
        .collect::<Vec<_>>()
        .await;
    let mut tables = Vec::new();
    for t in asked {
        if let Some(t) = t.map_err(|e| Error::storage(directory, e))? {
            tables.push(t);
        }
    }
    tables.sort();
    Ok(tables)
}

/// Folders asked at once whether they are tables ([`listed_at`]).
const FOLDERS_AT_ONCE: usize = 16;

/// Whether the folder `rel` (relative to the store's root) holds a table: its
/// `_delta_log/_last_checkpoint` exists (one HEAD, at a twelfth of a LIST's price: a table
/// with a checkpoint, any table past its first `delta.checkpointInterval` commits), or else a
/// LIST of the folder finds `_delta_log/`.
async fn is_table(
    store: &dyn deltalake::ObjectStore,
    rel: &str,
) -> std::result::Result<bool, deltalake::DeltaTableError> {
    let hint = Path::from(format!("{rel}/_delta_log/_last_checkpoint"));
    match store.head(&hint).await {
        Ok(_) => return Ok(true),
        Err(deltalake::ObjectStoreError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let listing = store.list_with_delimiter(Some(&Path::from(rel))).await?;
    Ok(listing
        .common_prefixes
        .iter()
        .any(|p| p.filename() == Some("_delta_log")))
}

/// The apply jobs of every family table found by listing, sorted by name (`known`: bronze
/// tables an earlier listing found, see [`family_tables`]).
pub async fn family_jobs(
    lake: &Lake,
    config: &PipelineConfig,
    known: &HashSet<String>,
) -> Result<Vec<RefineJob>> {
    let mut jobs = Vec::new();
    for family in &config.cdc {
        for t in family_tables(lake, family, known).await? {
            match family.apply_job(&t) {
                Ok(j) => jobs.push(j),
                Err(e) => {
                    tracing::warn!(family = %family.family, table = %t.qualified(), error = %e, "family table skipped: its silver table cannot be named");
                }
            }
        }
    }
    Ok(jobs)
}

/// The configured refine jobs plus every family table's apply job (a configured job of the
/// same name wins).
pub async fn all_jobs(lake: &Lake, config: &PipelineConfig) -> Result<Vec<RefineJob>> {
    all_jobs_after(lake, config, &[]).await
}

/// [`all_jobs`] again after an earlier listing found `before`: a bronze table one of them
/// reads is not asked again whether it is a table (a warm process lists the family's
/// directories, not each table; a table deleted since is the apply job's to find).
pub async fn all_jobs_after(
    lake: &Lake,
    config: &PipelineConfig,
    before: &[RefineJob],
) -> Result<Vec<RefineJob>> {
    // Only what a listing found: the sources of family apply jobs (a configured job's source
    // may be a folder that is not a table yet).
    let known: HashSet<String> = before
        .iter()
        .filter(|j| matches!(&j.kind, JobKind::Cdc(c) if c.family.is_some()))
        .flat_map(|j| j.sources())
        .map(str::to_string)
        .collect();
    let mut jobs = config.refine.clone();
    for j in family_jobs(lake, config, &known).await? {
        if !jobs.iter().any(|c| c.job == j.job) {
            jobs.push(j);
        }
    }
    Ok(jobs)
}
