//! The one error type of the core library, with a retryable/permanent split that the Lambda
//! adapters use to decide between "fail the invocation so the source redelivers" and "report".

mod chain;

pub use chain::Refusal;
pub(crate) use chain::permanent_put_refusal;
use chain::{name_too_long, refusal_in};

use deltalake::DeltaTableError;

/// Result alias used across the core library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the core library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pipeline configuration is invalid; the message names the key.
    #[error("invalid pipeline config: {0}")]
    Config(String),

    /// A table's storage (Delta log or data files) failed. Retryable: the invocation should fail
    /// so the source redelivers the batch; nothing is half-committed.
    #[error("storage error on table `{table}`: {source}. The batch is safe to redeliver")]
    Storage {
        /// Table name as configured (e.g. `raw/order`).
        table: String,
        /// The underlying delta-rs error (boxed: it is large).
        #[source]
        source: Box<DeltaTableError>,
    },

    /// The table refused a commit for a reason retrying cannot fix (validation, a protocol
    /// feature this writer does not support, ...).
    #[error(
        "table `{table}` refused the commit: {source}. Retrying cannot help: fix the table or the pipeline config"
    )]
    Rejected {
        /// Table name.
        table: String,
        /// The underlying delta-rs error (boxed: it is large).
        #[source]
        source: Box<DeltaTableError>,
    },

    /// Commit conflicts persisted after every retry.
    #[error(
        "table `{table}`: gave up after {attempts} commit attempts under contention ({last}). \
         The batch is safe to redeliver; consider fewer concurrent writers per table"
    )]
    Contention {
        /// Table name.
        table: String,
        /// Number of attempts made.
        attempts: u32,
        /// Last conflict seen.
        last: String,
    },

    /// A commit would rewrite rows of a table with the change data feed on without writing
    /// change data files. Permanent; nothing was written.
    #[error(
        "table `{table}` has the change data feed on (`delta.enableChangeDataFeed = true`) and \
         this commit ({operation}) rewrites or deletes rows without writing change data files: \
         readers of the feed would see every row of the rewritten files deleted and inserted \
         again. Nothing was written. Write this table with a writer that records its changes \
         (the `cdc` refine kind), or turn the feed off first (`ALTER TABLE <table> SET \
         TBLPROPERTIES ('delta.enableChangeDataFeed' = false)`)"
    )]
    ChangeDataFeed {
        /// Table name.
        table: String,
        /// The refused operation (`MERGE`, `DELETE`, ...).
        operation: String,
    },

    /// A back-fill file cannot be appended (`lakestream load`): nothing of it was written.
    #[error("cannot load {file}: {reason}. Nothing of it was written")]
    Load {
        /// The file.
        file: String,
        /// Why, and what to do.
        reason: String,
    },

    /// There is no Delta table at that name (nothing has written it yet).
    #[error("table `{0}` does not exist")]
    TableNotFound(String),

    /// The table exists but its schema cannot take our records (e.g. a column changed type).
    #[error("table `{table}` schema mismatch: {reason}. Fix the table or the pipeline config")]
    Schema {
        /// Table name.
        table: String,
        /// What does not match.
        reason: String,
    },

    /// A refine job cannot read a source table the way its rules require (rows deleted, table
    /// re-created, versions or files gone). Not retryable; the message says what to do.
    #[error("refine job `{job}`, source `{table}`: {reason}")]
    Source {
        /// The refine job.
        job: String,
        /// The source table.
        table: String,
        /// What happened and what to do.
        reason: String,
    },

    /// A CDC apply's bronze table lost rows to another writer (a DELETE or UPDATE, e.g. a GDPR
    /// erasure: a `remove` with `dataChange=true`). The job rebuilds its output from bronze's
    /// snapshot (`refine::rebuild`); this reaches an operator only when the rebuild fails too.
    #[error(
        "refine job `{job}`, source `{table}`: version {version} removes data (`{path}`): \
         bronze was changed by another writer; the job rebuilds its output from the table's \
         snapshot (or run `lakestream refine {job} --rebuild`)"
    )]
    SourceRewritten {
        /// The refine job.
        job: String,
        /// The bronze table.
        table: String,
        /// The version that removes data.
        version: u64,
        /// A file it removes.
        path: String,
    },

    /// A change of a key ranks below one of the key committed before it: its source position is
    /// lower, its commit time later (a MySQL binlog restart: `RESET MASTER`, a fail-over to a
    /// server with its own binlog). Applying it would drop it as older; the job stops instead.
    /// Not retryable: the operator declares the reset (`position_resets`), then it applies.
    #[error("refine job `{job}`, source `{table}`: the source's positions went back: {reason}")]
    PositionsWentBack {
        /// The refine job.
        job: String,
        /// The bronze table.
        table: String,
        /// The two changes, their commit times and what to declare.
        reason: String,
    },

    /// Arrow failed while assembling a batch (a bug, not bad input: bad input is dead-lettered).
    #[error("arrow error: {0}")]
    Arrow(#[from] deltalake::arrow::error::ArrowError),

    /// Fetching a source object failed.
    #[error("cannot read {object}: {message}")]
    Fetch {
        /// The object (`s3://bucket/key`).
        object: String,
        /// What went wrong.
        message: String,
        /// Whether a later attempt may succeed (throttling, 5xx, network).
        retryable: bool,
    },

    /// A broken invariant inside Lakestream (a bug). Retryable: failing the invocation makes
    /// the source redeliver, so nothing is lost while it is fixed.
    #[error("internal error (please report): {0}")]
    Internal(String),

    /// A version (or time) asked for cannot be read: not written yet, or its log entries or
    /// data files are gone; the message names what can be read instead.
    #[error("table `{table}`: {reason}")]
    VersionUnavailable {
        /// Table name.
        table: String,
        /// What is missing and what to read instead.
        reason: String,
    },

    /// An output commit's inline tombstones cannot be read (not lakestream's, or damaged).
    #[error(
        "table `{table}` version {version}: inline tombstones unreadable ({reason}). The job stops \
         rather than let that commit's deletes come back; check them, then set the tombstone \
         table's `lakestream.tombstones.consolidated_through.<output table id>` to {version}"
    )]
    InlineTombstones {
        /// Output table name.
        table: String,
        /// The commit's version.
        version: u64,
        /// What is wrong with it.
        reason: String,
    },

    /// A commit file a reader needs is gone: log cleanup removed it (older than the table's
    /// `delta.logRetentionDuration` and a checkpoint). The one error of the table layer's commit
    /// reader ([`TableHandle::commits`](crate::table::TableHandle::commits)); each reader maps it
    /// into what its operator can do (read from `oldest` on, skip ahead, rebuild). Not
    /// retryable: the file does not come back.
    #[error(
        "table `{table}`: the commit file of version {version} is gone (log cleanup: older than \
         the table's `delta.logRetentionDuration`); {}. The changes of the versions before it \
         cannot be read any more: read from the oldest commit on, or from a snapshot",
        match oldest {
            Some(o) => format!("the oldest commit still in the log is version {o}"),
            None => "the log holds no commit file".to_string(),
        }
    )]
    CommitGone {
        /// Table name.
        table: String,
        /// The version whose commit file is gone.
        version: u64,
        /// The oldest commit still in the log (`None`: none is).
        oldest: Option<u64>,
    },

    /// The table's `txn` actions (how far each writer got) could not be read in one pass over
    /// its checkpoint and commit files: a checkpoint part too large to read whole or not in the
    /// shape the Delta protocol describes, or a commit file gone. The table handle then looks
    /// each appId up on its own (slower, same answer), so this is logged, not returned to a
    /// caller. Not retryable: the same files give the same answer.
    #[error(
        "table `{table}`: cannot read its `txn` actions in one pass ({reason}). Each appId is \
         looked up on its own instead (slower, same result); if it persists, write a new \
         checkpoint (`lakestream checkpoint <table>`)"
    )]
    TxnLog {
        /// Table name.
        table: String,
        /// Which file could not be read and why.
        reason: String,
    },

    /// The table has deletion vectors (written by Spark or Databricks): rows deleted by
    /// marking them in a side file instead of rewriting the data file. Lakestream reads data
    /// files as plain Parquet, so the deleted rows would come back; every path that reads or
    /// rewrites data files refuses the table. Permanent; the message says how to purge them.
    #[error(
        "table `{table}` has deletion vectors ({found}). Lakestream reads data files as plain \
         Parquet and cannot apply deletion vectors yet: the rows they delete would come back, so \
         it does not read or rewrite this table (nothing was written). Purge them and turn them \
         off in Spark or Databricks: `ALTER TABLE <table> SET TBLPROPERTIES \
         ('delta.enableDeletionVectors' = false)`, `REORG TABLE <table> APPLY (PURGE)`, then \
         `ALTER TABLE <table> DROP FEATURE deletionVectors` (Delta 3.1+; it removes the reader \
         feature from the protocol)"
    )]
    DeletionVectors {
        /// Table name.
        table: String,
        /// What was found: the protocol feature, live files with a deletion vector.
        found: String,
    },

    /// A table has other Delta tables below its root (`raw` next to `raw/order`). Vacuum lists
    /// every object under a table's root and deletes what its log does not reference: it would
    /// delete the nested tables' logs and data, so it refuses. Permanent; nothing was deleted.
    #[error(
        "vacuum of table `{table}` refused, nothing was deleted: other Delta tables are stored \
         below its root ({}), and vacuum deletes every file under the root that `{table}`'s log \
         does not reference, their `_delta_log` and data included. Move them out from under \
         `{table}` (a Delta table's log holds relative paths: copy its prefix, e.g. `aws s3 sync \
         <lake>/<nested table>/ <lake>/<new name>/`, point the config at the new name, delete the old \
         prefix) or move `{table}` itself; table names must not be path prefixes of each other",
        nested.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    NestedTable {
        /// The table vacuum was asked to clean.
        table: String,
        /// The tables found below its root.
        nested: Vec<String>,
    },

    /// The lake's S3 endpoint does not refuse a second create-only PUT (`If-None-Match: *`), or
    /// the probe that checks it was not allowed to write: nothing is written to that lake (see
    /// the `put_probe` module). Not retryable; the message names the endpoint and the fix.
    #[error(transparent)]
    UnsafeStorage(#[from] Refusal),

    /// The lake refuses this table name: not a plain relative path under the lake root (`..`,
    /// `%`, `?`, `#`, `\`, empty, `.`- or `_`-leading segments), or a location too long for the
    /// storage. Nothing was read or written. Not retryable: the name must change.
    #[error(
        "table `{table}` refused: {reason}. A table name is a relative path under the lake root of \
         [A-Za-z0-9_.=-] segments (e.g. raw/order), none starting with `.` or `_`, short enough \
         for the storage; nothing was read or written"
    )]
    TablePath {
        /// The name as given (escaped for printing).
        table: String,
        /// What is wrong with it.
        reason: String,
    },

    /// Reading a local file (config, event) failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that failed.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl From<lakestream_formats::Error> for Error {
    fn from(e: lakestream_formats::Error) -> Self {
        match e {
            lakestream_formats::Error::Config(m) => Error::Config(m),
            lakestream_formats::Error::Io { path, source } => Error::Io { path, source },
        }
    }
}

impl Error {
    /// The message with record values taken out ([`crate::redact::scrub`]): what logs,
    /// `Diagnostic`s and partial-batch failure reasons carry. The full message goes to the
    /// dead-letter table only.
    pub fn redacted(&self) -> String {
        crate::redact::scrub(&self.to_string())
    }

    /// True when retrying the same input later may succeed (storage and contention errors).
    /// Configuration and schema errors need a human; retrying them only burns invocations.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Storage { .. } | Error::Contention { .. } | Error::Internal(_) => true,
            Error::Fetch { retryable, .. } => *retryable,
            _ => false,
        }
    }

    pub(crate) fn rejected(table: &str, source: impl Into<DeltaTableError>) -> Self {
        let source = source.into();
        if let Some(r) = refusal_in(&source) {
            return Error::UnsafeStorage(r);
        }
        Error::Rejected {
            table: table.to_string(),
            source: Box::new(source),
        }
    }

    /// A data file's write failed: [`Error::storage`], except that S3's `400` answers that
    /// retrying cannot fix ([`permanent_put_refusal`]: a key over 1024 bytes, ...) are
    /// [`Error::Rejected`] (permanent: the table's records are dead-lettered, the batch is not
    /// retried until it expires). Only data files: their keys come from record values.
    pub(crate) fn data_put(table: &str, source: impl Into<DeltaTableError>) -> Self {
        let source = source.into();
        if permanent_put_refusal(&source).is_some() {
            return Error::rejected(table, source);
        }
        Error::storage(table, source)
    }

    pub(crate) fn storage(table: &str, source: impl Into<DeltaTableError>) -> Self {
        let source = source.into();
        if let Some(r) = refusal_in(&source) {
            return Error::UnsafeStorage(r);
        }
        if let Some(io) = name_too_long(&source) {
            // A path under the table is longer than the file system takes: retrying cannot help.
            return Error::TablePath {
                table: table.escape_debug().to_string(),
                reason: format!("a path under it is too long for the file system ({io})"),
            };
        }
        Error::Storage {
            table: table.to_string(),
            source: Box::new(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_too_long_is_a_permanent_table_path_error() {
        let too_long = std::io::Error::from_raw_os_error(36); // ENAMETOOLONG on Linux
        let e = Error::storage("access_logs/b", DeltaTableError::from(too_long));
        assert!(matches!(e, Error::TablePath { .. }), "{e:?}");
        assert!(
            !e.is_retryable() && e.to_string().contains("too long"),
            "{e}"
        );
        let other = std::io::Error::from_raw_os_error(5); // EIO stays a retryable storage error
        let e = Error::storage("access_logs/b", DeltaTableError::from(other));
        assert!(
            matches!(e, Error::Storage { .. }) && e.is_retryable(),
            "{e:?}"
        );
    }

    /// A stand-in for object_store's private request error, with its text.
    #[derive(Debug)]
    struct Request(String);
    impl std::fmt::Display for Request {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl std::error::Error for Request {}

    fn s3_answer(method: &str, status: &str, code: &str) -> DeltaTableError {
        let text = format!(
            "Error performing {method} http://127.0.0.1:5066/b/t/x=1/part-0.parquet in 12ms - \
             Server returned non-2xx status code: {status}: <?xml version=\"1.0\"?><Error>\
             <Code>{code}</Code><Message>...</Message></Error>"
        );
        DeltaTableError::ObjectStore {
            source: deltalake::ObjectStoreError::Generic {
                store: "S3",
                source: Box::new(Request(text)),
            },
        }
    }

    /// A data-file PUT S3 refuses for its key (over 1024 bytes) is permanent; a 400 a retry
    /// can fix, a 5xx and the same refusal of a GET stay retryable.
    #[test]
    fn s3_refusals_of_a_data_file_put() {
        let e = Error::data_put(
            "raw/member",
            s3_answer("PUT", "400 Bad Request", "KeyTooLongError"),
        );
        assert!(
            matches!(e, Error::Rejected { .. }) && !e.is_retryable(),
            "{e:?}"
        );
        let e = Error::data_put(
            "raw/member",
            s3_answer("POST", "400 Bad Request", "EntityTooLarge"),
        );
        assert!(!e.is_retryable(), "{e:?}");
        for (method, status, code) in [
            ("PUT", "400 Bad Request", "RequestTimeout"),
            ("PUT", "400 Bad Request", "ExpiredToken"),
            ("PUT", "503 Service Unavailable", "SlowDown"),
            ("GET", "400 Bad Request", "KeyTooLongError"),
        ] {
            let e = Error::data_put("raw/member", s3_answer(method, status, code));
            assert!(
                matches!(e, Error::Storage { .. }) && e.is_retryable(),
                "{method} {code}: {e:?}"
            );
        }
        // Only data-file writes: a log or read error with the same text stays a storage error.
        let e = Error::storage(
            "raw/member",
            s3_answer("PUT", "400 Bad Request", "KeyTooLongError"),
        );
        assert!(e.is_retryable(), "{e:?}");
    }
}
