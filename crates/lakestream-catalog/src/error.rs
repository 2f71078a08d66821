//! The crate's one error type: what failed, for which table, and whether trying again can help.

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A catalog sync error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the lake table failed (its own error says what to do).
    #[error(transparent)]
    Lake(#[from] lakestream_core::Error),
    /// A catalog call failed.
    #[error("catalog {op} of `{name}` failed: {message}{}", if *.retryable { " (retryable: the next run tries again)" } else { "" })]
    Catalog {
        /// The call (`GetTable`, `BatchCreatePartition`, ...).
        op: &'static str,
        /// The database or table it was for.
        name: String,
        /// What the catalog said.
        message: String,
        /// Throttling, a timeout or a service error: the next run can succeed.
        retryable: bool,
    },
    /// The catalog table of that name is someone else's: it was not registered by Lakestream
    /// for this table and points elsewhere. Never changed.
    #[error(
        "catalog table `{database}.{name}` exists at {found} and was not registered by Lakestream \
         for `{table}` (at {expected}); it is left as it is: drop it, or give `{table}` another \
         name in `[catalog.names]`"
    )]
    Foreign {
        /// Database.
        database: String,
        /// Catalog table name.
        name: String,
        /// The lake table.
        table: String,
        /// The catalog table's location.
        found: String,
        /// The lake table's location.
        expected: String,
    },
    /// The configuration cannot be synced as it is (names that collide, no database).
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// Whether running the sync again can succeed without a change by the user.
    pub fn retryable(&self) -> bool {
        match self {
            Error::Lake(e) => e.is_retryable(),
            Error::Catalog { retryable, .. } => *retryable,
            Error::Foreign { .. } | Error::Config(_) => false,
        }
    }

    /// The message with record values taken out (a lake error may name a partition value).
    pub fn redacted(&self) -> String {
        match self {
            Error::Lake(e) => e.redacted(),
            other => other.to_string(),
        }
    }
}
