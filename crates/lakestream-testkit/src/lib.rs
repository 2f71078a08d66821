//! Test support shared by the tests of every crate, so a test lake, the example config, the S3
//! gating and a stopped clock are written once (they were copied into each crate's tests and had
//! started to drift). Used only as a dev-dependency: it links the core (never DataFusion, never
//! Lambda types), so function crates keep building without it.

pub mod access_logs;
pub mod backend;
pub mod cdc;
pub mod clock;
pub mod columns;
pub mod config;
pub mod error;
pub mod files;
pub mod lagging;
pub mod lake;
pub mod records;

pub use backend::{Backend, backends, s3_endpoint, unique_suffix};
pub use clock::{INGEST_TIME, LOG_TIME, fixed_clock, ingest_time, log_time};
pub use columns::{assert_accounted, int64s, offsets, rows_json, strings};
pub use config::{
    CDC_OP, CDC_ROW, EXAMPLE, cdc_config, cdc_topic, cdc_upsert, example_config,
    example_config_with,
};
pub use error::{Error, Result};
pub use files::files_under;
pub use lake::TestLake;
