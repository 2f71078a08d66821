//! Lakestream's pure parsers: everything that turns bytes from outside (a config file, a Lambda
//! event, an SQS message body, an access-log line) into typed values. No delta-rs, no AWS SDK,
//! no I/O but reading a config file, so the fuzz targets under `fuzz/` build in a minute and
//! every crate above can trust what comes out of here.

pub mod access_log;
pub mod civil;
pub mod config;
pub mod error;
pub mod failed_batch;
pub mod fuzzing;
pub mod kafka;
pub mod names;
pub mod notification;
pub mod record;
pub mod refine;
pub mod tables;

pub use error::{Error, Result};
