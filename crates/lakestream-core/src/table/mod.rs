//! The table layer: one Delta table as the rest of the crate sees it. [`TableHandle`] wraps the
//! delta-rs table (load, refresh, head ahead of the snapshot after our own commits, accessors
//! with this crate's errors); `txns` keeps and reads the committed `txn` versions; `identity`
//! proves a warm handle still sees the table it loaded; [`WarmHandles`] keeps handles across
//! invocations; [`log_reads`] reads the Delta log once per process.
//!
//! This layer sits under the commit engine (`commit/`) and every reader: nothing here imports
//! the commit engine, which builds on it (a planner's view of the table, `TableState`, is
//! read there from the handle's accessors).

mod cache;
mod handle;
mod identity;
pub mod log_reads;
pub mod txns;

pub use cache::WarmHandles;
pub use handle::TableHandle;
