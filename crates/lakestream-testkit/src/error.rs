//! The one error of the test kit: what a helper could not do, with what to check.

/// `Result` of the test kit's helpers.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a test helper failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The core refused (config, storage, a table that is not there, ...).
    #[error(transparent)]
    Core(#[from] lakestream_core::Error),
    /// Arrow could not cast or write a batch.
    #[error("arrow: {0}")]
    Arrow(#[from] deltalake::arrow::error::ArrowError),
    /// A temp dir or a fixture file could not be written.
    #[error("test files: {0}")]
    Io(#[from] std::io::Error),
    /// A batch lacks a column the helper reads.
    #[error("no column `{0}` in the batch; check the table's schema")]
    NoColumn(String),
    /// A table the helper needs does not exist.
    #[error("no table `{0}` in the test lake; write to it first")]
    NoTable(String),
    /// The test environment is incomplete (an S3 backend without its endpoint, ...).
    #[error("test environment: {0}")]
    Env(String),
}
