//! S3 server access logs: the line parser, the Arrow builder, the ingestion of log objects
//! into per-bucket Delta tables, and the access-pattern report over those tables.

pub mod arrow;
pub mod generate;
pub mod ingest;
mod object;
pub use lakestream_formats::access_log as parse;
mod planner;
pub mod report;
pub mod source;
pub mod window;

pub use arrow::{AccessLogBatchBuilder, access_log_schema};
pub use ingest::{AccessLogIngestor, LogObject, ObjectIngestReport, ObjectOutcome};
pub use parse::{AccessLogRecord, ParseError, parse_line};
pub use source::{Fetched, LocalObjects, ObjectSource, ReadObject};
