//! Shared Lambda glue for Lakestream functions: tolerant event types, telemetry (JSON logs and
//! CloudWatch EMF metrics), config loading and error -> `Diagnostic` mapping. The core crate
//! never sees any of this.

pub mod config_source;
pub mod diagnostic;
pub use lakestream_formats::{failed_batch, kafka, notification as s3_notification};
pub mod telemetry;

pub use diagnostic::FunctionError;
