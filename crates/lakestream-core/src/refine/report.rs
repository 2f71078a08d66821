//! What refine runs did, for the CLI, the function's response and its metrics. A run's row
//! counts depend on the job's kind ([`RunCounts`]); the JSON shape stays the flat one callers
//! read (`"joined"`, `"inserted"`, ... on every run, zero for the other kind), so a new kind
//! adds a variant here and its fields there.

use serde::Serialize;

/// What one run read from a source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SideReport {
    /// Source table.
    pub table: String,
    /// Last version consumed before the run (`None`: nothing).
    pub from: Option<u64>,
    /// Last version consumed by the run.
    pub to: Option<u64>,
    /// The source's latest version.
    pub latest: u64,
    /// New data files read.
    pub files: usize,
    /// New rows read.
    pub rows: usize,
    /// New rows that were late, or beyond processing time plus `max_future_skew` (dead-lettered,
    /// not joined).
    pub late: usize,
}

/// Rows an interval join wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JoinCounts {
    /// Output rows appended.
    pub joined: usize,
}

/// Keys an upsert changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpsertCounts {
    /// Keys inserted.
    pub inserted: usize,
    /// Keys whose row was replaced by a newer one.
    pub updated: usize,
    /// Keys deleted (CDC).
    pub deleted: usize,
    /// Source rows ignored because the output or a tombstone already had a newer row.
    pub older_ignored: usize,
}

impl UpsertCounts {
    /// Nothing changed and nothing was ignored.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// The row counts of one run, by the kind of job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunCounts {
    /// An interval join's.
    Join(JoinCounts),
    /// A keyed upsert's.
    Upsert(UpsertCounts),
    /// An aggregate's.
    Aggregate(AggregateCounts),
}

/// Groups an aggregate run changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AggregateCounts {
    /// Groups that are new.
    pub inserted: usize,
    /// Groups whose row changed.
    pub updated: usize,
    /// Groups that lost their last row.
    pub deleted: usize,
    /// Source rows retracted (deleted or updated by their commits).
    pub retracted: usize,
    /// Groups whose `min`/`max` lost its extreme, recomputed from the source.
    pub recomputed: usize,
    /// Source files read to recompute them.
    pub recompute_files: usize,
}

/// What one run did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Per source (a join's left first); empty when there was nothing new.
    pub sides: Vec<SideReport>,
    /// Rows written, by kind.
    pub counts: RunCounts,
    /// The output version committed.
    pub output_version: Option<u64>,
    /// Commit attempts (more than 1: a concurrent run or a storage error made it re-plan).
    pub attempts: u32,
    /// A source table does not exist yet: nothing was read.
    pub waiting_for: Option<String>,
}

impl RunReport {
    /// An empty report of a run with these (zero) counts.
    pub fn new(counts: RunCounts) -> Self {
        Self {
            sides: vec![],
            counts,
            output_version: None,
            attempts: 0,
            waiting_for: None,
        }
    }

    /// Output rows appended (0 for an upsert).
    pub fn joined(&self) -> usize {
        match self.counts {
            RunCounts::Join(j) => j.joined,
            RunCounts::Upsert(_) | RunCounts::Aggregate(_) => 0,
        }
    }

    /// Keys changed (an aggregate's groups; all zero for a join).
    pub fn upserted(&self) -> UpsertCounts {
        match self.counts {
            RunCounts::Upsert(u) => u,
            RunCounts::Aggregate(a) => UpsertCounts {
                inserted: a.inserted,
                updated: a.updated,
                deleted: a.deleted,
                older_ignored: 0,
            },
            RunCounts::Join(_) => UpsertCounts::default(),
        }
    }

    /// An aggregate's counts (`None` for other kinds).
    pub fn aggregated(&self) -> Option<AggregateCounts> {
        match self.counts {
            RunCounts::Aggregate(a) => Some(a),
            _ => None,
        }
    }
}

/// The JSON of a run, as the function's response and `lakestream refine --json` have always
/// printed it: every count field present.
#[derive(Serialize)]
struct RunReportJson<'a> {
    sides: &'a [SideReport],
    joined: usize,
    inserted: usize,
    updated: usize,
    deleted: usize,
    older_ignored: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    retracted: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recomputed: Option<usize>,
    output_version: Option<u64>,
    attempts: u32,
    waiting_for: &'a Option<String>,
}

impl Serialize for RunReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let u = self.upserted();
        RunReportJson {
            sides: &self.sides,
            joined: self.joined(),
            inserted: u.inserted,
            updated: u.updated,
            deleted: u.deleted,
            older_ignored: u.older_ignored,
            retracted: self.aggregated().map(|a| a.retracted),
            recomputed: self.aggregated().map(|a| a.recomputed),
            output_version: self.output_version,
            attempts: self.attempts,
            waiting_for: &self.waiting_for,
        }
        .serialize(s)
    }
}

/// What a job did until nothing was new (or the run budget ended).
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobReport {
    /// The job.
    pub job: String,
    /// Each run that committed, in order.
    pub runs: Vec<RunReport>,
    /// Sources still have unread versions (the run budget ended first).
    pub more: bool,
    /// A source table does not exist yet.
    pub waiting_for: Option<String>,
}

impl JobReport {
    /// Rows read, late and consumed versions per source, over all runs.
    pub fn totals(&self) -> Vec<SideReport> {
        let mut out: Vec<SideReport> = Vec::new();
        for r in &self.runs {
            for s in &r.sides {
                match out.iter_mut().find(|o| o.table == s.table) {
                    Some(o) => {
                        o.to = s.to;
                        o.latest = s.latest;
                        o.files += s.files;
                        o.rows += s.rows;
                        o.late += s.late;
                    }
                    None => out.push(s.clone()),
                }
            }
        }
        out
    }

    /// Output rows appended over all runs (0 for an upsert).
    pub fn joined(&self) -> usize {
        self.runs.iter().map(RunReport::joined).sum()
    }

    /// Keys inserted, updated, deleted and source rows ignored as older, over all runs (all
    /// zero for a join).
    pub fn upserted(&self) -> UpsertCounts {
        self.runs
            .iter()
            .map(RunReport::upserted)
            .fold(UpsertCounts::default(), |a, r| UpsertCounts {
                inserted: a.inserted + r.inserted,
                updated: a.updated + r.updated,
                deleted: a.deleted + r.deleted,
                older_ignored: a.older_ignored + r.older_ignored,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_serializes_flat_with_every_count() -> serde_json::Result<()> {
        let mut run = RunReport::new(RunCounts::Upsert(UpsertCounts {
            inserted: 6,
            updated: 1,
            deleted: 2,
            older_ignored: 3,
        }));
        run.output_version = Some(4);
        run.attempts = 1;
        assert_eq!(
            serde_json::to_string(&run)?,
            r#"{"sides":[],"joined":0,"inserted":6,"updated":1,"deleted":2,"older_ignored":3,"output_version":4,"attempts":1,"waiting_for":null}"#
        );
        let join = RunReport::new(RunCounts::Join(JoinCounts { joined: 8 }));
        assert!(serde_json::to_string(&join)?.contains(r#""joined":8,"inserted":0"#));
        Ok(())
    }
}
