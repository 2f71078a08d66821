//! Reading a table as it was: by version, or by time (`VERSION AS OF` / `TIMESTAMP AS OF`).
//!
//! A time resolves the way the Delta protocol says: to the latest version whose commit time is at
//! or before it. Commit times are [`super::commit_times`], the same `history` prints: the
//! `inCommitTimestamp` when the table has them, else the commit file's modification time, in
//! milliseconds, made strictly increasing — so every time `history` shows names its version.
//!
//! A version is readable while its log can be replayed (version 0's commit file, or a
//! checkpoint at or before it, is still in `_delta_log`) and its data files exist (vacuum
//! deletes the files only older versions reference). Either missing gives an error that names
//! the oldest readable version.

use crate::error::{Error, Result};
use crate::read::read_table;
use crate::storage::Lake;
use crate::table::{TableHandle, is_missing_file};
use deltalake::arrow::array::RecordBatch;

pub use crate::table::AsOf;

/// The version `as_of` names; an error says what can be read instead
/// ([`TableHandle::resolve`]).
pub async fn resolve_version(lake: &Lake, table: &str, as_of: AsOf) -> Result<u64> {
    TableHandle::open_existing(lake, table)
        .await?
        .resolve(as_of)
        .await
}

/// All rows of `table` as of `as_of` (partition values restored as columns), with the version
/// read.
pub async fn read_as_of(lake: &Lake, table: &str, as_of: AsOf) -> Result<(u64, RecordBatch)> {
    let version = resolve_version(lake, table, as_of).await?;
    let at = (as_of != AsOf::Latest).then_some(version);
    match read_table(lake, table, at).await {
        Ok(batch) => Ok((version, batch)),
        Err(e) if is_missing_file(&e) => Err(Error::VersionUnavailable {
            table: table.to_string(),
            reason: format!(
                "version {version} references a data file which vacuum deleted ({e}); versions \
                 inside the vacuum retention window (168 h by default) are readable"
            ),
        }),
        Err(e) => Err(e),
    }
}
