//! `lakestream refine`: run the config's refine jobs in dependency order until nothing is new,
//! and print what each did; `--skip-to TABLE=V` records a source version as consumed.

use anyhow::{Context, Result, bail};
use lakestream_core::Lake;
use lakestream_core::refine::{self, JobReport, RunContext};
use lakestream_formats::config::PipelineConfig;

/// Run `jobs` (all when empty); print one summary line per job (or JSON).
pub async fn run(
    config: &PipelineConfig,
    lake: &Lake,
    jobs: &[String],
    max_runs: usize,
    json: bool,
) -> Result<Vec<JobReport>> {
    if config.refine.is_empty() {
        bail!("the config has no [[refine]] jobs (see README \"Refine jobs\")");
    }
    let settings = (&config.commit).into();
    let ctx = RunContext::new(config, lake, &settings, chrono::Utc::now());
    let mut reports = Vec::new();
    for job in refine::in_dependency_order(&config.refine, jobs)? {
        let started = std::time::Instant::now();
        let report = refine::run_job(&ctx, job, max_runs)
            .await
            .with_context(|| format!("refine job `{}`", job.job))?;
        if !json {
            print_report(&report, job.output.as_str(), started.elapsed());
        }
        reports.push(report);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(reports)
}

fn print_report(r: &JobReport, output: &str, took: std::time::Duration) {
    if let Some(t) = &r.waiting_for {
        println!(
            "refine {}: waiting for source `{t}` (not created yet)",
            r.job
        );
        return;
    }
    if r.runs.is_empty() {
        println!("refine {}: nothing new", r.job);
        return;
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
    let [inserted, updated, deleted, older] = r.upserted();
    let result = if inserted + updated + deleted + older > 0 {
        format!(
            "{inserted} inserted, {updated} updated, {deleted} deleted, {older} older rows ignored in {output}"
        )
    } else {
        format!("{} rows joined into {output}", r.joined())
    };
    println!(
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
    );
}

/// `--skip-to TABLE=V` for one job.
pub async fn skip_to(
    config: &PipelineConfig,
    lake: &Lake,
    jobs: &[String],
    spec: &str,
) -> Result<()> {
    let [job] = jobs else {
        bail!(
            "--skip-to needs exactly one job name, e.g. `lakestream refine curated --skip-to raw/order=120`"
        );
    };
    let (table, version) = spec
        .rsplit_once('=')
        .context("--skip-to takes TABLE=VERSION, e.g. raw/order=120 (-1: from the start)")?;
    let version: i64 = version
        .parse()
        .context("--skip-to: VERSION must be an integer >= -1")?;
    if version < -1 {
        bail!("--skip-to: VERSION must be >= -1");
    }
    let cfg = config
        .refine_job(job)
        .with_context(|| format!("no refine job `{job}`"))?;
    let settings = (&config.commit).into();
    let ctx = RunContext::new(config, lake, &settings, chrono::Utc::now());
    let v = refine::skip_to(&ctx, cfg, table, version).await?;
    println!(
        "refine {job}: `{table}` consumed up to version {version} (output version {})",
        v.map_or("-".into(), |v| v.to_string())
    );
    Ok(())
}
