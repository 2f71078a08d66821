//! The one commit loop: every commit the product makes — appends, dead letters, compaction,
//! upsert and join output, tombstones, table properties — is planned by a [`ChangePlanner`] and
//! landed here.
//!
//! One attempt: load the table (a warm handle as it is on the first attempt, refreshed after),
//! ask the planner for a [`Proposal`] against that state (the planning version travels with the
//! change as [`Change::read_version`]), perform the planner's side writes (writes to *other*
//! tables that must be durable first, e.g. CDC tombstones — `plan` itself commits nothing), then
//! [`land`] the change: it is checked against every commit after its read version and PUT at
//! the next version. On a conflict the planner decides: re-plan from a fresh snapshot, retry
//! the (possibly trimmed) change — it is checked again from its read version, so nothing that
//! landed in between escapes the check — or stop. A storage error retries the same change under
//! the same commit id, so a PUT that landed despite the error is recognised as ours. Backoff is
//! full jitter over an exponential ceiling.

use super::NewTable;
use super::change::{Change, Conflict};
use super::land::{Failure, Landed, land};
use super::{CommitSettings, TableState, backoff};
use crate::error::{Error, Result};
use crate::table::TableHandle;
use deltalake::arrow::datatypes::SchemaRef;

/// A change ready to land, with what landing it needs.
#[derive(Debug, Clone)]
pub struct Proposal {
    /// The change, with the version it was planned from.
    pub change: Change,
    /// The table schema after the change.
    pub schema: SchemaRef,
    /// How to create the table when the change is its first commit.
    pub create: Option<NewTable>,
}

/// What to do after a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Plan again from a fresh snapshot.
    Replan,
    /// Land the same (possibly trimmed) change again, checked again from its read version.
    Retry,
    /// Give up on this change without an error (e.g. a compaction partition left for the
    /// next run); the conflict is reported in [`Ran::stopped`].
    Stop,
}

/// Plans one change at a time for [`run`].
#[allow(async_fn_in_trait)]
pub trait ChangePlanner {
    /// The appIds whose committed `txn` versions the plan needs.
    fn app_ids(&self) -> Vec<String> {
        vec![]
    }
    /// The plan asks about many appIds: load every `txn` of the table in one pass.
    fn wants_all_txns(&self) -> bool {
        false
    }
    /// Plan a change against `handle` at `state` (set `read_version` to `state.version`, or to
    /// the older version the plan was really made from). `None`: nothing to commit. A plan may
    /// write data files (unreferenced until the commit lands) but commits nothing.
    async fn plan(&mut self, handle: &TableHandle, state: &TableState) -> Result<Option<Proposal>>;
    /// Writes to other tables that must be durable before this change lands (idempotent: they
    /// are repeated after every re-plan).
    async fn side_writes(&mut self, _proposal: &Proposal) -> Result<()> {
        Ok(())
    }
    /// Decide what a conflict means; the change may be trimmed for a [`Decision::Retry`].
    fn on_conflict(&mut self, conflict: &Conflict, _change: &mut Change) -> Decision {
        if conflict.contended {
            Decision::Retry
        } else {
            Decision::Replan
        }
    }
}

/// What [`run`] did.
#[derive(Debug, Default)]
pub struct Ran {
    /// Where the change landed; `None` when there was nothing to commit or the planner stopped.
    pub landed: Option<Landed>,
    /// The proposal that landed (or was last tried).
    pub proposal: Option<Proposal>,
    /// Attempts used (1 = first try).
    pub attempts: u32,
    /// Conflicts seen (re-plans, retries and rebases caused by other writers).
    pub conflicts: u32,
    /// The conflict the planner stopped on.
    pub stopped: Option<Conflict>,
}

/// Plan and land one change on `handle` under the protocol in the module docs.
pub async fn run(
    handle: &mut TableHandle,
    settings: &CommitSettings,
    planner: &mut impl ChangePlanner,
) -> Result<Ran> {
    let mut ran = Ran::default();
    let mut last = String::new();
    // The planned change and its commit id, kept across retries of the same change.
    let mut current: Option<(Proposal, String)> = None;
    for attempt in 1..=settings.max_attempts {
        ran.attempts = attempt;
        if attempt > 1 {
            tokio::time::sleep(backoff(settings, attempt, fastrand::f64())).await;
        }
        let (proposal, commit_id) = match current.take() {
            Some(c) => c,
            None => {
                // First attempt: a warm handle plans from its head without asking storage (a
                // newer commit makes the PUT fail and `land` read it; the Kafka path's handle
                // looked just before, `WarmHandles::take_fresh`). Re-plans refresh.
                if attempt == 1 {
                    handle.sync().await?;
                } else {
                    handle.refresh().await?;
                }
                if planner.wants_all_txns() {
                    handle.load_all_txns().await?;
                }
                let state = TableState::read(handle, &planner.app_ids()).await?;
                let Some(p) = planner.plan(handle, &state).await? else {
                    return Ok(ran);
                };
                match planner.side_writes(&p).await {
                    Ok(()) => {}
                    // Nothing of this change landed: back off, re-plan, write them again.
                    Err(e) if e.is_retryable() && attempt < settings.max_attempts => {
                        tracing::warn!(table = %handle.name(), attempt, error = %e.redacted(), "side writes failed, will re-plan and retry");
                        last = e.to_string();
                        continue;
                    }
                    Err(e) => return Err(e),
                }
                (p, format!("{:032x}", fastrand::u128(..)))
            }
        };
        let landed = land(
            handle,
            &proposal.change,
            &proposal.schema,
            proposal.create.as_ref(),
            settings,
            &commit_id,
        )
        .await;
        let mut proposal = proposal;
        match landed {
            Ok(l) => {
                ran.conflicts += l.rebases;
                ran.landed = Some(l);
                ran.proposal = Some(proposal);
                return Ok(ran);
            }
            Err(Failure::Conflict(c)) => {
                ran.conflicts += 1;
                let decision = planner.on_conflict(&c, &mut proposal.change);
                tracing::info!(table = %handle.name(), attempt, version = c.version, reason = %c.reason, ?decision, "commit conflict");
                last.clone_from(&c.reason);
                match decision {
                    Decision::Replan => {}
                    Decision::Retry => current = Some((proposal, commit_id)),
                    Decision::Stop => {
                        ran.stopped = Some(c);
                        ran.proposal = Some(proposal);
                        return Ok(ran);
                    }
                }
            }
            Err(Failure::Transient(e)) => {
                if attempt == settings.max_attempts {
                    return Err(e);
                }
                tracing::warn!(table = %handle.name(), attempt, error = %e.redacted(), "commit failed and did not land, will retry");
                current = Some((proposal, commit_id));
            }
            Err(Failure::Permanent(e)) => return Err(e),
        }
    }
    Err(Error::Contention {
        table: handle.name().to_string(),
        attempts: settings.max_attempts,
        last,
    })
}

/// A planner for a change computed up front (table properties, tombstone expiry): it is landed
/// as is; a conflict stops it unless the table was only contended.
#[derive(Debug)]
pub struct Fixed(pub Option<Proposal>);

impl ChangePlanner for Fixed {
    async fn plan(&mut self, _: &TableHandle, _: &TableState) -> Result<Option<Proposal>> {
        Ok(self.0.take())
    }
    fn on_conflict(&mut self, conflict: &Conflict, _: &mut Change) -> Decision {
        if conflict.contended {
            Decision::Retry
        } else {
            Decision::Stop
        }
    }
}
