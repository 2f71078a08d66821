//! `lakestream`: run the pipeline locally (demo), push one event through a function handler,
//! and look at tables. Uses exactly the handler code the Lambda functions run.

mod crash;
mod demo;
mod inspect;
mod maintain;
mod redrive;
mod refine;
mod report;
#[cfg(feature = "sql")]
mod sql;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use lakestream_core::inspect::AsOf;
use lakestream_core::{KafkaIngestor, Lake, SystemClock, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::kafka::KafkaEvent;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The example pipeline, used when no config is given and `./lakestream.toml` does not exist.
pub const EXAMPLE_CONFIG: &str = include_str!("../../../lakestream.toml");

#[derive(Parser)]
#[command(
    name = "lakestream",
    version,
    about = "Event-driven Delta Lake ingestion, locally"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct LakeArgs {
    /// Pipeline config (TOML). Default: ./lakestream.toml, else the built-in example.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Lake root directory (overrides `lake.root`).
    #[arg(long, global = true)]
    lake: Option<String>,
    /// Test only: abort at a step of the commit path (`after-data-put`, `after-log-put`,
    /// `after-commit`, optionally `:N` for the N-th time). See `crash.rs`.
    #[arg(long, global = true, hide = true)]
    crash_at: Option<crash::CrashAt>,
}

#[derive(Subcommand)]
enum Command {
    /// Generate the seed pipeline's data, pack it into MSK events and ingest it into a local lake.
    Demo {
        #[command(flatten)]
        lake: LakeArgs,
        /// Records to generate.
        #[arg(long, default_value_t = 2000)]
        records: usize,
    },
    /// Run one event file through a function handler.
    Invoke {
        #[command(subcommand)]
        function: InvokeCommand,
    },
    /// S3 server access log tools.
    AccessLogs {
        #[command(subcommand)]
        command: AccessLogsCommand,
    },
    /// Check the config and list every table the pipeline writes (what maintenance runs on).
    Validate {
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Compact small files (bin-packing, dataChange=false).
    Optimize {
        /// Table, e.g. raw/order.
        table: Option<String>,
        /// Every table the pipeline writes (the maintenance function's list).
        #[arg(long, conflicts_with = "table")]
        all: bool,
        /// Show the plan, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Target file size in MiB.
        #[arg(long, default_value_t = 128)]
        target_mib: u64,
        /// Minimum small files in a partition before it is compacted.
        #[arg(long, default_value_t = 4)]
        min_files: usize,
        /// Only partitions changed within this many hours.
        #[arg(long)]
        changed_within_hours: Option<i64>,
        /// Z-order rows by these columns (comma separated).
        #[arg(long, value_delimiter = ',')]
        zorder: Vec<String>,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Delete files no version inside the retention window references (and old orphans).
    Vacuum {
        /// Table.
        table: Option<String>,
        /// Every table the pipeline writes (the maintenance function's list).
        #[arg(long, conflicts_with = "table")]
        all: bool,
        /// List what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Retention in hours (default: the table's, 168 h).
        #[arg(long)]
        retention_hours: Option<i64>,
        /// Allow a window shorter than the table's (untracked files younger than 1 h, which a
        /// writer may be about to commit, are kept whatever the window).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Write a checkpoint now and clean expired log files.
    Checkpoint {
        /// Table.
        table: Option<String>,
        /// Every table the pipeline writes (the maintenance function's list).
        #[arg(long, conflicts_with = "table")]
        all: bool,
        /// Report only.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Generate the symlink manifests (incremental) for Athena/Presto/Hive.
    Manifest {
        /// Table.
        table: Option<String>,
        /// Every table the pipeline writes (the maintenance function's list).
        #[arg(long, conflicts_with = "table")]
        all: bool,
        /// Report only.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Run refine jobs (all, or those named) in dependency order until nothing is new.
    Refine {
        /// Jobs to run (default: every `[[refine]]` job of the config).
        jobs: Vec<String>,
        /// Record TABLE's version V as consumed by the (one) named job, writing no rows
        /// (`-1`: read it from the start). For versions that are gone or a re-created source.
        #[arg(long, value_name = "TABLE=V")]
        skip_to: Option<String>,
        /// Stop each job after this many committed runs.
        #[arg(long, default_value_t = 10_000)]
        max_runs: usize,
        /// Print the reports as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Put Kafka batches Lambda gave up on (the failed-batches bucket's on-failure records)
    /// back into the lake, exactly once; safe to run again.
    Redrive {
        /// On-failure record files, directories of them, or s3://bucket/prefix.
        #[arg(required = true)]
        sources: Vec<String>,
        /// Also write records of tables without kafka_partition/kafka_offset columns, which
        /// cannot be checked against the table (a record that had landed is written twice).
        #[arg(long)]
        allow_duplicates: bool,
        /// Print the reports as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// List the tables of the lake.
    Tables {
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Print a table's summary and rows (as of an older version or time with --version/--as-of).
    Show {
        /// Table name, e.g. raw/order.
        table: String,
        /// Rows to print.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Read the table as of this version.
        #[arg(long, conflicts_with = "as_of")]
        version: Option<u64>,
        /// Read the table as of this time: the latest version committed at or before it
        /// (RFC 3339, e.g. 2026-11-30T21:00:00Z, or a date = midnight UTC).
        #[arg(long)]
        as_of: Option<String>,
        /// Print the rows as JSON lines (with --version/--as-of).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// The rows versions FROM..=TO inserted or deleted (net of rewrites), with
    /// `_change_type` and `_commit_version`; compactions change nothing.
    Changes {
        /// Table name.
        table: String,
        /// First version.
        #[arg(long)]
        from: u64,
        /// Last version (default: the latest).
        #[arg(long)]
        to: Option<u64>,
        /// Rows to print (table output).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print every row as JSON lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Print the Athena CREATE EXTERNAL TABLE for a table (native Delta, or --manifest).
    Ddl {
        /// Table name.
        table: String,
        /// The Hive form over the symlink manifests, with exact columns and partitions.
        #[arg(long)]
        manifest: bool,
        /// Athena table name (default: the path with every other character as `_`, refused when
        /// another table of the pipeline maps to the same name).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// How far behind each job is: Kafka offsets committed per partition, refine sources
    /// consumed vs latest, access-log objects in the last 24 h and the newest log time.
    Lag {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// SQL over the lake's tables with DataFusion (tables named by path: raw/order -> raw_order).
    /// Needs the `sql` feature: `cargo run --features sql --bin lakestream -- sql ...`.
    Sql {
        /// The query.
        query: String,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: SqlFormat,
        /// Also register TABLE at version V, as <name>_v<V> (e.g. raw/order=3 -> raw_order_v3).
        #[arg(long, value_name = "TABLE=V")]
        at: Vec<String>,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// Reports over the lake.
    Report {
        #[command(subcommand)]
        report: ReportCommand,
    },
    /// A table's commits, newest first: operation, rows/files/bytes added and removed, txns.
    History {
        /// Table name.
        table: String,
        /// Newest N commits only.
        #[arg(long)]
        limit: Option<usize>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
}

/// Output of `lakestream sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SqlFormat {
    /// A text table.
    Table,
    /// CSV with a header.
    Csv,
    /// JSON lines.
    Json,
}

#[derive(Subcommand)]
enum ReportCommand {
    /// Which datasets are read most, how old the data read is, what nobody read lately
    /// (over the access-log tables).
    Access {
        /// Window in days: only its requests are read (files pruned by date and time
        /// statistics) and counted; datasets with requests but no read in it are cold candidates.
        #[arg(long, default_value_t = 30)]
        since: i64,
        /// Key segments that name a dataset (`sales/2026/...` at 1: `sales`).
        #[arg(long, default_value_t = 1)]
        depth: usize,
        /// Also write a self-contained HTML page (inline SVG charts, nothing fetched).
        #[arg(long)]
        html: Option<PathBuf>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lake: LakeArgs,
    },
}

#[derive(Subcommand)]
enum AccessLogsCommand {
    /// Parse a log file (plain or gzip): one JSON object per line, the record or its error.
    Parse {
        /// Access log file.
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum InvokeCommand {
    /// The msk-ingest handler with an MSK event (e.g. events/msk-orders.json).
    Msk {
        /// Event JSON file.
        #[arg(long)]
        event: PathBuf,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// The s3-log-ingest handler with an SQS event (e.g. events/sqs-s3-notifications.json).
    S3Logs {
        /// SQS event JSON file.
        #[arg(long)]
        event: PathBuf,
        /// A directory standing in for buckets (`DIR/<bucket>/<key>`; absolute keys and `..` are
        /// refused); default: read from S3 (AWS_ENDPOINT_URL and the usual AWS variables apply).
        /// Either way only `access_logs.source_buckets` (or LAKESTREAM_LOG_BUCKETS) are read.
        #[arg(long)]
        objects: Option<PathBuf>,
        #[command(flatten)]
        lake: LakeArgs,
    },
    /// The maintenance handler with a schedule input (e.g. events/maintenance-optimize.json).
    Maintenance {
        /// Schedule input JSON file.
        #[arg(long)]
        event: PathBuf,
        #[command(flatten)]
        lake: LakeArgs,
    },
}

fn load_config(args: &LakeArgs) -> Result<PipelineConfig> {
    let mut cfg = match &args.config {
        Some(p) => PipelineConfig::load(&p.to_string_lossy())?,
        None if Path::new("lakestream.toml").exists() => PipelineConfig::load("lakestream.toml")?,
        None => PipelineConfig::from_toml(EXAMPLE_CONFIG)?,
    };
    if let Some(root) = &args.lake {
        cfg.lake.root = root.clone();
    }
    Ok(cfg)
}

/// The lake of `cfg`, with the crash point installed when one is asked for.
fn open_lake(cfg: &PipelineConfig, args: &LakeArgs) -> Result<Lake> {
    let lake = Lake::new(&cfg.lake)?;
    Ok(match &args.crash_at {
        Some(c) => c.install(lake),
        None => lake,
    })
}

/// Abort here when `--crash-at after-commit` asks for it.
fn after_commit(args: &LakeArgs) {
    if let Some(c) = &args.crash_at {
        c.reached(crash::Step::Committed);
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    // delta-rs warns on every version race our commit path resolves itself: not for users.
    let log = std::env::var("RUST_LOG")
        .unwrap_or_else(|_| "warn,deltalake_core::kernel::transaction=error".into());
    lakestream_lambda::telemetry::init_tracing(&log, false);
    match Cli::parse().command {
        Command::Demo { lake, records } => demo::run(load_config(&lake)?, records).await,
        Command::Invoke {
            function: InvokeCommand::Msk { event, lake },
        } => {
            let cfg = load_config(&lake)?;
            let bytes =
                std::fs::read(&event).with_context(|| format!("reading {}", event.display()))?;
            let ev = KafkaEvent::from_json(&bytes)
                .with_context(|| format!("{} is not an MSK event", event.display()))?;
            let ingestor = KafkaIngestor::with_lake(
                cfg.clone(),
                open_lake(&cfg, &lake)?,
                Arc::new(SystemClock),
            );
            let out = msk_ingest::handle(&ingestor, ev).await?;
            after_commit(&lake);
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(())
        }
        Command::Redrive {
            sources,
            allow_duplicates,
            json,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            let ingestor = KafkaIngestor::with_lake(
                cfg.clone(),
                open_lake(&cfg, &lake)?,
                Arc::new(SystemClock),
            );
            redrive::run(&ingestor, &sources, allow_duplicates, json).await?;
            Ok(())
        }
        Command::Invoke {
            function:
                InvokeCommand::S3Logs {
                    event,
                    objects,
                    lake,
                },
        } => {
            let mut cfg = load_config(&lake)?;
            // The function's setting: only these buckets are read (the template sets it).
            let env = lakestream_formats::config::LOG_BUCKETS_ENV;
            if let Some(list) = std::env::var(env).ok().filter(|v| !v.is_empty()) {
                cfg.access_logs.set_source_buckets(&list)?;
            }
            let bytes =
                std::fs::read(&event).with_context(|| format!("reading {}", event.display()))?;
            let ev: aws_lambda_events::sqs::SqsEvent = serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not an SQS event", event.display()))?;
            let ingestor = lakestream_core::access_log::AccessLogIngestor::with_lake(
                cfg.clone(),
                open_lake(&cfg, &lake)?,
                Arc::new(SystemClock),
            );
            let (response, report) = match objects {
                Some(dir) => {
                    let src = lakestream_core::access_log::LocalObjects(dir);
                    s3_log_ingest::handle_sqs(&ingestor, &src, ev).await
                }
                None => {
                    let aws =
                        aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
                    let conf = aws_sdk_s3::config::Builder::from(&aws)
                        .force_path_style(true)
                        .build();
                    let src =
                        s3_log_ingest::s3::S3Objects::new(aws_sdk_s3::Client::from_conf(conf));
                    s3_log_ingest::handle_sqs(&ingestor, &src, ev).await
                }
            };
            after_commit(&lake);
            let out = serde_json::json!({"response": response, "report": report});
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(())
        }
        Command::AccessLogs {
            command: AccessLogsCommand::Parse { file },
        } => access_logs_parse(&file),
        Command::Validate { lake } => {
            maintain::validate(&load_config(&lake)?);
            Ok(())
        }
        Command::Invoke {
            function: InvokeCommand::Maintenance { event, lake },
        } => {
            let cfg = load_config(&lake)?;
            let l = open_lake(&cfg, &lake)?;
            maintain::invoke(&cfg, &l, &event).await
        }
        Command::Optimize {
            table,
            all,
            dry_run,
            target_mib,
            min_files,
            changed_within_hours,
            zorder,
            lake,
        } => {
            let config = load_config(&lake)?;
            let l = open_lake(&config, &lake)?;
            let opts = lakestream_core::maintenance::CompactOptions {
                target_size: target_mib << 20,
                small_file_threshold: (target_mib << 20) / 4,
                min_small_files: min_files,
                changed_within: changed_within_hours.map(chrono::Duration::hours),
                zorder_by: zorder,
                dry_run,
                commit: (&config.commit).into(),
                ..Default::default()
            };
            for table in maintain::targets(&config, &l, table, all).await? {
                maintain::optimize_one(&l, &table, &opts, all).await?;
            }
            Ok(())
        }
        Command::Vacuum {
            table,
            all,
            dry_run,
            retention_hours,
            force,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            let l = open_lake(&cfg, &lake)?;
            let readers = lakestream_core::maintenance::refine_readers(&l, &cfg).await?;
            for table in maintain::targets(&cfg, &l, table, all).await? {
                let opts = lakestream_core::maintenance::VacuumOptions {
                    retention: retention_hours.map(chrono::Duration::hours),
                    force,
                    dry_run,
                    readers: readers
                        .get(table.trim_matches('/'))
                        .cloned()
                        .unwrap_or_default(),
                };
                maintain::vacuum_one(&l, &table, &opts, all).await?;
            }
            Ok(())
        }
        Command::Checkpoint {
            table,
            all,
            dry_run,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            let l = open_lake(&cfg, &lake)?;
            let readers = lakestream_core::maintenance::refine_readers(&l, &cfg).await?;
            for table in maintain::targets(&cfg, &l, table, all).await? {
                let r = readers
                    .get(table.trim_matches('/'))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                maintain::checkpoint_one(&l, &table, dry_run, all, r).await?;
            }
            Ok(())
        }
        Command::Manifest {
            table,
            all,
            dry_run,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            let l = open_lake(&cfg, &lake)?;
            for table in maintain::targets(&cfg, &l, table, all).await? {
                maintain::manifest_one(&l, &table, dry_run, all).await?;
            }
            Ok(())
        }
        Command::Refine {
            jobs,
            skip_to,
            max_runs,
            json,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            let l = open_lake(&cfg, &lake)?;
            match skip_to {
                Some(spec) => refine::skip_to(&cfg, &l, &jobs, &spec).await,
                None => refine::run(&cfg, &l, &jobs, max_runs, json)
                    .await
                    .map(|_| ()),
            }?;
            after_commit(&lake);
            Ok(())
        }
        Command::Tables { lake } => {
            let cfg = load_config(&lake)?;
            let l = Lake::new(&cfg.lake)?;
            for name in table_names(&cfg, &l).await? {
                if let Some(s) = read::summarize(&l, &name).await? {
                    println!(
                        "{:<24} version {:>4}  files {:>5}  rows {:>8}  bytes {:>10}  partitioned by [{}]",
                        s.table,
                        s.version,
                        s.files,
                        s.rows,
                        s.bytes,
                        s.partition_columns.join(", ")
                    );
                }
            }
            Ok(())
        }
        Command::Show {
            table,
            limit,
            version,
            as_of,
            json,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            let l = Lake::new(&cfg.lake)?;
            let as_of = match (version, as_of) {
                (Some(v), _) => AsOf::Version(v),
                (None, Some(t)) => AsOf::Time(inspect::parse_time(&t)?),
                (None, None) if json => AsOf::Latest,
                (None, None) => return show(&l, &table, limit).await,
            };
            inspect::show_as_of(&l, &table, as_of, limit, json).await
        }
        Command::Changes {
            table,
            from,
            to,
            limit,
            json,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            inspect::changes(&Lake::new(&cfg.lake)?, &table, from, to, limit, json).await
        }
        Command::Ddl {
            table,
            manifest,
            name,
            lake,
        } => {
            use lakestream_core::inspect::ddl;
            let cfg = load_config(&lake)?;
            let form = if manifest {
                ddl::DdlForm::Manifest
            } else {
                ddl::DdlForm::Native
            };
            let l = Lake::new(&cfg.lake)?;
            let name = match name {
                Some(n) => ddl::valid_athena_name(&n)?,
                None => ddl::unique_athena_name(&ddl::pipeline_tables(&l, &cfg).await?, &table)?,
            };
            print!("{}", ddl::ddl_named(&l, &table, &name, form).await?);
            Ok(())
        }
        Command::Lag { json, lake } => {
            let cfg = load_config(&lake)?;
            inspect::lag(&cfg, json).await
        }
        Command::Sql {
            query,
            format,
            at,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            run_sql(&cfg, &query, format, &at).await
        }
        Command::Report {
            report:
                ReportCommand::Access {
                    since,
                    depth,
                    html,
                    json,
                    lake,
                },
        } => {
            let cfg = load_config(&lake)?;
            let opts = lakestream_core::access_log::report::ReportOptions {
                since_days: since,
                depth,
                now: chrono::Utc::now(),
            };
            report::access(&cfg, opts, html.as_deref(), json).await
        }
        Command::History {
            table,
            limit,
            json,
            lake,
        } => {
            let cfg = load_config(&lake)?;
            inspect::history(&Lake::new(&cfg.lake)?, &table, limit, json).await
        }
    }
}

/// `lakestream access-logs parse FILE`: one JSON object per input line; exit 0 even when
/// some lines fail.
fn access_logs_parse(file: &Path) -> Result<()> {
    use lakestream_formats::access_log::{FIELDS, parse_line};
    use std::io::{BufRead, Write};
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let reader: Box<dyn BufRead> = if bytes.starts_with(&[0x1f, 0x8b]) {
        Box::new(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(
            &bytes[..],
        )))
    } else {
        Box::new(&bytes[..])
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (i, line) in reader.split(b'\n').enumerate() {
        let n = i + 1;
        let line = line?;
        let value = match std::str::from_utf8(&line) {
            Err(_) => serde_json::json!({"line": n, "error": "line is not valid UTF-8"}),
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => match parse_line(text) {
                Ok(rec) => {
                    let mut m = serde_json::Map::new();
                    for (k, name) in FIELDS.iter().enumerate() {
                        let v = match (k, rec.field(k)) {
                            (9 | 11..=14, Some(_)) => match k {
                                9 => serde_json::json!(rec.http_status),
                                _ => serde_json::json!(rec.numbers[k - 11]),
                            },
                            (_, Some(s)) => serde_json::Value::String(s.into_owned()),
                            (_, None) => serde_json::Value::Null,
                        };
                        m.insert((*name).to_string(), v);
                    }
                    m.insert("extra_fields".into(), serde_json::json!(rec.extra));
                    serde_json::Value::Object(m)
                }
                Err(e) => serde_json::json!({"line": n, "error": e.0}),
            },
        };
        writeln!(out, "{value}")?;
    }
    Ok(())
}

/// Summary of a table that must exist.
async fn existing(lake: &Lake, table: &str) -> Result<read::TableSummary> {
    read::summarize(lake, table)
        .await?
        .with_context(|| format!("no table `{table}` under {}", lake.root()))
}

/// Tables of a lake: every table the pipeline writes (the maintenance function's list), plus,
/// on a filesystem lake, any other Delta table found on disk.
async fn table_names(cfg: &PipelineConfig, lake: &Lake) -> Result<Vec<String>> {
    let mut names: Vec<String> = lakestream_core::maintenance::maintained_tables(cfg, lake)
        .await?
        .into_iter()
        .map(|t| t.name)
        .collect();
    if let Ok(root) = lake.root().to_file_path() {
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            if dir.join("_delta_log").is_dir() {
                if let Ok(rel) = dir.strip_prefix(&root) {
                    names.push(rel.to_string_lossy().replace('\\', "/"));
                }
                continue;
            }
            if let Ok(entries) = std::fs::read_dir(&dir) {
                stack.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// `lakestream sql` (DataFusion; only with the `sql` feature).
#[cfg(feature = "sql")]
async fn run_sql(
    cfg: &PipelineConfig,
    query: &str,
    format: SqlFormat,
    at: &[String],
) -> Result<()> {
    let at = at
        .iter()
        .map(|a| sql::parse_at(a))
        .collect::<Result<Vec<_>>>()?;
    let format = match format {
        SqlFormat::Table => sql::Format::Table,
        SqlFormat::Csv => sql::Format::Csv,
        SqlFormat::Json => sql::Format::Json,
    };
    sql::run(&Lake::new(&cfg.lake)?, cfg, query, &at, format).await
}

/// `lakestream sql` without the `sql` feature: say how to get it.
#[cfg(not(feature = "sql"))]
async fn run_sql(_: &PipelineConfig, _: &str, _: SqlFormat, _: &[String]) -> Result<()> {
    anyhow::bail!(
        "this lakestream was built without SQL (DataFusion adds minutes to a build): \
         `cargo run --features sql --bin lakestream -- sql ...`, or `cargo install --path \
         crates/lakestream-cli --features sql`"
    )
}

/// Print a summary and the first rows of a table.
pub async fn show(lake: &Lake, table: &str, limit: usize) -> Result<()> {
    let s = existing(lake, table).await?;
    println!(
        "{table}: version {}, {} files, {} rows, {} bytes, partitioned by [{}]",
        s.version,
        s.files,
        s.rows,
        s.bytes,
        s.partition_columns.join(", ")
    );
    let batch = read::read_table(lake, table, None).await?;
    let head = batch.slice(0, limit.min(batch.num_rows()));
    println!("{}", arrow::util::pretty::pretty_format_batches(&[head])?);
    Ok(())
}
