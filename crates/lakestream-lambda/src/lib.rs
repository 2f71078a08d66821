//! Shared Lambda glue for Lakestream functions: telemetry (JSON logs and CloudWatch EMF
//! metrics), config loading and error -> `Diagnostic` mapping. The tolerant event types the
//! functions parse live in `lakestream_formats` (`kafka`, `notification`, `failed_batch`) and
//! are imported from there. The core crate never sees any of this.

pub mod config_source;
pub mod deadline;
pub mod diagnostic;
pub mod notify;
pub mod postpone;
pub mod telemetry;

pub use diagnostic::FunctionError;
