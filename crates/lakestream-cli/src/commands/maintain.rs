//! `lakestream optimize|vacuum|checkpoint|manifest` on one table or, with `--all`, on every
//! table the pipeline writes — the list the scheduled maintenance function uses
//! ([`lakestream_core::maintenance::maintained_tables`]) —, and `lakestream validate` (the
//! config and that list). Each prints a line per table; the first failing table stops the
//! command (the function's handler, `lakestream invoke maintenance`, goes on to the others).

use super::{load_config, open_lake};
use crate::args::{OptimizeArgs, TablesArgs, VacuumArgs};
use anyhow::{Context, Result, bail};
use lakestream_core::maintenance::{
    CompactOptions, Reader, VacuumOptions, checkpoint, compact, maintained_tables_and_skipped,
    manifest, refine_readers, vacuum,
};
use lakestream_core::{Error, Lake, SystemClock};
use lakestream_formats::config::PipelineConfig;
use std::sync::Arc;

/// `lakestream optimize`.
pub async fn run_optimize(args: OptimizeArgs) -> Result<()> {
    let config = load_config(&args.lake)?;
    let l = open_lake(&config, &args.lake)?;
    let opts = CompactOptions {
        target_size: args.target_mib << 20,
        small_file_threshold: (args.target_mib << 20) / 4,
        min_small_files: args.min_files,
        changed_within: args.changed_within_hours.map(chrono::Duration::hours),
        zorder_by: args.zorder,
        dry_run: args.dry_run,
        commit: (&config.commit).into(),
        ..Default::default()
    };
    for table in targets(&config, &l, args.table, args.all).await? {
        optimize_one(&l, &table, &opts, args.all).await?;
    }
    Ok(())
}

/// `lakestream vacuum`: keeps what the refine jobs reading each table still need.
pub async fn run_vacuum(args: VacuumArgs) -> Result<()> {
    let cfg = load_config(&args.lake)?;
    let l = open_lake(&cfg, &args.lake)?;
    let readers = refine_readers(&l, &cfg).await?;
    for table in targets(&cfg, &l, args.table, args.all).await? {
        let opts = VacuumOptions {
            retention: args.retention_hours.map(chrono::Duration::hours),
            force: args.force,
            dry_run: args.dry_run,
            readers: readers
                .get(table.trim_matches('/'))
                .cloned()
                .unwrap_or_default(),
        };
        vacuum_one(&l, &table, &opts, args.all).await?;
    }
    Ok(())
}

/// `lakestream checkpoint`: log cleanup keeps what the refine jobs reading each table need.
pub async fn run_checkpoint(args: TablesArgs) -> Result<()> {
    let cfg = load_config(&args.lake)?;
    let l = open_lake(&cfg, &args.lake)?;
    let readers = refine_readers(&l, &cfg).await?;
    for table in targets(&cfg, &l, args.table, args.all).await? {
        let r = readers
            .get(table.trim_matches('/'))
            .map(Vec::as_slice)
            .unwrap_or_default();
        checkpoint_one(&l, &table, args.dry_run, args.all, r).await?;
    }
    Ok(())
}

/// `lakestream manifest`.
pub async fn run_manifest(args: TablesArgs) -> Result<()> {
    let cfg = load_config(&args.lake)?;
    let l = open_lake(&cfg, &args.lake)?;
    for table in targets(&cfg, &l, args.table, args.all).await? {
        manifest_one(&l, &table, args.dry_run, args.all).await?;
    }
    Ok(())
}

/// The tables a maintenance command runs on: `table`, or with `all` every table the pipeline
/// writes (the maintenance function's list).
pub async fn targets(
    cfg: &PipelineConfig,
    lake: &Lake,
    table: Option<String>,
    all: bool,
) -> Result<Vec<String>> {
    match (table, all) {
        (Some(t), false) => Ok(vec![t]),
        (None, true) => {
            let (tables, skipped) = maintained_tables_and_skipped(cfg, lake)
                .await
                .context("listing the pipeline's tables")?;
            for s in skipped {
                println!("{}: skipped ({})", s.name, s.reason);
            }
            Ok(tables.into_iter().map(|t| t.name).collect())
        }
        _ => bail!("name one table, or pass --all for every table of the pipeline"),
    }
}

/// With `--all`, a table nothing has written yet is reported and skipped, not an error.
pub fn skipped<T>(r: lakestream_core::Result<T>, all: bool) -> Result<Option<T>> {
    match r {
        Err(Error::TableNotFound(t)) if all => {
            println!("{t}: skipped (table does not exist yet)");
            Ok(None)
        }
        // Redacted like the function's errors: a storage error names the object, and its
        // `col=value/` segments are record values.
        Err(e) => Err(anyhow::anyhow!(e.redacted())),
        Ok(v) => Ok(Some(v)),
    }
}

/// One table's compaction, printed as one line.
pub async fn optimize_one(
    lake: &Lake,
    table: &str,
    opts: &CompactOptions,
    all: bool,
) -> Result<()> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("optimize {table}"));
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let started = std::time::Instant::now();
    let r = compact(lake, table, opts, chrono::Utc::now(), &progress).await;
    bar.finish_and_clear();
    let Some(r) = skipped(r, all)? else {
        return Ok(());
    };
    println!(
        "{table}: {}{} -> {} files, {} partitions compacted, {} files rewritten ({:.1} MiB) in {:.2}s{}{}",
        if r.dry_run {
            "(dry run, nothing written) "
        } else {
            ""
        },
        r.files_before,
        r.files_after,
        r.partitions_compacted,
        r.files_removed,
        r.bytes_rewritten as f64 / 1048576.0,
        started.elapsed().as_secs_f64(),
        if r.partitions_conflicted.is_empty() {
            String::new()
        } else {
            format!(
                ", skipped (concurrent change): {:?}",
                r.partitions_conflicted
            )
        },
        if r.bins_deferred > 0 {
            format!(", {} bins left for the next run", r.bins_deferred)
        } else {
            String::new()
        }
    );
    Ok(())
}

/// One table's vacuum: the files, then a summary line.
pub async fn vacuum_one(lake: &Lake, table: &str, opts: &VacuumOptions, all: bool) -> Result<()> {
    let r = vacuum(lake, table, opts, Arc::new(SystemClock)).await;
    let Some(r) = skipped(r, all)? else {
        return Ok(());
    };
    for f in &r.files {
        println!(
            "{} {f}",
            if opts.dry_run {
                "would delete"
            } else {
                "deleted"
            }
        );
    }
    if r.kept_untracked > 0 {
        println!(
            "{table}: kept {} untracked file(s) younger than {} h (a writer may be about to commit them)",
            r.kept_untracked,
            lakestream_core::maintenance::vacuum::UNTRACKED_FLOOR.num_hours()
        );
    }
    if let Some(v) = r.readers.from_version {
        println!(
            "{table}: kept {} removed file(s) that refine jobs ({}) still need (versions from {v})",
            r.kept_for_readers,
            r.readers.jobs.join(", ")
        );
    }
    for j in &r.readers.too_far_behind {
        println!("{table}: not kept for refine job {j}: further behind than the log retention");
    }
    println!(
        "{table}: {} files, {:.1} MiB {}",
        r.files.len(),
        r.bytes as f64 / 1048576.0,
        if opts.dry_run {
            "would be removed (dry run)"
        } else {
            "removed"
        }
    );
    Ok(())
}

/// One table's checkpoint (always written, unlike the schedule's "when due"); log cleanup keeps
/// what `readers` (the refine jobs reading the table) still need.
pub async fn checkpoint_one(
    lake: &Lake,
    table: &str,
    dry_run: bool,
    all: bool,
    readers: &[Reader],
) -> Result<()> {
    if dry_run {
        let Some(s) = skipped(summary(lake, table).await, all)? else {
            return Ok(());
        };
        println!("{table}: would checkpoint version {}", s.version);
        return Ok(());
    }
    let r = checkpoint(lake, table, true, &SystemClock, readers).await;
    let Some(r) = skipped(r, all)? else {
        return Ok(());
    };
    println!(
        "{table}: checkpoint {:?}, {} expired log files removed",
        r.checkpoint_version, r.logs_removed
    );
    if let Some(v) = r.kept_for_readers_from {
        println!("{table}: logs from version {v} kept for refine jobs");
    }
    for j in &r.readers_too_far_behind {
        println!("{table}: not kept for refine job {j}: further behind than the log retention");
    }
    Ok(())
}

/// One table's symlink manifests.
pub async fn manifest_one(lake: &Lake, table: &str, dry_run: bool, all: bool) -> Result<()> {
    if dry_run {
        let Some(s) = skipped(summary(lake, table).await, all)? else {
            return Ok(());
        };
        println!(
            "{table}: would describe version {} ({} live files)",
            s.version, s.files
        );
        return Ok(());
    }
    let Some(r) = skipped(manifest(lake, table).await, all)? else {
        return Ok(());
    };
    println!(
        "{table}: manifests for version {}: {} written, {} removed, {} unchanged",
        r.version, r.written, r.removed, r.unchanged
    );
    Ok(())
}

async fn summary(
    lake: &Lake,
    table: &str,
) -> lakestream_core::Result<lakestream_core::read::TableSummary> {
    lakestream_core::read::summarize(lake, table)
        .await?
        .ok_or_else(|| Error::TableNotFound(table.to_string()))
}

/// `lakestream validate`: the config is valid (loading it checked everything); print every
/// table the pipeline writes, with its kind and the key that names it.
pub fn validate(cfg: &PipelineConfig) {
    println!(
        "config is valid: pipeline `{}`, lake {}",
        cfg.pipeline, cfg.lake.root
    );
    println!("tables the pipeline writes (what maintenance and `--all` run on):");
    for t in cfg.tables() {
        let name = match t.kind {
            lakestream_formats::tables::TableKind::AccessLogDirectory => {
                format!("{}/<bucket>", t.name)
            }
            lakestream_formats::tables::TableKind::CdcDirectory => cdc_tables(cfg, &t.key, &t.name),
            _ => t.name,
        };
        println!("  {name:<32} {:<34} {}", t.kind.describe(), t.key);
    }
    print_cadence(cfg);
}

/// The freshness targets and what follows from them: each topic's MSK batching window (the
/// template's `MskTopicNFreshness` must name the same target), each job's hold.
fn print_cadence(cfg: &PipelineConfig) {
    println!("freshness targets (README \"Freshness targets\"):");
    for t in &cfg.topics {
        println!(
            "  topic {:<25} {:<5} MSK batching window {} s",
            t.topic,
            t.freshness.label(),
            t.freshness.batching_window().as_secs()
        );
    }
    for f in &cfg.cdc {
        let mut targets: Vec<String> = f
            .freshness
            .iter()
            .map(|(t, v)| format!("{t} = {}", v.label()))
            .collect();
        if !f.freshness.contains_key("*") {
            targets.insert(0, "* = 60s".into());
        }
        println!("  cdc {:<27} {}", f.family, targets.join(", "));
    }
    for j in &cfg.refine {
        let hold = cfg.hold_of(j).as_secs();
        let when = if hold == 0 {
            "applies new changes at once".to_string()
        } else {
            format!("holds new changes {hold} s (they coalesce)")
        };
        println!(
            "  job {:<27} {:<5} {when}",
            j.job,
            cfg.freshness_of_job(j).label()
        );
    }
}

/// The tables a CDC family directory (`cdc[i].bronze`, `.silver`, `.scd`) holds, as a pattern
/// (`bronze/crm/<schema>/<table>`, `_lakestream/cdc-crm/<schema>.<table>/tombstones`).
fn cdc_tables(cfg: &PipelineConfig, key: &str, directory: &str) -> String {
    let family = key
        .strip_prefix("cdc[")
        .and_then(|k| k.split(']').next())
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| cfg.cdc.get(i));
    let pattern = |t: String| {
        t.replace("{schema}", "<schema>")
            .replace("{table}", "<table>")
    };
    match family {
        Some(f) if key.ends_with(".bronze") => pattern(f.bronze_template()),
        Some(f) if key.ends_with(".silver") => pattern(f.silver_template()),
        _ => format!("{directory}/<schema>.<table>/tombstones"),
    }
}
