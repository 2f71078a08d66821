//! Commit errors sorted into conflict / transient / permanent, from typed errors where the
//! crates expose them.
//!
//! - delta-rs's "table already exists" (`CreateError`) is private and only reachable through
//!   `CreateBuilder`, which the engine does not use: a create is a PUT of version 0, and losing
//!   it is the typed `VersionAlreadyExists(0)` (reported by delta-rs, with `max_retries = 0`, as
//!   `MaxCommitAttempts`).
//! - object_store's retry error is private too; it arrives as `object_store::Error::Generic`
//!   (or another variant carrying the last HTTP error). Any object-store error we cannot place
//!   is transient: the batch is redelivered, nothing is dead-lettered for a storage hiccup.

use deltalake::DeltaTableError;
use deltalake::ObjectStoreError;
use deltalake::kernel::transaction::TransactionError;

/// How the engine reacts to a commit error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Another writer took the version: check what landed, rebase or re-plan.
    Conflict,
    /// Storage or network: the outcome is unknown until the log is read; retry later.
    Transient,
    /// Deterministic: the same commit fails the same way every time.
    Permanent,
}

/// Classify an error returned by a delta-rs commit.
pub fn classify(e: &DeltaTableError) -> ErrorClass {
    use ErrorClass::*;
    match e {
        DeltaTableError::VersionAlreadyExists(_) => Conflict,
        DeltaTableError::Transaction { source } => match source {
            TransactionError::VersionAlreadyExists(_)
            | TransactionError::MaxCommitAttempts(_)
            | TransactionError::CommitConflict(_) => Conflict,
            TransactionError::ObjectStore { source } => classify_object_store(source),
            TransactionError::LogStoreError { .. } => Transient,
            TransactionError::SerializeLogJson { .. }
            | TransactionError::DeltaTableAppendOnly
            | TransactionError::UnsupportedTableFeatures(_)
            | TransactionError::TableFeaturesRequired(_) => Permanent,
        },
        DeltaTableError::ObjectStore { source } => classify_object_store(source),
        DeltaTableError::Io { .. } => Transient,
        DeltaTableError::CommitValidation { .. }
        | DeltaTableError::SerializeLogJson { .. }
        | DeltaTableError::InvalidData { .. }
        | DeltaTableError::SchemaMismatch { .. }
        | DeltaTableError::PartitionError { .. }
        | DeltaTableError::InvalidPartitionFilter { .. }
        | DeltaTableError::MissingFeature { .. }
        | DeltaTableError::InvalidTableLocation(_)
        | DeltaTableError::Arrow { .. } => Permanent,
        // delta-kernel's own error type is not exported by delta-rs; its schema errors
        // (`Schema error: ...`, e.g. two columns differing only in case) are deterministic.
        DeltaTableError::KernelError(k) if k.to_string().starts_with("Schema error:") => Permanent,
        // Reading the log or a checkpoint failed in a way delta-rs does not type: treat as
        // storage trouble (redeliver) rather than dead-letter good records.
        _ => Transient,
    }
}

/// Classify an object-store error.
pub fn classify_object_store(e: &ObjectStoreError) -> ErrorClass {
    match e {
        ObjectStoreError::AlreadyExists { .. } | ObjectStoreError::Precondition { .. } => {
            ErrorClass::Conflict
        }
        ObjectStoreError::NotSupported { .. }
        | ObjectStoreError::NotImplemented { .. }
        | ObjectStoreError::InvalidPath { .. }
        | ObjectStoreError::UnknownConfigurationKey { .. } => ErrorClass::Permanent,
        _ => ErrorClass::Transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(
            classify(&DeltaTableError::VersionAlreadyExists(3)),
            ErrorClass::Conflict
        );
        let tx = |source| DeltaTableError::Transaction { source };
        assert_eq!(
            classify(&tx(TransactionError::MaxCommitAttempts(0))),
            ErrorClass::Conflict
        );
        assert_eq!(
            classify(&tx(TransactionError::UnsupportedTableFeatures(vec![]))),
            ErrorClass::Permanent
        );
        let generic = ObjectStoreError::Generic {
            store: "S3",
            source: "503 Slow Down after 10 retries".into(),
        };
        assert_eq!(
            classify(&DeltaTableError::ObjectStore { source: generic }),
            ErrorClass::Transient
        );
        let exists = ObjectStoreError::AlreadyExists {
            path: "_delta_log/1.json".into(),
            source: "412".into(),
        };
        assert_eq!(classify_object_store(&exists), ErrorClass::Conflict);
        assert_eq!(
            classify(&DeltaTableError::Generic("?".into())),
            ErrorClass::Transient
        );
    }

    /// A schema the kernel refuses (here: `Membership` next to `membership`) is permanent,
    /// however it arrives: retrying the same batch would fail the same way forever.
    #[test]
    fn schema_errors_are_permanent() {
        use deltalake::arrow::datatypes::{DataType, Field, Schema};
        use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
        use deltalake::kernel::{DataType as KernelType, StructField, StructType};
        let kernel = StructType::try_new([
            StructField::nullable("membership", KernelType::STRING),
            StructField::nullable("Membership", KernelType::STRING),
        ]);
        let Err(kernel) = kernel else {
            panic!("the kernel accepted two columns differing only in case");
        };
        assert_eq!(
            classify(&DeltaTableError::from(kernel)),
            ErrorClass::Permanent
        );
        let arrow = Schema::new(vec![
            Field::new("membership", DataType::Utf8, true),
            Field::new("Membership", DataType::Utf8, true),
        ]);
        let converted: Result<StructType, deltalake::arrow::error::ArrowError> =
            (&arrow).try_into_kernel();
        let Err(e) = converted else {
            panic!("the conversion accepted two columns differing only in case");
        };
        assert_eq!(
            classify(&DeltaTableError::Arrow { source: e }),
            ErrorClass::Permanent
        );
    }
}
