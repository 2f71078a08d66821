//! Freshness targets in the refine function: whether a due job holds its changes (its target
//! leaves room to wait, README "Freshness targets") and whether anything would bring it back.

use crate::request::Trigger;
use chrono::{DateTime, Utc};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::refine::RefineJob;

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
