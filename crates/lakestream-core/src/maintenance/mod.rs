//! Table maintenance, safe to run while ingestion keeps writing: compaction, vacuum,
//! checkpoints with log cleanup, and incremental symlink manifests for Athena/Presto/Hive.
//! Vacuum and log cleanup keep what lagging refine jobs still need ([`readers`]).

pub mod checkpoint;
pub mod compact;
pub mod manifest;
pub mod readers;
pub mod tables;
pub mod vacuum;
mod zorder;

pub use checkpoint::{CheckpointReport, checkpoint};
pub use compact::{CompactOptions, CompactReport, compact};
pub use manifest::{ManifestReport, manifest};
pub use readers::{Reader, Readers, refine_readers};
pub use tables::{MaintainedTable, maintained_tables, maintained_tables_and_skipped};
pub use vacuum::{VacuumOptions, VacuumReport, vacuum};
