//! Which refine jobs read a table, from the config alone (no listing): what an ingest function
//! names when it tells the refine function that a table advanced, and what the refine function
//! runs for such a notice without listing a `[[cdc]]` family's bronze directory.

use super::RefineJob;
use crate::config::PipelineConfig;

impl PipelineConfig {
    /// The refine jobs that read `table`: every configured job naming it as a source, and the
    /// apply job of the `[[cdc]]` family table whose bronze table it is (a configured job of the
    /// same name wins, as when a family is listed). Empty when no job reads it.
    pub fn jobs_reading(&self, table: &str) -> Vec<RefineJob> {
        let mut jobs: Vec<RefineJob> = self
            .refine
            .iter()
            .filter(|j| j.sources().contains(&table))
            .cloned()
            .collect();
        for family in &self.cdc {
            let Some(t) = family.table_of_bronze(table) else {
                continue;
            };
            if !family.includes(&t) {
                continue;
            }
            if let Ok(job) = family.apply_job(&t)
                && job.sources().contains(&table)
                && !self.refine.iter().any(|c| c.job == job.job)
            {
                jobs.push(job);
            }
        }
        jobs
    }

    /// The job named `job` among the jobs reading `table` (a notice names both: the job is found
    /// without a listing). `None` when no such job reads it (the config changed since).
    pub fn job_for_notice(&self, job: &str, table: &str) -> Option<RefineJob> {
        self.jobs_reading(table).into_iter().find(|j| j.job == job)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::PipelineConfig;

    const CONFIG: &str = r#"
pipeline = "p"
[lake]
root = "/tmp/lake"
[[refine]]
job = "processed"
output = "processed/order"
[refine.upsert]
source = "curated/order"
key = ["order_id"]
order_by = ["timestamp"]
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*"]
tables = ["public.orders", "public.items"]
"#;

    fn names(c: &PipelineConfig, table: &str) -> Vec<String> {
        c.jobs_reading(table).into_iter().map(|j| j.job).collect()
    }

    #[test]
    fn a_table_is_read_by_its_configured_jobs_and_its_family_apply_job() {
        let c = PipelineConfig::from_toml(CONFIG).unwrap();
        assert_eq!(names(&c, "curated/order"), ["processed"]);
        assert_eq!(
            names(&c, "bronze/crm/public/orders"),
            ["cdc-crm/public.orders"]
        );
        assert_eq!(
            c.job_for_notice("cdc-crm/public.orders", "bronze/crm/public/orders")
                .map(|j| j.output),
            Some("silver/crm/public/orders".to_string())
        );
        // Not read by anything: a table outside the family's list, a silver table, a raw table.
        assert!(names(&c, "bronze/crm/public/secret").is_empty());
        assert!(names(&c, "silver/crm/public/orders").is_empty());
        assert!(names(&c, "raw/order").is_empty());
        assert!(c.job_for_notice("processed", "raw/order").is_none());
    }
}
