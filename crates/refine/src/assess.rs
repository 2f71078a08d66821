//! Whether a job of a trigger runs now ([`assess`]): its due check ([`due`](crate::due)) and,
//! when due, whether it holds for its freshness target ([`hold`](crate::hold)).
//!
//! The jobs whose assessment depends on no other job of the trigger are assessed together,
//! [`ASSESS_AT_ONCE`] at a time, before any job runs ([`assess_independent`]): their sources
//! are no job's output (no run of this trigger moves them) and no other job's source (each
//! table's kept handle is used by one assessment at a time). A schedule tick over a family of
//! 70 tables then waits for its HEADs and first-sight loads about 16 at a time instead of one
//! after another; the runs stay one after another, in dependency order. Each is assessed as of
//! the moment the trigger's assessment ran (a version landing while earlier jobs run is found by
//! its notice or the next tick), and none once the invocation's time budget is spent.

use crate::due::{Due, Hints, NewVersions};
use crate::response::JobState;
use crate::{HowToRun, Refiner, hold};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use lakestream_core::refine::RunContext;
use lakestream_formats::refine::RefineJob;
use std::collections::HashMap;

/// Assessments in flight at once ([`assess_independent`]).
pub const ASSESS_AT_ONCE: usize = 16;

/// What [`assess`] decided.
pub(crate) enum Assessed {
    /// Nothing to run: not due, or holding.
    Settled(JobState),
    /// Due now: run on sources at least as new as `observed` (judged at `now`); `new`: the
    /// versions the trigger or the probe named as new, with their commit times.
    Run {
        observed: HashMap<String, u64>,
        new: NewVersions,
        now: DateTime<Utc>,
    },
}

/// Whether `job` is due (judged from `hints` and the process's progress; a failed probe makes
/// it due) and, when due, whether it holds for its freshness target.
pub(crate) async fn assess(
    refiner: &Refiner,
    ctx: &RunContext<'_>,
    job: &RefineJob,
    hints: &Hints,
    how: HowToRun,
) -> Assessed {
    let now = refiner.clock.now();
    let due = match refiner
        .progress
        .due(&refiner.warm, job, hints, how.probe, now)
        .await
    {
        Ok(d) => d,
        Err(e) => Due::Yes {
            // The probe failed: run the job, which reads what it needs itself.
            observed: HashMap::new(),
            new: {
                tracing::warn!(job = %job.job, error = %e.redacted(), "due check failed; running the job");
                NewVersions::default()
            },
        },
    };
    let Due::Yes { observed, new } = due else {
        return Assessed::Settled(JobState::NotDue);
    };
    let decided = hold::decide(
        refiner,
        ctx,
        job,
        how.can_hold,
        observed.is_empty(),
        new.oldest(),
        now,
    )
    .await;
    match decided {
        hold::Decision::Hold {
            due_at_ms,
            oldest_ms,
        } => Assessed::Settled(JobState::Holding {
            due_at_ms,
            oldest_ms,
        }),
        hold::Decision::Run => Assessed::Run { observed, new, now },
    }
}

/// The assessments of the jobs of `order` that depend on no other job of it (module doc),
/// [`ASSESS_AT_ONCE`] at a time, by job name; `how` says how each job runs.
pub(crate) async fn assess_independent(
    refiner: &Refiner,
    ctx: &RunContext<'_>,
    order: &[&RefineJob],
    hints: &Hints,
    how: impl Fn(&RefineJob) -> HowToRun,
) -> HashMap<String, Assessed> {
    let independent: Vec<&RefineJob> = order
        .iter()
        .copied()
        .filter(|job| independent_of_others(job, order))
        .collect();
    if independent.len() < 2 {
        return HashMap::new();
    }
    futures::stream::iter(independent)
        .map(|job| {
            let how = how(job);
            async move {
                // Out of time: not assessed (the run loop defers it).
                if how.until.is_some_and(|u| std::time::Instant::now() >= u) {
                    return None;
                }
                Some((job.job.clone(), assess(refiner, ctx, job, hints, how).await))
            }
        })
        .buffer_unordered(ASSESS_AT_ONCE)
        .filter_map(futures::future::ready)
        .collect()
        .await
}

/// Whether no source of `job` is written or read by another job of `order`.
fn independent_of_others(job: &RefineJob, order: &[&RefineJob]) -> bool {
    job.sources().iter().all(|s| {
        order.iter().all(|other| {
            other.output != *s && (other.job == job.job || !other.sources().contains(s))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::independent_of_others;
    use lakestream_formats::config::PipelineConfig;

    #[test]
    fn jobs_sharing_or_reading_a_job_s_tables_are_not_assessed_ahead() {
        // The example's curated and gold both read raw/order, processed reads curated's output;
        // `alone` is the only reader of its source.
        let example = include_str!("../../../lakestream.toml");
        let alone = r#"
[[refine]]
job = "alone"
output = "gold/alone"

[refine.aggregate]
source = "raw/other"
group_by = ["order_owner"]
measures = ["count(*) as orders"]
"#;
        let config = PipelineConfig::from_toml(&format!("{example}{alone}")).expect("parses");
        let order: Vec<_> = config.refine.iter().collect();
        let independent: Vec<&str> = order
            .iter()
            .filter(|j| independent_of_others(j, &order))
            .map(|j| j.job.as_str())
            .collect();
        assert_eq!(independent, ["alone"]);
    }
}
