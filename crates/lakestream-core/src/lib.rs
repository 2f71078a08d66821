//! Lakestream core: decoding source records to Arrow, per-partition dedup, dead letters and the
//! Delta commit engine, over the config and event types of `lakestream_formats`. It never
//! imports Lambda or AWS-event types: the function crates adapt their events into
//! `lakestream_formats::record::SourceRecord`s and call [`KafkaIngestor::ingest`] (or the
//! access-log, refine and maintenance entry points).

pub mod access_log;
pub mod cdc;
pub mod clock;
#[allow(clippy::disallowed_methods)] // the commit engine builds on the raw table
pub mod commit;
pub mod dead_letter;
pub mod error;
pub mod inspect;
pub mod intercept;
pub mod kafka;
pub mod load;
pub mod maintenance;
pub mod partition_path;
pub mod put_probe;
pub mod read;
pub mod redact;
pub mod refine;
pub mod s3_object;
pub mod schema;
pub mod seed;
pub mod storage;
#[allow(clippy::disallowed_methods)] // the table layer owns the raw table
pub mod table;
pub mod timestamp;

pub use clock::{Clock, FixedClock, SystemClock};
pub use error::{Error, Result};
pub use kafka::{IngestReport, KafkaIngestor, Redrive, RedriveReport, TableReport};
pub use storage::Lake;
