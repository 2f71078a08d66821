//! A table as it was: the version an [`AsOf`] names ([`TableHandle::resolve`]: by version, or by
//! time, the Delta protocol's `VERSION AS OF` / `TIMESTAMP AS OF`), and the handle loaded at it
//! ([`TableHandle::at_version`], [`TableHandle::as_of`]).
//!
//! A time resolves to the latest version whose commit time is at or before it; commit times are
//! [`commit_times`], the ones `history` prints: the `inCommitTimestamp` when the table has them,
//! else the commit file's modification time, in milliseconds, made strictly increasing — so
//! every time `history` shows names its version. A version is readable while its log can be
//! replayed (version 0's commit file, or a checkpoint at or before it, is still in
//! `_delta_log`); an older one is [`Error::VersionUnavailable`] naming the oldest readable.

use super::handle::TableHandle;
use super::log_listing::{LogListing, commit_times};
use crate::error::{Error, Result};
use chrono::{DateTime, Utc};

/// Which state of the table to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    /// The latest version.
    Latest,
    /// A version number.
    Version(u64),
    /// The latest version committed at or before this time.
    Time(DateTime<Utc>),
}

impl TableHandle {
    /// The version `as_of` names in the loaded table (one LIST of the log for a version or a
    /// time); [`Error::VersionUnavailable`] says what can be read instead.
    pub async fn resolve(&self, as_of: AsOf) -> Result<u64> {
        let latest = self.version().unwrap_or(0);
        let unavailable = |reason: String| Error::VersionUnavailable {
            table: self.name.clone(),
            reason,
        };
        match as_of {
            AsOf::Latest => Ok(latest),
            AsOf::Version(v) if v > latest => Err(unavailable(format!(
                "version {v} does not exist yet; the latest is {latest}"
            ))),
            AsOf::Version(v) => {
                let listing = LogListing::list(self).await?;
                let oldest = listing.oldest_readable().unwrap_or(latest);
                if v < oldest {
                    return Err(unavailable(format!(
                        "version {v} is gone: log cleanup removed the commits it needs (log \
                         retention, `delta.logRetentionDuration`); the oldest readable version is \
                         {oldest}, the latest {latest}"
                    )));
                }
                Ok(v)
            }
            AsOf::Time(t) => {
                let listing = LogListing::list(self).await?;
                let times = commit_times(self, &listing).await?;
                let oldest = listing.oldest_readable().unwrap_or(latest);
                let found = times
                    .iter()
                    .filter(|(v, at)| **v >= oldest && **at <= t)
                    .map(|(v, _)| *v)
                    .max();
                found.ok_or_else(|| {
                    let first = times.get(&oldest).map_or("?".into(), |at| at.to_rfc3339());
                    unavailable(format!(
                        "nothing was committed at or before {}: the oldest readable version is \
                         {oldest}, committed {first}",
                        t.to_rfc3339()
                    ))
                })
            }
        }
    }

    /// Load the table as of `version` (time travel; a no-op when the snapshot is at it). The
    /// handle then reads that version's files, schema and properties, and its head is that
    /// version: use it for reading, not for writing. Errors are storage errors (a version whose
    /// log is gone fails in delta-rs's replay: [`resolve`](Self::resolve) first to have the
    /// operator told what is readable).
    pub async fn at_version(&mut self, version: u64) -> Result<()> {
        if self.table.version() == Some(version) && self.exists {
            return Ok(());
        }
        self.table
            .load_version(version)
            .await
            .map_err(|e| Error::storage(&self.name, e))?;
        self.exists = true;
        self.pinned = true;
        self.head = Some(version);
        self.head_schema = None;
        self.txns.reset(Some(version));
        self.head_tag = self.held_tag(version);
        Ok(())
    }

    /// Resolve `as_of` ([`resolve`](Self::resolve)) and load the table at it
    /// ([`at_version`](Self::at_version)); the version loaded.
    pub async fn as_of(&mut self, as_of: AsOf) -> Result<u64> {
        let version = self.resolve(as_of).await?;
        if as_of != AsOf::Latest {
            self.at_version(version).await?;
        }
        Ok(version)
    }
}
