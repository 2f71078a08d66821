//! The tables maintenance runs on: every table the pipeline writes
//! ([`PipelineConfig::tables`]: topic tables, dead letters, access logs, refine outputs, CDC
//! tombstones), with the per-bucket access-log directory and the CDC families' directories
//! (bronze, silver, tombstones) expanded into the tables found under them. The maintenance function and the CLI's `--all` both use [`maintained_tables`], so the
//! schedule and a manual run cover the same set.

use crate::error::Result;
use crate::read::{SkippedFolder, list_child_tables};
use crate::storage::Lake;
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::tables::TableKind;

/// One table to maintain.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MaintainedTable {
    /// Path relative to the lake root.
    pub name: String,
    /// What it holds (never [`TableKind::AccessLogDirectory`]: its tables are listed instead,
    /// as [`TableKind::AccessLogs`]; a CDC family's silver tables are [`TableKind::RefineOutput`],
    /// its tombstone tables [`TableKind::Tombstones`], its bronze tables
    /// [`TableKind::CdcDirectory`]).
    pub kind: TableKind,
}

/// Every table of the pipeline, sorted by name; per-bucket access-log tables are found by
/// listing the prefix (one LIST plus one log probe per bucket directory). Tables that do not
/// exist yet are listed too (jobs skip them). A listing that fails is an error: the schedule
/// must not report success while skipping tables. A folder under the access-log prefix whose
/// name cannot be a table is left out (see [`maintained_tables_and_skipped`]).
pub async fn maintained_tables(
    config: &PipelineConfig,
    lake: &Lake,
) -> Result<Vec<MaintainedTable>> {
    Ok(maintained_tables_and_skipped(config, lake).await?.0)
}

/// [`maintained_tables`] plus the folders under the access-log prefix that were skipped because
/// their name cannot be a table (each logged as a warning), for the jobs to report.
pub async fn maintained_tables_and_skipped(
    config: &PipelineConfig,
    lake: &Lake,
) -> Result<(Vec<MaintainedTable>, Vec<SkippedFolder>)> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for t in config.tables() {
        match t.kind {
            TableKind::AccessLogDirectory => {
                let found = list_child_tables(lake, &t.name).await?;
                skipped.extend(found.skipped);
                for name in found.tables {
                    out.push(MaintainedTable {
                        name,
                        kind: TableKind::AccessLogs,
                    });
                }
            }
            // Expanded below, family by family.
            TableKind::CdcDirectory => {}
            kind => out.push(MaintainedTable { name: t.name, kind }),
        }
    }
    // CDC families: bronze, silver and tombstone tables found by listing their directories.
    for (name, what) in crate::refine::cdc::family::family_table_names(lake, config).await? {
        let kind = match what {
            "silver" => TableKind::RefineOutput,
            "tombstones" => TableKind::Tombstones,
            _ => TableKind::CdcDirectory,
        };
        out.push(MaintainedTable { name, kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    skipped.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((out, skipped))
}
