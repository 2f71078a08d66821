//! Lakestream core: pipeline config, decoding source records to Arrow, per-partition dedup and
//! the Delta commit engine. It never imports Lambda or AWS-event types: the function crates
//! adapt their events into [`SourceRecord`]s and call [`Ingestor::ingest`].

pub mod access_log;
pub mod clock;
pub mod commit;
pub mod dead_letter_scan;
pub mod deadletter;
pub mod decode;
pub mod error;
pub mod ingest;
pub mod inspect;
pub mod intercept;
pub mod maintenance;
pub mod partition_path;
pub mod put_probe;
pub mod read;
pub mod redact;
pub mod refine;
pub mod schema;
pub mod seed;
pub mod storage;
pub mod table;
pub mod timestamp;

pub use lakestream_formats::{config, record, tables};

pub use clock::{Clock, FixedClock, SystemClock};
pub use config::PipelineConfig;
pub use error::{Error, Result};
pub use ingest::{IngestReport, Ingestor, Redrive, RedriveReport, TableReport};
pub use record::{RecordValue, SourceRecord};
pub use storage::Lake;
