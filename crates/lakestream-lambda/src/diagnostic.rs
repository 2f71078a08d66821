//! Function errors as Lambda sees them: every failure a function handler returns is a
//! [`FunctionError`], and this module is the one place that names its `Diagnostic` error type
//! (`Lakestream.*`, which the template's alarms and the tests match on). Only failures worth
//! retrying or worth a human's look are returned as errors; the `Diagnostic` names the table and
//! the cause. Its message lands in CloudWatch, so record values are taken out
//! ([`lakestream_core::redact`]).

use lakestream_core::redact::scrub;
use lambda_runtime::Diagnostic;

/// An error a function returns to the Lambda runtime.
#[derive(Debug, thiserror::Error)]
pub enum FunctionError {
    /// The event could not be parsed at all (not retryable: redelivery would fail the same way).
    #[error("malformed event: {0}")]
    MalformedEvent(String),
    /// The schedule's input is not what the function takes (the message says what to send).
    #[error("{0}")]
    BadInput(String),
    /// Something the invocation needs is not configured (the message names the variable).
    #[error("{0}")]
    NotConfigured(String),
    /// Refine jobs failed (`job: error; ...`); `retryable` when every failure can go away by
    /// itself (storage, contention), else a human must act on a source.
    #[error("{message}")]
    JobsFailed {
        /// The failed jobs and their (redacted) errors.
        message: String,
        /// Whether the next tick may succeed without a human.
        retryable: bool,
    },
    /// Maintenance failed on some tables (`table: error; ...`); every job is idempotent.
    #[error("{0}")]
    MaintenanceFailed(String),
    /// The scheduled drain could not talk to its queue; the messages stay in it.
    #[error("{0}")]
    DrainFailed(String),
    /// The response could not be serialized (a bug).
    #[error("serializing the response: {0}")]
    Response(#[from] serde_json::Error),
    /// A core failure.
    #[error(transparent)]
    Core(#[from] lakestream_core::Error),
}

impl FunctionError {
    /// Whether retrying the same event may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            FunctionError::MalformedEvent(_)
            | FunctionError::BadInput(_)
            | FunctionError::NotConfigured(_)
            | FunctionError::Response(_) => false,
            FunctionError::JobsFailed { retryable, .. } => *retryable,
            FunctionError::MaintenanceFailed(_) | FunctionError::DrainFailed(_) => true,
            FunctionError::Core(e) => e.is_retryable(),
        }
    }

    /// The message with record values taken out (what a `Diagnostic` carries).
    pub fn redacted(&self) -> String {
        match self {
            FunctionError::MalformedEvent(m) => format!("malformed event: {}", scrub(m)),
            // Every job's error is redacted already; maintenance scrubs again so nothing added
            // on the way (a table name from a listing) can carry a value.
            FunctionError::BadInput(m)
            | FunctionError::MaintenanceFailed(m)
            | FunctionError::DrainFailed(m) => scrub(m),
            FunctionError::NotConfigured(m) | FunctionError::JobsFailed { message: m, .. } => {
                m.clone()
            }
            FunctionError::Response(e) => e.to_string(),
            FunctionError::Core(e) => e.redacted(),
        }
    }

    /// The `Diagnostic` error type: what alarms and callers match on.
    pub fn error_type(&self) -> &'static str {
        match self {
            FunctionError::MalformedEvent(_) => "Lakestream.MalformedEvent",
            FunctionError::BadInput(_) => "Lakestream.BadInput",
            FunctionError::NotConfigured(_) => "Lakestream.Config",
            // The next tick retries anyway; the type tells alarms whether a human is needed.
            FunctionError::JobsFailed {
                retryable: true, ..
            } => "Lakestream.Retryable",
            FunctionError::JobsFailed {
                retryable: false, ..
            } => "Lakestream.SourceError",
            FunctionError::MaintenanceFailed(_) => "Lakestream.MaintenanceFailed",
            FunctionError::DrainFailed(_) => "Lakestream.DrainRetryable",
            FunctionError::Response(_) => "Lakestream.Internal",
            FunctionError::Core(lakestream_core::Error::Storage { .. }) => {
                "Lakestream.StorageRetryable"
            }
            FunctionError::Core(lakestream_core::Error::Contention { .. }) => {
                "Lakestream.ContentionRetryable"
            }
            FunctionError::Core(lakestream_core::Error::Schema { .. }) => {
                "Lakestream.SchemaMismatch"
            }
            FunctionError::Core(lakestream_core::Error::Config(_)) => "Lakestream.Config",
            FunctionError::Core(lakestream_core::Error::Rejected { .. }) => {
                "Lakestream.TableRejected"
            }
            FunctionError::Core(lakestream_core::Error::Internal(_)) => {
                "Lakestream.InternalRetryable"
            }
            FunctionError::Core(_) => "Lakestream.Internal",
        }
    }
}

impl From<FunctionError> for Diagnostic {
    fn from(e: FunctionError) -> Self {
        Diagnostic {
            error_type: e.error_type().to_string(),
            error_message: e.redacted(),
        }
    }
}
