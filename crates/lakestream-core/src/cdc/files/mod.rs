//! S3 file deliveries into bronze (ARCHITECTURE.md "CDC lakehouse"): AWS DMS full-load and CDC
//! files (CSV, Parquet) and plain CSV / JSON lines / Parquet files of `[[cdc]]` families with
//! `source = "dms" | "files"`, notified through the same S3-notification queue as access logs.
//!
//! Modules import downward only: `ingest` (one object: open, resume, chunk loop, dead
//! letters) -> `planner` (one chunk's commit) and `decode` (chunks of any format) -> `spec` (what one object needs: columns, bounds) -> `parquet`
//! / `text` (records out of the byte stream; `parquet_bounds` checks a Parquet object's
//! metadata before parquet-rs decodes it, `parquet_dictionary` expands dictionary-encoded text
//! within the decoded bound) -> `rows` (text -> typed columns, bad rows) ->
//! `layout` (file kinds, `__seq`, bronze columns).

pub mod decode;
pub mod ingest;
pub mod layout;
pub mod parquet;
pub mod parquet_bounds;
pub mod parquet_dictionary;
mod parquet_thrift;
pub mod planner;
pub mod rows;
mod spec;
pub mod text;

pub use ingest::{CdcFileIngestor, FileSettings};
pub use layout::{FileKind, Format, seq};
pub use planner::ObjectTxn;
