//! What a job's output says it consumed of each source (its `txn`s), and when the oldest
//! version after that was committed: where a job that holds for its freshness target counts
//! from when nothing else tells (a process new to the job, the safety net's tick). Notices
//! name versions, but a notice delivered again after its change was applied names an old one;
//! the output's `txn`s are what the run itself starts from.

use super::{RunContext, source_id_property};
use crate::error::Result;
use chrono::{DateTime, Utc};

/// A job's progress as its output records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consumed {
    /// Per source, the last version the output consumed (sources it consumed nothing of are
    /// absent).
    pub versions: Vec<(String, u64)>,
    /// Commit time of the oldest version not consumed yet, over every source (`None`: every
    /// source is consumed up to its latest version, or has no table yet). A version whose
    /// commit file is gone (log cleanup) counts as committed at the epoch: long overdue.
    pub oldest_unconsumed: Option<DateTime<Utc>>,
}

/// Load `output` and `sources` through `ctx`, all at once (with warm handles: the kept handles,
/// which the run reuses) and read what `job` consumed: one lookup of each source's `txn` in the output,
/// then one HEAD of the first unconsumed commit file per source that has one. A source whose
/// table id is not the one the output recorded (re-created) makes the job due at once.
pub async fn consumed(
    ctx: &RunContext<'_>,
    job: &str,
    output: &str,
    sources: &[&str],
) -> Result<Consumed> {
    // The output and the sources at once (one wait at S3 for their identity HEADs and next
    // commits, not one per table).
    let (out, loaded) = futures::join!(
        ctx.load(output),
        futures::future::join_all(sources.iter().map(|s| ctx.load_source(s)))
    );
    let mut out = out?;
    let mut loaded = loaded.into_iter();
    let apps: Vec<String> = sources.iter().map(|s| ctx.app_id(job, s)).collect();
    let txns = out.committed(&apps).await?;
    let mut recorded_ids = Vec::new();
    for source in sources {
        let id = match out.exists() {
            true => out.property(&source_id_property(source))?,
            false => None,
        };
        recorded_ids.push(id);
    }
    ctx.keep(out);
    let mut found = Consumed::default();
    for ((source, app), recorded) in sources.iter().zip(&apps).zip(recorded_ids) {
        let src = match loaded.next() {
            Some(src) => src?,
            None => ctx.load_source(source).await?,
        };
        let Some(latest) = src.version().filter(|_| src.exists()) else {
            continue;
        };
        // Re-created since the output recorded it: the `txn` counts the old table's versions.
        // Due now (the run says what happened), and nothing of it counts as consumed.
        if recorded.is_some_and(|id| src.table_id().ok().as_deref() != Some(id.as_str())) {
            found.oldest_unconsumed = Some(DateTime::<Utc>::UNIX_EPOCH);
            continue;
        }
        let consumed = txns.get(app).and_then(|v| u64::try_from(*v).ok());
        if let Some(v) = consumed {
            found.versions.push((source.to_string(), v));
        }
        let Some(next) = consumed.map_or(Some(0), |c| c.checked_add(1)) else {
            continue;
        };
        if next > latest {
            continue;
        }
        let at = src
            .commit_time(next)
            .await?
            .unwrap_or(DateTime::<Utc>::UNIX_EPOCH);
        found.oldest_unconsumed = Some(found.oldest_unconsumed.map_or(at, |o| o.min(at)));
    }
    Ok(found)
}
