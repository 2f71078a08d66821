//! Landing one [`Change`]: a single conditional PUT of the next log entry, checked by us.
//!
//! delta-rs is asked to commit with `max_retries = 0`, so it writes exactly the version after the
//! snapshot we hand it and never rebases on its own. When that version is taken, we read every
//! commit in between: our own commit id there means our write landed (a retried PUT answered
//! "already exists", or an error after the upload); otherwise [`check`] decides whether the
//! change may be rebased onto the newer version or must be re-planned. Creating a table is the
//! same PUT at version 0, so the loser of a create race goes through the same check.

use super::change::{Change, CommitSummary, Conflict, check_all};
use super::put::{NewTable, Put, cdf_enabled, cdf_guard, put};
use super::{CommitSettings, classify::ErrorClass};
use crate::error::{Error, Result};
use crate::table::TableHandle;
use deltalake::DeltaTableError;
use deltalake::arrow::datatypes::SchemaRef;
use futures::{StreamExt, TryStreamExt};

/// A change landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Landed {
    /// The version it landed at.
    pub version: u64,
    /// Established by reading the log after an error or an "already exists".
    pub resolved_from_log: bool,
    /// Newer versions the change was rebased over without re-planning.
    pub rebases: u32,
}

/// Why a change did not land.
#[derive(Debug)]
pub enum Failure {
    /// A concurrent commit invalidated the plan: re-plan from a fresh snapshot.
    Conflict(Conflict),
    /// Storage failed and the change is not in the log: retry later (same or re-planned).
    Transient(Error),
    /// Retrying cannot help (validation, unsupported protocol, ...).
    Permanent(Error),
}

/// Land `change` on the table behind `handle`. The change is checked against every commit after
/// its [`read_version`](Change::read_version) — whatever the handle saw in between — then PUT
/// at the version after the handle's head. On success the handle is advanced from memory (no
/// read of what was just written). `schema` is the table schema after the change; a metadata
/// action is written when it differs from the base snapshot's or the change sets properties
/// (or the table is created with it when `create` is given and the table does not exist).
pub(crate) async fn land(
    handle: &mut TableHandle,
    change: &Change,
    schema: &SchemaRef,
    create: Option<&NewTable>,
    settings: &CommitSettings,
    commit_id: &str,
) -> std::result::Result<Landed, Failure> {
    let name = handle.name().to_string();
    check_feed(handle, change)?;
    // The newest version the change has been checked against (its read version at first).
    let mut checked = change.read_version;
    let mut rebases = 0u32;
    loop {
        // Bring the check up to the handle's head: a warm handle that moved since the plan
        // (our own earlier commits, a refresh after an error) is never trusted unchecked.
        let head = if handle.exists() {
            handle.version()
        } else {
            None
        };
        if change.read_version.is_some() && head.is_none() {
            // Planned on a table that is gone now (deleted, maybe about to be re-created):
            // nothing the plan read holds any more.
            return Err(Failure::Conflict(Conflict {
                version: 0,
                reason: "the table was deleted after the change was planned".into(),
                ..Default::default()
            }));
        }
        if head.is_some() && head > checked {
            match read_and_check(handle, change, checked, commit_id).await? {
                Checked::Ours(version) => {
                    return Ok(Landed {
                        version,
                        resolved_from_log: true,
                        rebases,
                    });
                }
                Checked::Clear => checked = head,
            }
        }
        let err = match put(handle, change, schema, create, commit_id).await {
            Ok(put) => {
                return Ok(Landed {
                    version: advance(handle, change, schema, put).await,
                    resolved_from_log: false,
                    rebases,
                });
            }
            Err(e) => e,
        };
        let class = super::classify::classify(&err);
        if class == ErrorClass::Permanent {
            return Err(Failure::Permanent(Error::rejected(&name, err)));
        }
        // Conflict or unknown outcome: learn what landed (ours, maybe) after what we checked.
        if let Err(e) = handle.refresh().await {
            return Err(Failure::Transient(e));
        }
        let head = handle.version();
        if head.is_some() && head > checked {
            match read_and_check(handle, change, checked, commit_id).await {
                Ok(Checked::Ours(version)) => {
                    tracing::info!(table = %name, version, error = %crate::redact::scrub(&err.to_string()), "our commit landed despite the error");
                    return Ok(Landed {
                        version,
                        resolved_from_log: true,
                        rebases,
                    });
                }
                Ok(Checked::Clear) => checked = head,
                // Not ours and conflicting: a transient error still re-plans (nothing landed).
                Err(f) => return Err(f),
            }
        }
        if class == ErrorClass::Transient {
            return Err(Failure::Transient(Error::storage(&name, err)));
        }
        rebases += 1;
        if rebases as usize > settings.inner_retries {
            return Err(Failure::Conflict(Conflict {
                version: handle.version().unwrap_or_default(),
                reason: format!("still behind after {rebases} rebases: {err}"),
                gone: Default::default(),
                contended: true,
            }));
        }
        tracing::debug!(table = %name, read = ?change.read_version, to = ?handle.version(), "rebased over non-conflicting commits");
    }
}

/// The change data feed's rule ([`cdf_guard`]) for `change` on the handle's table.
fn check_feed(handle: &TableHandle, change: &Change) -> std::result::Result<(), Failure> {
    let feed_on = handle.exists()
        && handle.snapshot().is_ok_and(|s| {
            let c = s.metadata().configuration();
            cdf_enabled(c.iter())
        });
    cdf_guard(handle.name(), feed_on, change).map_err(Failure::Permanent)
}

/// Advance the handle past the PUT that landed (from memory: nothing is read back), write a
/// checkpoint when one is due, and return the version.
async fn advance(handle: &mut TableHandle, change: &Change, schema: &SchemaRef, put: Put) -> u64 {
    match put.created {
        Some(state) => handle.adopt(*state),
        None => handle.applied(put.version, &change.txns, schema),
    }
    checkpoint_if_due(handle, put.version).await;
    put.version
}

/// What the commits after the checked version say about a change.
enum Checked {
    /// Our own commit is among them, at this version.
    Ours(u64),
    /// None is ours and none conflicts.
    Clear,
}

/// Read the commits after `after` up to the handle's head and check `change` against all of
/// them (our own commit id among them means the change already landed).
async fn read_and_check(
    handle: &TableHandle,
    change: &Change,
    after: Option<u64>,
    commit_id: &str,
) -> std::result::Result<Checked, Failure> {
    let winners = since(handle, after).await.map_err(Failure::Transient)?;
    if let Some(mine) = winners
        .iter()
        .find(|w| w.commit_id.as_deref() == Some(commit_id))
    {
        return Ok(Checked::Ours(mine.version));
    }
    check_all(change, &winners).map_err(Failure::Conflict)?;
    Ok(Checked::Clear)
}

/// Write a checkpoint when `version` is due by the table's `delta.checkpointInterval`
/// (delta-rs's post-commit rule). The kernel builds a checkpoint by replaying the log from
/// storage, so the handle is refreshed first (it reads the commits after its snapshot, which
/// it would read anyway on its next refresh). Failing here does not undo the commit: it is
/// logged, and the maintenance job's checkpoint step writes a missed checkpoint.
async fn checkpoint_if_due(handle: &mut TableHandle, version: u64) {
    use deltalake::table::config::TablePropertiesExt;
    let interval = match handle.snapshot() {
        Ok(s) => s.table_config().checkpoint_interval().get(),
        Err(_) => return,
    };
    if !(version + 1).is_multiple_of(interval) {
        return;
    }
    let written = async {
        handle.refresh().await?;
        deltalake::checkpoints::create_checkpoint(handle.table(), None)
            .await
            .map_err(|e| Error::storage(handle.name(), e))
    }
    .await;
    if let Err(e) = written {
        tracing::warn!(table = %handle.name(), version, error = %e.redacted(), "checkpoint not written; the maintenance job will write it");
    }
}

/// Commit files read at once when checking what landed after a base version.
const LOG_READ_CONCURRENCY: usize = 16;

/// Summarize the commits after `base` (all of them when the table was new) up to the handle's
/// head, read from storage.
async fn since(handle: &TableHandle, base: Option<u64>) -> Result<Vec<CommitSummary>> {
    if !handle.exists() {
        return Ok(vec![]);
    }
    let Some(latest) = handle.version() else {
        return Ok(vec![]);
    };
    let first = base.map_or(0, |b| b + 1);
    let log_store = handle.table().log_store();
    let name = handle.name();
    let out: Vec<CommitSummary> = futures::stream::iter(first..=latest)
        .map(|v| {
            let log_store = log_store.clone();
            async move {
                let bytes = log_store
                    .read_commit_entry(v)
                    .await
                    .map_err(|e| Error::storage(name, e))?
                    .ok_or_else(|| {
                        Error::storage(
                            name,
                            DeltaTableError::Generic(format!(
                                "commit {v} is missing from the log; cannot check for conflicts"
                            )),
                        )
                    })?;
                Ok::<_, Error>(CommitSummary::parse(v, &bytes))
            }
        })
        .buffered(LOG_READ_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(out)
}
