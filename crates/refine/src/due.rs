//! Which jobs have something new, answered from what this process already saw: a warm refine
//! function skips a job whose sources did not advance without loading any table.
//!
//! For every job that ran to the end (`more == false`), [`Progress`] keeps, per source, the
//! version up to which the job had nothing left to do. The source versions are *observed
//! before* the run (a notice's version, a probe's hit, or a load of a job seen for the first
//! time) and recorded only after it succeeded, so a version landing during the run is never
//! marked seen. A job that holds for its freshness target in a process new to it is recorded
//! at what its output's `txn`s say it consumed (`lakestream_core::refine::consumed`, which
//! makes a job with a re-created source due instead). The next invocation asks, per source:
//! - a notice names a version: due when it is past the seen version (no request at all; when
//!   the version right after the seen one is not named, its time is unknown, and the hold
//!   decision reads what the output consumed: [`NewVersions::oldest`]);
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
use lakestream_core::Result;
use lakestream_core::table::WarmHandles;
use lakestream_formats::refine::RefineJob;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// How long what a job saw is trusted before its tables are loaded again.
pub const SEEN_TTL: chrono::TimeDelta = chrono::TimeDelta::minutes(30);

/// A version of a source known to exist, and the commit times of the versions named for it
/// (by notices, or by the job that committed it in this invocation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// The newest version named.
    pub version: u64,
    /// Commit time of each version named (epoch milliseconds), when known.
    pub committed: BTreeMap<u64, i64>,
}

impl Known {
    /// `version`, committed at `committed_ms` when known.
    pub fn new(version: u64, committed_ms: Option<i64>) -> Self {
        Self {
            version,
            committed: committed_ms.map(|t| (version, t)).into_iter().collect(),
        }
    }

    /// Another version named, committed at `committed_ms` when known (the earliest time of a
    /// version named twice is kept).
    pub fn add(&mut self, version: u64, committed_ms: Option<i64>) {
        self.version = self.version.max(version);
        if let Some(ms) = committed_ms {
            let t = self.committed.entry(version).or_insert(ms);
            *t = (*t).min(ms);
        }
    }

    /// The commit times of the versions named after `after` (all of them when `None`).
    fn after(&self, after: Option<u64>) -> BTreeMap<u64, i64> {
        newer(&self.committed, after)
            .map(|(v, t)| (*v, *t))
            .collect()
    }
}

/// The entries of `times` for versions after `after`.
fn newer(times: &BTreeMap<u64, i64>, after: Option<u64>) -> impl Iterator<Item = (&u64, &i64)> {
    use std::ops::Bound::{Excluded, Unbounded};
    let from = after.map_or(Unbounded, Excluded);
    times.range((from, Unbounded))
}

/// Table versions the invocation already knows exist: from notices, and from the jobs it ran
/// (an output committed in this invocation is a new version of its readers' source).
pub type Hints = HashMap<String, Known>;

/// The commit times of the source versions a due job was told (or found) are new, per source:
/// the job's lag starts at the oldest of them *its run read* ([`NewVersions::oldest_read`]), so
/// a notice delivered again after its change was applied is no lag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewVersions {
    times: HashMap<String, BTreeMap<u64, i64>>,
    /// A source's first unseen version was not named (its notice was lost, or arrived after a
    /// later one's): the oldest unapplied change is older than any time known here.
    gap: bool,
}

impl NewVersions {
    /// The oldest commit time of them all (what a job holds on before it runs); `None` when
    /// it is not known: none was named, or the versions named skip the first unseen one (the
    /// hold decision then reads what the output consumed).
    pub fn oldest(&self) -> Option<i64> {
        if self.gap {
            return None;
        }
        self.times.values().flat_map(|t| t.values().copied()).min()
    }

    /// The oldest commit time of a version the run read: after the version each source was
    /// consumed up to before the run and up to its latest version the run loaded (`sides`:
    /// source table, last version consumed before, latest; a version named beyond what the
    /// table holds, a forged notice's, is not counted).
    pub fn oldest_read<'a>(
        &self,
        sides: impl IntoIterator<Item = (&'a str, Option<u64>, u64)>,
    ) -> Option<i64> {
        sides
            .into_iter()
            .filter_map(|(table, from, latest)| {
                newer(self.times.get(table)?, from)
                    .take_while(|(v, _)| **v <= latest)
                    .map(|(_, t)| *t)
                    .min()
            })
            .min()
    }

    fn insert(&mut self, table: &str, times: BTreeMap<u64, i64>) {
        if !times.is_empty() {
            self.times
                .entry(table.to_string())
                .or_default()
                .extend(times);
        }
    }
}

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
    /// when it succeeds); `new`: the commit times of the versions known to be new.
    Yes {
        /// Source versions observed before the run.
        observed: HashMap<String, u64>,
        /// Commit times of the source versions known to be new.
        new: NewVersions,
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
        warm: &WarmHandles,
        job: &RefineJob,
        hints: &Hints,
        probe: Probe,
        now: DateTime<Utc>,
    ) -> Result<Due> {
        let Some(seen) = self.seen(&job.job, now) else {
            // What the job applied is not known here: every version named may be new (the
            // run's own read decides which were).
            let mut new = NewVersions::default();
            for source in job.sources() {
                if let Some(k) = hints.get(source) {
                    new.insert(source, k.after(None));
                }
            }
            return Ok(Due::Yes {
                observed: HashMap::new(),
                new,
            });
        };
        let mut observed = HashMap::new();
        let mut new = NewVersions::default();
        for source in job.sources() {
            let after = seen.versions.get(source).copied();
            if let Some(k) = hints.get(source) {
                if after.is_none_or(|a| k.version > a) {
                    observed.insert(source.to_string(), k.version);
                    let times = k.after(after);
                    // The notice of the first version after the seen one is not here (lost,
                    // or behind a later one's): its time, the oldest, is unknown.
                    let first_unseen = after.map_or(0, |a| a.saturating_add(1));
                    new.gap |= !times.contains_key(&first_unseen);
                    new.insert(source, times);
                }
                continue;
            }
            if probe == Probe::HintsOnly {
                continue;
            }
            let next = after.map_or(0, |a| a + 1);
            let id = seen.ids.get(source).map(String::as_str);
            match probe_source(warm, source, id, next).await? {
                Probed::Nothing => {}
                Probed::Committed(ms) => {
                    observed.insert(source.to_string(), next);
                    new.insert(source, BTreeMap::from([(next, ms)]));
                }
                // Not the table the job saw (or no warm handle): load it all again.
                Probed::Unknown => {
                    self.forget(&job.job);
                    return Ok(Due::Yes {
                        observed: HashMap::new(),
                        new: NewVersions::default(),
                    });
                }
            }
        }
        if observed.is_empty() {
            return Ok(Due::No);
        }
        Ok(Due::Yes { observed, new })
    }

    /// `job` ran to the end: every source version it observed before the run (up to what the
    /// run read of it), and every version its last run read up to, had nothing left for it.
    /// The entry keeps the time it was made (the TTL runs from the first load); an expired one
    /// is replaced (the run that follows expiry loaded the tables again).
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
        let fresh = Seen {
            since: now,
            versions: HashMap::new(),
            ids: HashMap::new(),
        };
        let entry = jobs.entry(job.to_string()).or_insert_with(|| fresh.clone());
        if now - entry.since >= self.ttl {
            *entry = fresh;
        }
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

enum Probed {
    Nothing,
    Committed(i64),
    Unknown,
}

/// Revalidate `table`'s warm handle (one HEAD of its head's commit file) and compare its table
/// id with the one the job saw (`id`), and HEAD the commit file of `version` at the same time:
/// its time (epoch ms) when it exists and the table is the one the job saw.
async fn probe_source(
    warm: &WarmHandles,
    table: &str,
    id: Option<&str>,
    version: u64,
) -> Result<Probed> {
    let Some(mut handle) = warm.take_as_is(table) else {
        return Ok(Probed::Unknown);
    };
    if !handle.exists() || id.is_none() || handle.table_id().ok().as_deref() != id {
        warm.put(handle);
        return Ok(Probed::Unknown);
    }
    let probed = handle.revalidate_and_commit_time(version).await;
    warm.put(handle);
    Ok(match probed? {
        (false, _) => Probed::Unknown,
        (true, Some(t)) => Probed::Committed(t.timestamp_millis()),
        (true, None) => Probed::Nothing,
    })
}

#[cfg(test)]
mod tests {
    use super::{Known, NewVersions};
    use std::collections::HashMap;

    #[test]
    fn the_oldest_read_is_after_what_each_source_had_consumed() {
        let mut k = Known::new(3, Some(300));
        k.add(7, Some(700));
        k.add(5, Some(500));
        k.add(5, Some(450));
        k.add(7, None);
        assert_eq!(k.version, 7);
        let mut new = NewVersions::default();
        new.insert("a", k.after(Some(3)));
        new.insert("b", Known::new(2, Some(900)).after(None));
        assert_eq!(new.oldest(), Some(450));
        // a consumed up to 5 before the run: its 7 (700) and b's 2 (900) were read.
        assert_eq!(
            new.oldest_read([("a", Some(5), 7), ("b", Some(1), 2)]),
            Some(700)
        );
        // Everything named was applied already: no lag.
        assert_eq!(
            new.oldest_read([("a", Some(7), 7), ("b", Some(2), 2)]),
            None
        );
        assert_eq!(new.oldest_read([("a", Some(u64::MAX), u64::MAX)]), None);
        assert_eq!(new.oldest_read([("c", None, 3)]), None);
        assert_eq!(new.oldest_read([("a", None, 7)]), Some(450));
    }

    /// What a job saw expires after the TTL; the run after that starts a new entry (its own
    /// TTL), instead of leaving the job unknown to the process for good.
    #[test]
    fn a_run_after_the_ttl_is_trusted_again() {
        let progress = super::Progress::default();
        let t0 = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let seen = |at| progress.knows("j", at);
        let read = [("s".to_string(), 3)];
        progress.ran_to_end("j", &HashMap::new(), &read, HashMap::new(), t0);
        assert!(seen(t0 + super::SEEN_TTL - chrono::TimeDelta::seconds(1)));
        let later = t0 + super::SEEN_TTL + chrono::TimeDelta::seconds(1);
        assert!(!seen(later));
        progress.ran_to_end("j", &HashMap::new(), &read, HashMap::new(), later);
        assert!(seen(later + chrono::TimeDelta::seconds(1)));
    }

    /// A notice naming a version beyond what the table holds (forged) is not a change the run
    /// read: its commit time is no lag.
    #[test]
    fn a_version_beyond_the_latest_is_not_read() {
        let mut k = Known::new(4, Some(400));
        k.add(1_000_000_000, Some(1));
        let mut new = NewVersions::default();
        new.insert("a", k.after(Some(3)));
        assert_eq!(new.oldest_read([("a", Some(3), 4)]), Some(400));
        assert_eq!(new.oldest_read([("a", Some(4), 4)]), None);
    }
}
