//! Keeps the AWS Glue Data Catalog in step with the lake, so Athena (and Spark, Trino,
//! QuickSight) see every table Lakestream writes without a hand-written DDL or an hourly
//! `MSCK REPAIR TABLE`: each table registered under `[catalog].database` — as a native Delta
//! table (`table_type = DELTA`) by default, or as a partitioned Hive table over the symlink
//! manifests — with columns following the Delta schema and, for manifest tables, the
//! partitions the live files have.
//!
//! - [`model`]: what the catalog should hold for a table (pure, from its Delta log).
//! - [`sync`]: the diff against what the catalog holds and the calls that close it.
//! - [`catalog`]: the calls behind a trait; [`GlueCatalog`] (AWS Glue) and
//!   [`catalog::MemoryCatalog`].
//! - [`pipeline`]: a sync of every table a pipeline config names (the CLI's `catalog sync`).
//!
//! Used by `lakestream catalog sync` and the maintenance function's manifest job.

pub mod catalog;
mod error;
pub mod glue;
pub mod model;
pub mod pipeline;
pub mod sync;

pub use catalog::{Catalog, MemoryCatalog};
pub use error::{Error, Result};
pub use glue::GlueCatalog;
pub use pipeline::{SyncReport, sync_pipeline};
pub use sync::{Action, SyncOptions, TableSync, catalog_names, ensure_database, sync_table};
