//! `lakestream refine`: run the config's refine jobs through the refine function's own code
//! (`refine::run`: dependency order, a failed job skips only the jobs reading its output), print
//! what each did, and fail when a job failed; `--skip-to TABLE=V` records a source version as
//! consumed; `--rebuild` empties a job's output and runs it from the start; `--void-truncate
//! SEQ` does so without one truncate. Jobs are named as
//! `refine` and `lag` print them: configured jobs and every CDC family table's
//! `cdc-<family>/<schema>.<table>`.

use super::{after_commit, load_config, open_lake};
use crate::args::RefineArgs;
use ::refine::report::summary_line;
use ::refine::{Refiner, Request};
use anyhow::{Context, Result, bail};
use lakestream_core::refine::RunContext;
use lakestream_core::{Lake, SystemClock};
use lakestream_formats::config::PipelineConfig;
use std::sync::Arc;

/// `lakestream refine`.
pub async fn run_command(args: RefineArgs) -> Result<()> {
    let cfg = load_config(&args.lake)?;
    let l = open_lake(&cfg, &args.lake)?;
    match args.skip_to {
        Some(spec) => skip_to(&cfg, &l, &args.jobs, &spec).await,
        None if args.void_truncate.is_some() => {
            let seq = args.void_truncate.as_deref().unwrap_or_default();
            void_truncate(&cfg, &l, &args.jobs, seq).await?;
            run(cfg, l, &args.jobs, args.max_runs, args.json).await
        }
        None if args.rebuild => {
            rebuild(&cfg, &l, &args.jobs).await?;
            run(cfg, l, &args.jobs, args.max_runs, args.json).await
        }
        None => run(cfg, l, &args.jobs, args.max_runs, args.json).await,
    }?;
    after_commit(&args.lake);
    Ok(())
}

/// Run `jobs` (all when empty) as the refine function does; print one summary line per job
/// that ran (or, with `json`, their reports as a JSON list), then fail naming every failed or
/// skipped job.
pub async fn run(
    config: PipelineConfig,
    lake: Lake,
    jobs: &[String],
    max_runs: usize,
    json: bool,
) -> Result<()> {
    if config.refine.is_empty() && config.cdc.is_empty() {
        bail!(
            "the config has no [[refine]] jobs and no [[cdc]] families (see README \"Refine jobs\")"
        );
    }
    let mut refiner = Refiner::with_lake(config, lake, Arc::new(SystemClock));
    // A one-off run goes to the end: nothing would bring a held job back.
    refiner.settings.holds = false;
    let request = Request {
        jobs: jobs.to_vec(),
        max_runs,
    };
    let response = ::refine::run(&refiner, &request).await?;
    let ran: Vec<_> = response
        .jobs
        .iter()
        .filter_map(|j| Some((j, j.outcome().ok()?)))
        .collect();
    if json {
        let reports: Vec<_> = ran.iter().map(|(_, report)| report).collect();
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        for (job, report) in &ran {
            println!("{}", summary_line(report, &job.output, job.took));
        }
    }
    let failed: Vec<String> = response
        .jobs
        .iter()
        .filter_map(|j| {
            let e = j.outcome().err()?;
            Some(format!("refine job `{}`: {e}", j.job))
        })
        .collect();
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
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
    let cfg = find_job(config, lake, job).await?;
    let settings = (&config.commit).into();
    let ctx = RunContext::new(config, lake, &settings, chrono::Utc::now());
    let v = lakestream_core::refine::skip_to(&ctx, &cfg, table, version).await?;
    println!(
        "refine {job}: `{table}` consumed up to version {version} (output version {})",
        v.map_or("-".into(), |v| v.to_string())
    );
    Ok(())
}

/// `--rebuild` for one job: its output emptied and its sources marked unread in one commit (the
/// run that follows builds it again).
pub async fn rebuild(config: &PipelineConfig, lake: &Lake, jobs: &[String]) -> Result<()> {
    let [job] = jobs else {
        bail!(
            "--rebuild needs exactly one job name, e.g. `lakestream refine cdc-crm/public.orders --rebuild`"
        );
    };
    let cfg = find_job(config, lake, job).await?;
    let settings = (&config.commit).into();
    let ctx = RunContext::new(config, lake, &settings, chrono::Utc::now());
    match lakestream_core::refine::rebuild(&ctx, &cfg).await? {
        Some(v) => println!(
            "refine {job}: output `{}` emptied at version {v}, its sources marked unread; rebuilding",
            cfg.output
        ),
        None => println!("refine {job}: no output yet; building it"),
    }
    Ok(())
}

/// `--void-truncate SEQ` for one CDC apply job: the truncate voided and the output emptied in
/// one commit (the run that follows rebuilds it without the truncate).
pub async fn void_truncate(
    config: &PipelineConfig,
    lake: &Lake,
    jobs: &[String],
    seq: &str,
) -> Result<()> {
    let [job] = jobs else {
        bail!(
            "--void-truncate needs exactly one job name, e.g. `lakestream refine \
             cdc-crm/public.orders --void-truncate <SEQ>`"
        );
    };
    let cfg = find_job(config, lake, job).await?;
    let settings = (&config.commit).into();
    let ctx = RunContext::new(config, lake, &settings, chrono::Utc::now());
    let v = lakestream_core::refine::void_truncate(&ctx, &cfg, seq).await?;
    println!(
        "refine {job}: the truncate at `{seq}` voided and output `{}` emptied at version {v}; \
         rebuilding",
        cfg.output
    );
    Ok(())
}

/// A configured job or a CDC family table's apply job, by the name `refine` and `lag` print.
async fn find_job(
    config: &PipelineConfig,
    lake: &Lake,
    job: &str,
) -> Result<lakestream_formats::refine::RefineJob> {
    let jobs = lakestream_core::refine::cdc::family::all_jobs(lake, config).await?;
    let known: Vec<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
    jobs.iter()
        .find(|j| j.job == job)
        .cloned()
        .with_context(|| format!("no refine job `{job}` (known: {})", known.join(", ")))
}
