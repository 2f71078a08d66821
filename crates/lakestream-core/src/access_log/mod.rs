//! S3 server access logs: the Arrow builder, the ingestion of log objects into per-bucket Delta
//! tables, and the access-pattern report over those tables. The line parser and the notified
//! object ([`lakestream_formats::access_log`], [`lakestream_formats::notification::LogObject`])
//! are pure and live in `lakestream_formats`.
//!
//! Where objects are read from and what an ingest call did per object are
//! [`crate::s3_object`]'s (shared with the CDC file ingestor, which the ingestor here hands DMS /
//! files CDC objects); they are re-exported here.
//!
//! Modules import downward only: `ingest` (commits) -> `gather` (reads and parses) -> `object`
//! (one object's lines) -> `arrow`, and `report` -> `window` -> `arrow`; `planner` imports none
//! of the others but `arrow`. No two modules import each other.

pub mod arrow;
mod gather;
pub mod generate;
pub mod ingest;
mod object;
mod planner;
pub mod report;
pub mod window;

pub use crate::s3_object::{
    Fetched, InMemoryVersion, LocalObjects, ObjectIngestReport, ObjectOutcome, ObjectSource,
    ObjectVersion, Opened, ReadObject,
};
pub use arrow::{AccessLogBatchBuilder, access_log_schema};
pub use ingest::AccessLogIngestor;
