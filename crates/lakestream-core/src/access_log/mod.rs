//! S3 server access logs: the Arrow builder, the ingestion of log objects into per-bucket Delta
//! tables, and the access-pattern report over those tables. The line parser and the notified
//! object ([`lakestream_formats::access_log`], [`lakestream_formats::notification::LogObject`])
//! are pure and live in `lakestream_formats`.
//!
//! Modules import downward only: `ingest` (commits) -> `gather` (reads and parses) -> `object`
//! (one object's lines) -> `arrow`, and `report` -> `window` -> `arrow`; `outcome`, `source`
//! and `planner` import none of the others but `arrow`; `source` opens object versions
//! (`version`) for the streaming readers of CDC files. No two modules import each other.

pub mod arrow;
mod gather;
pub mod generate;
pub mod ingest;
mod object;
pub mod outcome;
mod planner;
pub mod report;
pub mod source;
pub mod version;
pub mod window;

pub use arrow::{AccessLogBatchBuilder, access_log_schema};
pub use ingest::AccessLogIngestor;
pub use outcome::{ObjectIngestReport, ObjectOutcome};
pub use source::{Fetched, LocalObjects, ObjectSource, ReadObject};
pub use version::{InMemoryVersion, ObjectVersion, Opened};
