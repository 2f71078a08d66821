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

    /// The `Diagnostic` error type: what alarms and callers match on. Every type and what an
    /// operator does about it is listed in DEPLOY.md ("What a failed invocation's error type
    /// tells you"); a type ending in `Retryable` can go away by itself.
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
            FunctionError::Core(e) => core_error_type(e),
        }
    }
}

/// The error type of a core failure: one per kind an operator acts on differently. No `_` arm:
/// a new core error kind must be given its type here (and a row in DEPLOY.md).
fn core_error_type(e: &lakestream_core::Error) -> &'static str {
    use lakestream_core::Error;
    match e {
        Error::Config(_) => "Lakestream.Config",
        Error::Storage { .. } => "Lakestream.StorageRetryable",
        Error::Contention { .. } => "Lakestream.ContentionRetryable",
        Error::Fetch {
            retryable: true, ..
        } => "Lakestream.FetchRetryable",
        Error::Fetch {
            retryable: false, ..
        } => "Lakestream.FetchFailed",
        Error::Internal(_) => "Lakestream.InternalRetryable",
        Error::Rejected { .. } => "Lakestream.TableRejected",
        Error::Schema { .. } => "Lakestream.SchemaMismatch",
        Error::Source { .. } => "Lakestream.SourceError",
        Error::SourceRewritten { .. } => "Lakestream.SourceRewritten",
        Error::PositionsWentBack { .. } => "Lakestream.PositionsWentBack",
        Error::VersionUnavailable { .. } => "Lakestream.VersionUnavailable",
        Error::CommitGone { .. } => "Lakestream.CommitGone",
        Error::InlineTombstones { .. } => "Lakestream.InlineTombstones",
        Error::DeletionVectors { .. } => "Lakestream.DeletionVectors",
        Error::ChangeDataFeed { .. } => "Lakestream.ChangeDataFeed",
        Error::UnsafeStorage(_) => "Lakestream.UnsafeStorage",
        Error::NestedTable { .. } => "Lakestream.NestedTable",
        Error::TablePath { .. } => "Lakestream.TablePath",
        Error::TableNotFound(_) => "Lakestream.TableNotFound",
        Error::TxnLog { .. } => "Lakestream.TxnLog",
        Error::Load { .. } => "Lakestream.LoadRefused",
        Error::Io { .. } => "Lakestream.FileUnreadable",
        Error::Arrow(_) => "Lakestream.Internal",
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

#[cfg(test)]
mod tests {
    use super::*;
    use lakestream_core::Error;

    /// Every error type this module names, in source order.
    fn named_types() -> Vec<&'static str> {
        let src = include_str!("diagnostic.rs");
        let mut out: Vec<&str> = src
            .split('"')
            .filter(|s| {
                s.strip_prefix("Lakestream.")
                    .is_some_and(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric()))
            })
            .collect();
        out.dedup();
        out
    }

    #[test]
    fn every_error_type_is_listed_in_deploy() {
        let deploy = include_str!("../../../DEPLOY.md");
        let types = named_types();
        assert!(types.len() >= 20, "{types:?}");
        for t in types {
            assert!(
                deploy.contains(&format!("| `{t}` |")),
                "{t} has no row in DEPLOY.md"
            );
        }
    }

    #[test]
    fn core_kinds_an_operator_acts_on_differently_have_their_own_type() {
        let core = |e: Error| FunctionError::Core(e);
        let fetch = |retryable| Error::Fetch {
            object: "s3://b/k".into(),
            message: "m".into(),
            retryable,
        };
        let cases = [
            (core(Error::Config("k".into())), "Lakestream.Config"),
            (
                core(Error::DeletionVectors {
                    table: "t".into(),
                    found: "f".into(),
                }),
                "Lakestream.DeletionVectors",
            ),
            (
                core(Error::VersionUnavailable {
                    table: "t".into(),
                    reason: "r".into(),
                }),
                "Lakestream.VersionUnavailable",
            ),
            (
                core(Error::NestedTable {
                    table: "t".into(),
                    nested: vec!["t/x".into()],
                }),
                "Lakestream.NestedTable",
            ),
            (
                core(Error::TablePath {
                    table: "..".into(),
                    reason: "r".into(),
                }),
                "Lakestream.TablePath",
            ),
            (
                core(Error::Schema {
                    table: "t".into(),
                    reason: "r".into(),
                }),
                "Lakestream.SchemaMismatch",
            ),
            (
                core(Error::Source {
                    job: "j".into(),
                    table: "t".into(),
                    reason: "r".into(),
                }),
                "Lakestream.SourceError",
            ),
            (core(fetch(true)), "Lakestream.FetchRetryable"),
            (core(fetch(false)), "Lakestream.FetchFailed"),
            (
                core(Error::Internal("i".into())),
                "Lakestream.InternalRetryable",
            ),
            (
                core(Error::TableNotFound("t".into())),
                "Lakestream.TableNotFound",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.error_type(), want, "{e}");
            // A type ending in `Retryable` is exactly a failure that may go away by itself.
            assert_eq!(e.is_retryable(), want.ends_with("Retryable"), "{want}");
        }
    }
}
