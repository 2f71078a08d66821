//! The one error type of this crate: what is wrong with a config and where.

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config is invalid; the message names the key and what to write instead.
    #[error("config: {0}")]
    Config(String),
    /// A config file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}
