//! Notified S3 objects, as the ingestors that read them see them: where they are read from
//! ([`ObjectSource`]: S3 in the function, a directory locally and in tests), one object
//! version opened for streaming and ranged reads ([`ObjectVersion`]), and what one ingest call
//! did per object ([`ObjectIngestReport`]). Shared by the access-log ingestor (`access_log`)
//! and the CDC file ingestor (`cdc::files`); it imports neither.
//!
//! Modules import downward only: `source` -> `version`; `outcome` imports neither.

pub mod outcome;
pub mod source;
pub mod version;

pub use outcome::{ObjectIngestReport, ObjectOutcome};
pub use source::{Fetched, LocalObjects, ObjectSource, ReadObject};
pub use version::{InMemoryVersion, ObjectVersion, Opened};
