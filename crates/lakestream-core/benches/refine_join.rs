//! Interval-join throughput of the curated job on one day of generated orders and memberships
//! (not a test).
//!
//! `cargo bench -p lakestream-core --bench refine_join -- [TICK_MS] [BATCH] [once|incremental]`
//! (defaults: one event every 5,000 ms over 24 h = 17,280 records, ingested in batches of 240,
//! i.e. one MSK batch every 20 minutes). `once` runs the job over the whole day's backlog;
//! `incremental` runs it after every batch (what the per-minute schedule does). Filesystem lake,
//! current-thread runtime (one core); prints rows/s and the process's peak RSS (VmHWM).

use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::seed::SeedGenerator;
use lakestream_core::{FixedClock, KafkaIngestor, Lake};
use lakestream_formats::config::PipelineConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let tick_ms: i64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(5_000);
    let batch: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(240);
    let incremental = args.get(2).is_some_and(|m| m == "incremental");
    let n = (86_400_000 / tick_ms) as usize;
    let start = chrono::DateTime::from_timestamp(1_764_000_000, 0).unwrap_or_default();
    let records = SeedGenerator::new(3, start, tick_ms).records(n);

    let dir = tempfile::tempdir()?;
    let mut cfg = PipelineConfig::from_toml(include_str!("../../../lakestream.toml"))?;
    cfg.lake.root = dir.path().to_string_lossy().into_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let ing = KafkaIngestor::new(cfg.clone(), Arc::new(FixedClock::new(start)))?;
    let lake = Lake::new(&cfg.lake)?;
    let settings = (&cfg.commit).into();
    let ctx = RunContext::new(&cfg, &lake, &settings, start);
    let job = cfg
        .refine_job("curated")
        .ok_or_else(|| anyhow::anyhow!("no curated job"))?;
    let (mut joined, mut read, mut runs) = (0usize, 0usize, 0usize);
    let mut refine_time = Duration::ZERO;
    let mut refine = |rt: &tokio::runtime::Runtime| -> anyhow::Result<()> {
        let t = Instant::now();
        let r = rt.block_on(run_job(&ctx, job, usize::MAX))?;
        refine_time += t.elapsed();
        joined += r.joined();
        read += r.totals().iter().map(|s| s.rows).sum::<usize>();
        runs += r.runs.len();
        Ok(())
    };
    for chunk in records.chunks(batch) {
        rt.block_on(ing.ingest(chunk))?;
        if incremental {
            refine(&rt)?;
        }
    }
    if !incremental {
        refine(&rt)?;
    }
    let secs = refine_time.as_secs_f64();
    println!(
        "refine curated ({}): {n} source rows over 24 h ({} batches), {runs} runs: read {read} rows, joined {joined} rows in {secs:.2}s = {:.0} source rows/s, {:.0} output rows/s; peak RSS {:.0} MiB",
        if incremental {
            "after every batch"
        } else {
            "once over the day"
        },
        n.div_ceil(batch),
        read as f64 / secs,
        joined as f64 / secs,
        peak_rss_mib()
    );
    Ok(())
}
