//! Each table's and job's freshness target, and the cadence it gives a refine job: how long its
//! oldest unapplied change waits before the job applies it (its *hold*), from the config alone.
//! The rules are in [`Freshness`](crate::config::Freshness)' module docs and README.md
//! ("Freshness targets").

use super::RefineJob;
use crate::config::{Freshness, PipelineConfig, SourceSettings};
use crate::error::{Error, Result};
use std::time::Duration;

/// Jobs reading jobs' outputs deeper than this are treated as having no known target (a cycle
/// is refused when the jobs run; this bounds the walk: a job reads at most two sources, so at
/// most 2^8 steps).
const MAX_DEPTH: usize = 8;

/// What the config says of a table: its target and how late, by design, its changes arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableCadence {
    /// The table's freshness target.
    pub freshness: Freshness,
    /// How late its changes arrive after the record was made (its ingest window, or its
    /// producing job's target less margin); zero for S3-notified tables.
    pub arrives_within: Duration,
}

impl PipelineConfig {
    /// The target and arrival of `table`: a topic's table, a `[[cdc]]` family's bronze or
    /// silver table, or a configured job's output. `None` for a table the config does not produce.
    pub fn table_cadence(&self, table: &str) -> Option<TableCadence> {
        self.cadence_at(table, 0)
    }

    fn cadence_at(&self, table: &str, depth: usize) -> Option<TableCadence> {
        if let Some(t) = self.topics.iter().find(|t| t.table == table) {
            return Some(TableCadence {
                freshness: t.freshness,
                arrives_within: t.freshness.batching_window(),
            });
        }
        for family in &self.cdc {
            if let Some(t) = family.table_of_bronze(table).filter(|t| family.includes(t)) {
                let freshness = family.freshness_of(&t);
                let arrives_within = match family.source {
                    SourceSettings::Debezium(_) => freshness.batching_window(),
                    // Landed objects are ingested as their notifications arrive.
                    SourceSettings::Dms(_) | SourceSettings::Files(_) => Duration::ZERO,
                };
                return Some(TableCadence {
                    freshness,
                    arrives_within,
                });
            }
        }
        for family in &self.cdc {
            if let Some(t) = family.table_of_silver(table).filter(|t| family.includes(t)) {
                // The family's apply job's output (a configured job of that name would be
                // found below only when it writes elsewhere).
                let freshness = family.freshness_of(&t);
                return Some(TableCadence {
                    freshness,
                    arrives_within: freshness.arrives_within(),
                });
            }
        }
        let job = self.refine.iter().find(|j| j.output == table)?;
        let freshness = self.job_freshness_at(job, depth + 1);
        Some(TableCadence {
            freshness,
            arrives_within: freshness.arrives_within(),
        })
    }

    /// A job's target: its own `freshness`, else the longest of its sources' targets (its
    /// output cannot be fresher than they are), else the default `60s`.
    pub fn freshness_of_job(&self, job: &RefineJob) -> Freshness {
        self.job_freshness_at(job, 0)
    }

    fn job_freshness_at(&self, job: &RefineJob, depth: usize) -> Freshness {
        if let Some(f) = job.freshness {
            return f;
        }
        self.sources_cadence(job, depth)
            .into_iter()
            .map(|c| c.freshness)
            .max()
            .unwrap_or_default()
    }

    fn sources_cadence(&self, job: &RefineJob, depth: usize) -> Vec<TableCadence> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        job.sources()
            .into_iter()
            .filter_map(|s| self.cadence_at(s, depth))
            .collect()
    }

    /// How long `job`'s oldest unapplied change waits before the job applies it: its target
    /// less its margin less how late its sources' changes arrive (at least zero).
    pub fn hold_of(&self, job: &RefineJob) -> Duration {
        let arrives = self
            .sources_cadence(job, 0)
            .into_iter()
            .map(|c| c.arrives_within)
            .max()
            .unwrap_or_default();
        self.freshness_of_job(job).hold(arrives)
    }

    /// A job's own target below a source's is refused: its output could never be that fresh.
    pub(crate) fn check_job_freshness(&self, key: &str, job: &RefineJob) -> Result<()> {
        let Some(own) = job.freshness else {
            return Ok(());
        };
        for s in job.sources() {
            if let Some(c) = self.table_cadence(s)
                && c.freshness > own
            {
                return Err(Error::Config(format!(
                    "`{key}.freshness` = \"{}\" is shorter than its source `{s}`'s \"{}\": its output cannot be fresher than its sources; set it to \"{}\" or more, or shorten the source's",
                    own.label(),
                    c.freshness.label(),
                    c.freshness.label()
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::PipelineConfig;

    const CONFIG: &str = r#"
pipeline = "p"
[lake]
root = "/tmp/lake"
[[topics]]
topic = "orders"
table = "raw/order"
columns = [{ name = "id", type = "int64" }, { name = "ts", type = "int64" }]
freshness = "15m"
[[refine]]
job = "curated"
output = "curated/order"
[refine.upsert]
source = "raw/order"
key = ["id"]
order_by = ["ts"]
[[refine]]
job = "processed"
output = "processed/order"
[refine.upsert]
source = "curated/order"
key = ["id"]
order_by = ["ts"]
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*"]
freshness = { "*" = "15m", "public.orders" = "60s" }
"#;

    fn secs(d: std::time::Duration) -> u64 {
        d.as_secs()
    }

    #[test]
    fn holds_follow_the_targets_along_the_chain() -> anyhow::Result<()> {
        let c = PipelineConfig::from_toml(CONFIG)?;
        let job = |name: &str| c.refine_job(name).cloned();
        let curated = job("curated").ok_or_else(|| anyhow::anyhow!("curated"))?;
        let processed = job("processed").ok_or_else(|| anyhow::anyhow!("processed"))?;
        // Both inherit 15m from raw/order; curated holds 450 s, processed (its source's
        // changes arrive up to 750 s late) nothing.
        assert_eq!(c.freshness_of_job(&curated).label(), "15m");
        assert_eq!(secs(c.hold_of(&curated)), 450);
        assert_eq!(c.freshness_of_job(&processed).label(), "15m");
        assert_eq!(secs(c.hold_of(&processed)), 0);
        // A family's table with its own 60s target applies at once; the others hold.
        let apply = |t: &str| c.jobs_reading(t).into_iter().next();
        let orders = apply("bronze/crm/public/orders").ok_or_else(|| anyhow::anyhow!("orders"))?;
        let items = apply("bronze/crm/public/items").ok_or_else(|| anyhow::anyhow!("items"))?;
        assert_eq!(c.freshness_of_job(&orders).label(), "60s");
        assert_eq!(secs(c.hold_of(&orders)), 0);
        assert_eq!(c.freshness_of_job(&items).label(), "15m");
        assert_eq!(secs(c.hold_of(&items)), 450);
        // A job reading a silver table inherits its target; its changes arrive up to 750 s
        // late, so a 15m job on it holds nothing.
        let silver = c
            .table_cadence("silver/crm/public/items")
            .ok_or_else(|| anyhow::anyhow!("silver cadence"))?;
        assert_eq!(silver.freshness.label(), "15m");
        assert_eq!(secs(silver.arrives_within), 750);
        Ok(())
    }

    #[test]
    fn a_job_cannot_be_fresher_than_its_source() {
        let text = CONFIG.replace(
            "job = \"processed\"\noutput = \"processed/order\"",
            "job = \"processed\"\noutput = \"processed/order\"\nfreshness = \"5m\"",
        );
        let e = PipelineConfig::from_toml(&text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("`refine[1].freshness` = \"5m\" is shorter than its source `curated/order`'s \"15m\""),
            "{e}"
        );
        let e =
            PipelineConfig::from_toml(&CONFIG.replace("\"15m\"\n[[refine]]", "\"5s\"\n[[refine]]"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
        assert!(e.contains("freshness") && e.contains("30s to 24h"), "{e}");
    }
}
