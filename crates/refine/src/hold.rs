//! Freshness targets in the refine function: whether a due job holds its changes (its target
//! leaves room to wait, README "Freshness targets"), from what time it counts ([`decide`]), and
//! whether anything would bring it back.

use crate::Refiner;
use crate::request::Trigger;
use chrono::{DateTime, Utc};
use lakestream_core::refine::RunContext;
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::refine::RefineJob;
use std::collections::HashMap;

/// A commit time further ahead of the clock than this is not believed (a forged notice, a
/// clock far off): the job runs instead of holding on it.
const FUTURE_SLACK_MS: i64 = 60_000;

/// When `job`'s oldest known new change (committed at `oldest_ms`) is younger than the job's
/// hold ([`PipelineConfig::hold_of`]): the time it is due (epoch ms). `None`: run it now (no
/// hold, the change is old enough, its time is unknown, or it lies more than a minute ahead).
pub(crate) fn holding_until(
    config: &PipelineConfig,
    job: &RefineJob,
    oldest_ms: Option<i64>,
    now: DateTime<Utc>,
) -> Option<i64> {
    let hold = i64::try_from(config.hold_of(job).as_millis()).ok()?;
    let now_ms = now.timestamp_millis();
    let oldest = oldest_ms.filter(|t| *t <= now_ms.saturating_add(FUTURE_SLACK_MS))?;
    let due_at = oldest.saturating_add(hold);
    (hold > 0 && now_ms < due_at).then_some(due_at)
}

/// A job may hold only when something brings it back when it is due: a notice of its own in
/// the batch (postponed until then) or the schedule (its next tick). A job run for a notice of
/// a job it reads from has nothing to postpone: it runs.
pub(crate) fn can_hold(trigger: &Trigger, job: &str) -> bool {
    match trigger {
        Trigger::Schedule(_) => true,
        Trigger::Notices(batch) => batch.notices.iter().any(|(_, n)| n.job == job),
    }
}

/// Whether a due job runs now or holds.
pub(crate) enum Decision {
    /// Run it.
    Run,
    /// Hold until `due_at_ms`; `oldest_ms`: the commit time it holds on.
    Hold {
        /// When it is due (epoch ms).
        due_at_ms: i64,
        /// The oldest unapplied change's commit time (epoch ms).
        oldest_ms: i64,
    },
}

/// Whether `job`, due with `trigger_oldest_ms` as the oldest change the trigger knows of
/// (`nothing_observed`: the process is new to the job, or no longer recognises a source), holds
/// for its freshness target at `now`.
///
/// What the trigger and this process know may be stale: a tick names no version, a notice may
/// name one applied already (a redelivery), and what this process saw lags behind what another
/// instance applied since, whose commit times are then old. So before holding with nothing
/// observed, or running because the trigger's times look old, the output's `txn`s say how old
/// the oldest unapplied change is (`lakestream_core::refine::consumed`: the loads are the run's
/// own). A job that holds on them is recorded as having seen what the output consumed, so the
/// next trigger probes from there.
pub(crate) async fn decide(
    refiner: &Refiner,
    ctx: &RunContext<'_>,
    job: &RefineJob,
    can_hold: bool,
    nothing_observed: bool,
    trigger_oldest_ms: Option<i64>,
    now: DateTime<Utc>,
) -> Decision {
    if !can_hold || refiner.config.hold_of(job).is_zero() {
        return Decision::Run;
    }
    let mut oldest_ms = trigger_oldest_ms;
    let due_by_trigger = holding_until(&refiner.config, job, oldest_ms, now).is_none();
    let consumed = if nothing_observed || due_by_trigger {
        let sources = job.sources();
        match lakestream_core::refine::consumed(ctx, &job.job, &job.output, &sources).await {
            Ok(c) => {
                if let Some(t) = c.oldest_unconsumed {
                    oldest_ms = Some(t.timestamp_millis());
                }
                Some(c)
            }
            Err(e) => {
                tracing::warn!(job = %job.job, error = %e.redacted(), "reading what the job consumed failed; holding on what the trigger says");
                None
            }
        }
    } else {
        None
    };
    let Some(due_at_ms) = holding_until(&refiner.config, job, oldest_ms, now) else {
        return Decision::Run;
    };
    if let Some(c) = consumed {
        refiner.progress.ran_to_end(
            &job.job,
            &HashMap::new(),
            &c.versions,
            crate::source_ids(refiner, job),
            now,
        );
    }
    Decision::Hold {
        due_at_ms,
        oldest_ms: oldest_ms.unwrap_or(due_at_ms),
    }
}
