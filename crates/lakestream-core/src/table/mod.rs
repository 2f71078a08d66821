//! The table layer: one Delta table as the rest of the crate sees it. [`TableHandle`] wraps the
//! delta-rs table (load, refresh, head ahead of the snapshot after our own commits, accessors
//! with this crate's errors); `txns` keeps and reads the committed `txn` versions; `identity`
//! proves a warm handle still sees the table it loaded; [`WarmHandles`] keeps handles across
//! invocations; [`log_reads`] reads the Delta log once per process.
//!
//! Every read of a table's log, files or old versions goes through here:
//! - [`commits`]: the decoded commits of a version range, one typed error for a gone commit;
//! - [`log_listing`]: what the log holds (one LIST) and the commit times derived from it;
//! - [`files`]: the live files of a snapshot and the deletion-vector refusal;
//! - [`parquet_read`]: the one Parquet reader of data files (whole, projected, scanned);
//! - `parquet_write`: how data files are written (row groups bounded by bytes);
//! - [`snapshots`]: a version by number or time, and the handle loaded at it (time travel);
//! - [`log_ops`]: the table's own log operations (checkpoints, log cleanup, tombstones).
//!
//! Partition paths are encoded and decoded by [`crate::partition_path`].
//!
//! This layer sits under the commit engine (`commit/`) and every reader: nothing here imports
//! the commit engine, which builds on it (a planner's view of the table, `TableState`, is
//! read there from the handle's accessors).

mod cache;
pub mod commits;
pub mod files;
mod handle;
mod identity;
pub mod log_listing;
pub mod log_ops;
pub mod log_reads;
pub mod parquet_read;
pub(crate) mod parquet_write;
pub mod snapshots;
pub mod txns;
mod whole_file;

pub use cache::WarmHandles;
pub use commits::{Commit, CommitInfo, CommitRange};
pub use files::{LiveFile, PartitionValues};
pub use handle::{CONTENDED_FOR, TableHandle};
pub use log_listing::LogListing;
pub use parquet_read::{DataFile, is_missing_file};
pub use snapshots::AsOf;
pub use whole_file::WHOLE_FILE_BYTES;
