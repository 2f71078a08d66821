//! Function errors as Lambda sees them. Only retryable failures are returned as errors (so the
//! event source redelivers); the `Diagnostic` names the table and the cause. Its message lands
//! in CloudWatch, so record values are taken out ([`lakestream_core::redact`]).

use lambda_runtime::Diagnostic;

/// An error a function returns to the Lambda runtime.
#[derive(Debug, thiserror::Error)]
pub enum FunctionError {
    /// The event could not be parsed at all (not retryable: redelivery would fail the same way).
    #[error("malformed event: {0}")]
    MalformedEvent(String),
    /// A core failure.
    #[error(transparent)]
    Core(#[from] lakestream_core::Error),
}

impl FunctionError {
    /// Whether retrying the same event may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            FunctionError::MalformedEvent(_) => false,
            FunctionError::Core(e) => e.is_retryable(),
        }
    }
}

impl FunctionError {
    /// The message with record values taken out (what a `Diagnostic` carries).
    pub fn redacted(&self) -> String {
        match self {
            FunctionError::MalformedEvent(m) => {
                format!("malformed event: {}", lakestream_core::redact::scrub(m))
            }
            FunctionError::Core(e) => e.redacted(),
        }
    }
}

impl From<FunctionError> for Diagnostic {
    fn from(e: FunctionError) -> Self {
        let error_type = match &e {
            FunctionError::MalformedEvent(_) => "Lakestream.MalformedEvent",
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
        };
        Diagnostic {
            error_type: error_type.to_string(),
            error_message: e.redacted(),
        }
    }
}
