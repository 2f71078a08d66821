//! Which jobs have something new, answered from what this process already saw: a warm refine
//! function skips a job whose sources did not advance without loading any table.
//!
//! For every job that ran to the end (`more == false`), [`Progress`] keeps, per source, the
//! version up to which the job had nothing left to do. The source versions are *observed
//! before* the run (a notice's version, a probe's hit, or a load of a job seen for the first
//! time) and recorded only after it succeeded, so a version landing during the run is never
//! marked seen. The next invocation asks, per source:
//! - a notice names a version: due when it is past the seen version (no request at all);
//! - a schedule tick ([`Probe::Heads`]): two HEADs. The source's warm handle proves the table
//!   is still the one it loaded (`revalidate`), and its table id must be the one the job saw
//!   (a source deleted or re-created at its path, even with fewer versions, makes the job due,
//!   and its run says what happened); then the commit file after the seen version: absent
//!   means nothing new. The `txn`s still decide what a run
//!   consumes, so a wrong "due" costs a run that finds nothing, never a duplicate.
//!
//! What is seen expires after [`Progress::ttl`] (default [`SEEN_TTL`]): the job then loads its
//! tables again.

use chrono::{DateTime, Utc};
use lakestream_core::table::WarmHandles;
use lakestream_core::{Lake, Result};
use lakestream_formats::refine::RefineJob;
use std::collections::HashMap;
use std::sync::Mutex;

/// How long what a job saw is trusted before its tables are loaded again.
pub const SEEN_TTL: chrono::TimeDelta = chrono::TimeDelta::minutes(30);

/// A version of a source known to exist, and when it was committed (epoch ms, when known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// The version.
    pub version: u64,
    /// Its commit time, epoch milliseconds.
    pub committed_ms: Option<i64>,
}

/// Table versions the invocation already knows exist: from notices, and from the jobs it ran
/// (an output committed in this invocation is a new version of its readers' source).
pub type Hints = HashMap<String, Known>;

/// How to learn whether a source without a hint advanced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// One HEAD of the next commit file per source (schedule ticks: the safety net).
    Heads,
    /// Trust the hints alone (notices): a source without a hint has nothing new.
    HintsOnly,
}

/// Whether a job has something new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Nothing new since what the job saw.
    No,
    /// Run it. `observed`: source versions known to exist before the run (recorded as seen
    /// when it succeeds); `oldest_ms`: commit time of the oldest version known to be new.
    Yes {
        /// Source versions observed before the run.
        observed: HashMap<String, u64>,
        /// Commit time of the oldest new version known (epoch ms).
        oldest_ms: Option<i64>,
    },
}

#[derive(Debug, Clone)]
struct Seen {
    since: DateTime<Utc>,
    versions: HashMap<String, u64>,
    /// The table id of each source the job saw.
    ids: HashMap<String, String>,
}

/// What each job saw, kept across invocations (see the module docs).
#[derive(Debug)]
pub struct Progress {
    jobs: Mutex<HashMap<String, Seen>>,
    /// How long a job's seen versions are trusted.
    pub ttl: chrono::TimeDelta,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            jobs: Mutex::default(),
            ttl: SEEN_TTL,
        }
    }
}

impl Progress {
    fn seen(&self, job: &str, now: DateTime<Utc>) -> Option<Seen> {
        let jobs = self.jobs.lock().ok()?;
        jobs.get(job).filter(|s| now - s.since < self.ttl).cloned()
    }

    /// Is `job` due? A job not seen (or seen too long ago) is due with nothing observed: the
    /// caller observes its sources' latest versions by loading them before the run.
    pub async fn due(
        &self,
        lake: &Lake,
        warm: &WarmHandles,
        job: &RefineJob,
        hints: &Hints,
        probe: Probe,
        now: DateTime<Utc>,
    ) -> Result<Due> {
        let Some(seen) = self.seen(&job.job, now) else {
            return Ok(Due::Yes {
                observed: HashMap::new(),
                oldest_ms: oldest(job.sources().iter().filter_map(|s| hints.get(*s))),
            });
        };
        let mut observed = HashMap::new();
        let mut oldest_ms: Option<i64> = None;
        for source in job.sources() {
            let after = seen.versions.get(source).copied();
            if let Some(k) = hints.get(source) {
                if after.is_none_or(|a| k.version > a) {
                    observed.insert(source.to_string(), k.version);
                    oldest_ms = min_opt(oldest_ms, k.committed_ms);
                }
                continue;
            }
            if probe == Probe::HintsOnly {
                continue;
            }
            let next = after.map_or(0, |a| a + 1);
            let id = seen.ids.get(source).map(String::as_str);
            match probe_source(lake, warm, source, id, next).await? {
                Probed::Nothing => {}
                Probed::Committed(ms) => {
                    observed.insert(source.to_string(), next);
                    oldest_ms = min_opt(oldest_ms, Some(ms));
                }
                // Not the table the job saw (or no warm handle): load it all again.
                Probed::Unknown => {
                    self.forget(&job.job);
                    return Ok(Due::Yes {
                        observed: HashMap::new(),
                        oldest_ms: None,
                    });
                }
            }
        }
        if observed.is_empty() {
            return Ok(Due::No);
        }
        Ok(Due::Yes {
            observed,
            oldest_ms,
        })
    }

    /// `job` ran to the end: every source version it observed before the run (up to what the
    /// run read of it), and every version its last run read up to, had nothing left for it. `first_seen` keeps the time
    /// the entry was made (the TTL runs from the first load).
    pub fn ran_to_end(
        &self,
        job: &str,
        observed: &HashMap<String, u64>,
        read_up_to: &[(String, u64)],
        ids: HashMap<String, String>,
        now: DateTime<Utc>,
    ) {
        let Ok(mut jobs) = self.jobs.lock() else {
            return;
        };
        let entry = jobs.entry(job.to_string()).or_insert_with(|| Seen {
            since: now,
            versions: HashMap::new(),
            ids: HashMap::new(),
        });
        entry.ids.extend(ids);
        // A version observed before the run came from a notice or a probe: it counts only up to
        // what the run read of that source. A forged notice naming version 10^9 of a table at
        // version 5 would otherwise make every real notice below it look seen.
        let read: HashMap<&str, u64> = read_up_to.iter().map(|(t, v)| (t.as_str(), *v)).collect();
        let observed = observed
            .iter()
            .filter_map(|(t, v)| Some((t, (*v).min(*read.get(t.as_str())?))));
        for (t, v) in observed.chain(read_up_to.iter().map(|(t, v)| (t, *v))) {
            let e = entry.versions.entry(t.clone()).or_insert(v);
            *e = (*e).max(v);
        }
    }

    /// Forget what `job` saw (it failed, or was cut short): its next invocation loads again.
    pub fn forget(&self, job: &str) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.remove(job);
        }
    }

    /// Whether `job` has seen versions (not expired at `now`).
    pub fn knows(&self, job: &str, now: DateTime<Utc>) -> bool {
        self.seen(job, now).is_some()
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn oldest<'a>(known: impl Iterator<Item = &'a Known>) -> Option<i64> {
    known.filter_map(|k| k.committed_ms).min()
}

enum Probed {
    Nothing,
    Committed(i64),
    Unknown,
}

/// Revalidate `table`'s warm handle (one HEAD of its head's commit file) and compare its table
/// id with the one the job saw (`id`), then HEAD the commit file of `version`: its time (epoch
/// ms) when it exists.
async fn probe_source(
    lake: &Lake,
    warm: &WarmHandles,
    table: &str,
    id: Option<&str>,
    version: u64,
) -> Result<Probed> {
    let handle = warm.take(lake, table).await?;
    if !handle.exists() || id.is_none() || handle.table_id().ok().as_deref() != id {
        warm.put(handle);
        return Ok(Probed::Unknown);
    }
    let found = handle.commit_time(version).await;
    warm.put(handle);
    Ok(match found? {
        Some(t) => Probed::Committed(t.timestamp_millis()),
        None => Probed::Nothing,
    })
}
