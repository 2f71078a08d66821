//! Looking into the lake: a table's history, reading it as of an older version or time, and
//! the rows commits inserted or deleted, the Athena DDL, and how far behind each job is.
//! Everything here reads; nothing commits.

pub mod changes;
pub mod ddl;
pub mod history;
pub mod lag;
pub mod time_travel;

pub use changes::{Changes, changes};
pub use ddl::{DdlForm, ddl};
pub use history::{History, HistoryEntry, history};
pub use lag::{Lag, lag};
pub use time_travel::{AsOf, read_as_of, resolve_version};

// The log listing and commit times moved to the table layer; kept here under their old names.
pub(crate) use crate::table::log_listing::{LogListing, commit_times};
