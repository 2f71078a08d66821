//! What one refine job did, said two ways from its report: the EMF metrics line the function
//! prints for CloudWatch, and the one-line summary `lakestream refine` prints. Kept here so the
//! report's shape is read in one place.

use crate::JobState;
use lakestream_core::refine::{JobReport, SideReport};
use lakestream_lambda::telemetry::{Metric, emf_record};

/// Which per-job values become CloudWatch metrics (dimensions `Function`, `Job`): each is one
/// custom metric per job ($0.30 a month each, 70 jobs x 15 values is $315), so by default only a
/// job behind its freshness target publishes `LagSeconds` and `BehindTarget` (billed only for
/// the hours it is behind); everything else is logged on the same line, for Logs Insights.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JobMetrics {
    /// `LagSeconds` and `BehindTarget` as metrics while the job is behind its target.
    #[default]
    Behind,
    /// Every value as a metric, on every run (`LAKESTREAM_JOB_METRICS=all`).
    All,
}

impl JobMetrics {
    /// Parse `LAKESTREAM_JOB_METRICS` (`behind` or `all`).
    pub fn parse(v: &str) -> Option<Self> {
        match v {
            "behind" => Some(Self::Behind),
            "all" => Some(Self::All),
            _ => None,
        }
    }
}

/// One EMF line per job that ran (dimensions `Function`, `Job`): rows read and late per side,
/// rows joined, keys upserted (an aggregate's groups), source rows an aggregate retracted and
/// the groups it recomputed, runs, the versions still unread, and its freshness: `LagSeconds`
/// (how long the oldest new source version waited, when its commit time is known) and
/// `BehindTarget` (1 when that is over the freshness target). Which of them are metrics:
/// [`JobMetrics`].
pub fn metrics_line(
    r: &JobReport,
    duration_ms: f64,
    ts: i64,
    lag_seconds: Option<f64>,
    behind_target: bool,
    policy: JobMetrics,
) -> String {
    let totals = r.totals();
    let side = |i: usize| totals.get(i).cloned().unwrap_or_default();
    let (l, rt) = (side(0), side(1));
    let upserted = r.upserted();
    let (retracted, recomputed) = r
        .runs
        .iter()
        .filter_map(|run| run.aggregated())
        .fold((0, 0), |(a, b), c| (a + c.retracted, b + c.recomputed));
    let lag = |s: &SideReport| s.latest.saturating_sub(s.to.unwrap_or(0)) as f64;
    let mut values = vec![
        Metric::new("Runs", "Count", r.runs.len() as f64),
        Metric::new("LeftRowsRead", "Count", l.rows as f64),
        Metric::new("RightRowsRead", "Count", rt.rows as f64),
        Metric::new("LateRows", "Count", (l.late + rt.late) as f64),
        Metric::new("RowsJoined", "Count", r.joined() as f64),
        Metric::new("KeysInserted", "Count", upserted.inserted as f64),
        Metric::new("KeysUpdated", "Count", upserted.updated as f64),
        Metric::new("KeysDeleted", "Count", upserted.deleted as f64),
        Metric::new("OlderRowsIgnored", "Count", upserted.older_ignored as f64),
        Metric::new("RowsRetracted", "Count", retracted as f64),
        Metric::new("GroupsRecomputed", "Count", recomputed as f64),
        Metric::new("VersionsBehind", "Count", lag(&l).max(lag(&rt))),
        Metric::new("DurationMs", "Milliseconds", duration_ms),
    ];
    let mut freshness = vec![Metric::new(
        "BehindTarget",
        "Count",
        f64::from(u8::from(behind_target)),
    )];
    if let Some(lag) = lag_seconds {
        freshness.push(Metric::new("LagSeconds", "Seconds", lag));
    }
    let (metrics, properties) = match policy {
        JobMetrics::All => {
            values.extend(freshness);
            (values, vec![])
        }
        JobMetrics::Behind if behind_target => (freshness, values),
        JobMetrics::Behind => {
            values.extend(freshness);
            (vec![], values)
        }
    };
    emf_record(
        "Lakestream",
        &[("Function", "refine"), ("Job", &r.job)],
        &metrics,
        &properties,
        ts,
    )
}

/// The invocation's EMF line (dimension `Function` only, so one alarm covers every job): three
/// metrics (jobs failed, behind their freshness target, and the largest lag among them,
/// `MaxLagSeconds`: what the template's alarms and a freshness dashboard read) and, logged only
/// (every metric name is a fixed $0.30 a month), jobs deferred by the time budget (a job that
/// stays deferred falls behind its target), run, and not due (nothing new, or holding for its
/// freshness target).
pub fn invocation_line(resp: &crate::RefineResponse) -> String {
    let jobs = &resp.jobs;
    let count = |f: &dyn Fn(&crate::JobResult) -> bool| jobs.iter().filter(|j| f(j)).count() as f64;
    let max_lag = jobs
        .iter()
        .filter_map(crate::JobResult::lag_seconds)
        .fold(0.0_f64, f64::max);
    let ts = jobs
        .iter()
        .map(|j| j.finished_at_ms)
        .max()
        .unwrap_or_else(|| chrono::Utc::now().timestamp_millis());
    emf_record(
        "Lakestream",
        &[("Function", "refine")],
        &[
            Metric::new("JobsFailed", "Count", count(&|j| j.outcome().is_err())),
            Metric::new("JobsBehindTarget", "Count", count(&|j| j.behind_target())),
            Metric::new("MaxLagSeconds", "Seconds", max_lag),
        ],
        &[
            Metric::new("JobsDeferred", "Count", count(&|j| j.deferred())),
            Metric::new(
                "JobsRun",
                "Count",
                count(&|j| matches!(j.state, JobState::Ran { .. })),
            ),
            Metric::new(
                "JobsNotDue",
                "Count",
                count(&|j| matches!(j.state, JobState::NotDue | JobState::Holding { .. })),
            ),
        ],
        ts,
    )
}

/// The line `lakestream refine` prints for a job that wrote into `output`, e.g.
/// `refine curated: 1 run(s), read raw/order v-..v3 (6 rows, 0 late), ... -> 6 rows joined
/// into curated/order (0.12s)`.
pub fn summary_line(r: &JobReport, output: &str, took: std::time::Duration) -> String {
    if let Some(t) = &r.waiting_for {
        return format!(
            "refine {}: waiting for source `{t}` (not created yet)",
            r.job
        );
    }
    if r.runs.is_empty() {
        return format!("refine {}: nothing new", r.job);
    }
    let sides: Vec<String> = r
        .totals()
        .iter()
        .map(|s| {
            format!(
                "{} v{}..v{} ({} rows, {} late)",
                s.table,
                s.from.map_or("-".into(), |v| v.to_string()),
                s.to.map_or("-".into(), |v| v.to_string()),
                s.rows,
                s.late
            )
        })
        .collect();
    let upserted = r.upserted();
    let aggregated: Vec<_> = r.runs.iter().filter_map(|run| run.aggregated()).collect();
    let result = if !aggregated.is_empty() {
        let (retracted, recomputed) = aggregated
            .iter()
            .fold((0, 0), |(a, b), c| (a + c.retracted, b + c.recomputed));
        format!(
            "{} groups inserted, {} updated, {} deleted ({retracted} source rows retracted, {recomputed} groups recomputed) in {output}",
            upserted.inserted, upserted.updated, upserted.deleted
        )
    } else if !upserted.is_zero() {
        format!(
            "{} inserted, {} updated, {} deleted, {} older rows ignored in {output}",
            upserted.inserted, upserted.updated, upserted.deleted, upserted.older_ignored
        )
    } else {
        format!("{} rows joined into {output}", r.joined())
    };
    format!(
        "refine {}: {} run(s), read {} -> {result} ({:.2}s){}",
        r.job,
        r.runs.len(),
        sides.join(", "),
        took.as_secs_f64(),
        if r.more {
            "; more to read (run budget reached)"
        } else {
            ""
        }
    )
}
