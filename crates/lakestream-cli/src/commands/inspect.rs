//! `lakestream history`, `show`, `changes` and `lag`: a table's commits, its rows (now, or as
//! of an older version or time), what commits inserted or deleted, how far behind each job is
//! (library side: `lakestream_core::inspect`).

use super::load_config;
use crate::args::{ChangesArgs, HistoryArgs, LakeArgs, ShowArgs};
use anyhow::{Context, Result};
use lakestream_core::inspect::{self, AsOf, HistoryEntry};
use lakestream_core::{Lake, read};

/// `lakestream show`: the latest rows with the table's summary, or the rows as of a version or
/// time (`--json`: JSON lines).
pub async fn show_command(args: ShowArgs) -> Result<()> {
    let cfg = load_config(&args.lake)?;
    let l = Lake::new(&cfg.lake)?;
    let as_of = match (args.version, args.as_of) {
        (Some(v), _) => AsOf::Version(v),
        (None, Some(t)) => AsOf::Time(parse_time(&t)?),
        (None, None) if args.json => AsOf::Latest,
        (None, None) => return show(&l, &args.table, args.limit).await,
    };
    show_as_of(&l, &args.table, as_of, args.limit, args.json).await
}

/// `lakestream changes`.
pub async fn changes_command(args: ChangesArgs) -> Result<()> {
    let cfg = load_config(&args.lake)?;
    let lake = Lake::new(&cfg.lake)?;
    changes(
        &lake,
        &args.table,
        args.from,
        args.to,
        args.limit,
        args.json,
    )
    .await
}

/// `lakestream history`.
pub async fn history_command(args: HistoryArgs) -> Result<()> {
    let cfg = load_config(&args.lake)?;
    history(&Lake::new(&cfg.lake)?, &args.table, args.limit, args.json).await
}

/// `lakestream lag`.
pub async fn lag_command(lake: &LakeArgs, json: bool) -> Result<()> {
    lag(&load_config(lake)?, json).await
}

/// Print a summary and the first rows of a table.
pub async fn show(lake: &Lake, table: &str, limit: usize) -> Result<()> {
    let s = read::summarize(lake, table)
        .await?
        .with_context(|| format!("no table `{table}` under {}", lake.root()))?;
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

/// Parse `--as-of`: RFC 3339 (`2026-11-30T21:00:00Z`), or a date (`2026-11-30`, midnight UTC).
pub fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    let day = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").with_context(|| {
        format!(
            "--as-of `{text}`: give an RFC 3339 time (2026-11-30T21:00:00Z) or a date (2026-11-30)"
        )
    })?;
    Ok(day.and_time(chrono::NaiveTime::MIN).and_utc())
}

/// Print the newest `limit` commits of `table`.
pub async fn history(lake: &Lake, table: &str, limit: Option<usize>, json: bool) -> Result<()> {
    let h = inspect::history(lake, table, limit).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&h)?);
        return Ok(());
    }
    println!(
        "{table}: latest version {}, log holds {}..={}",
        h.latest, h.oldest_in_log, h.latest
    );
    for e in &h.entries {
        println!("{}", line(e));
    }
    Ok(())
}

/// One history line: version, time, operation, what changed, offsets, commit id.
fn line(e: &HistoryEntry) -> String {
    let time = e.timestamp.map_or("-".into(), |t| {
        t.format("%Y-%m-%d %H:%M:%S%.3fZ").to_string()
    });
    let mut out = format!(
        "v{:<6} {time}  {:<14}",
        e.version,
        e.operation.as_deref().unwrap_or("-")
    );
    if e.files_added > 0 {
        out += &format!(
            " +{} files/{} rows/{} B",
            e.files_added, e.rows_added, e.bytes_added
        );
    }
    if e.files_removed > 0 {
        let rows = e.rows_removed.map_or("?".into(), |r| r.to_string());
        out += &format!(
            " -{} files/{rows} rows/{} B",
            e.files_removed, e.bytes_removed
        );
    }
    if (e.files_added > 0 || e.files_removed > 0) && !e.data_change {
        out += " (dataChange=false)";
    }
    if e.metadata {
        out += " [metadata]";
    }
    if !e.parameters.is_empty() {
        // The create's schema and the like are long: `history --json` has them whole.
        let short: serde_json::Map<String, serde_json::Value> = e
            .parameters
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) if s.len() > 80 => {
                    (k.clone(), format!("<{} chars>", s.len()).into())
                }
                _ => (k.clone(), v.clone()),
            })
            .collect();
        out += &format!(" {}", serde_json::Value::Object(short));
    }
    for (app, v) in &e.txns {
        out += &format!(" txn {app}={v}");
    }
    if let Some(id) = &e.commit_id {
        out += &format!(" commit {id}");
    }
    out
}

/// Print the first `limit` rows of `table` as of `as_of` (JSON lines with `json`).
pub async fn show_as_of(
    lake: &Lake,
    table: &str,
    as_of: AsOf,
    limit: usize,
    json: bool,
) -> Result<()> {
    let (version, batch) = inspect::read_as_of(lake, table, as_of).await?;
    let head = batch.slice(0, limit.min(batch.num_rows()));
    if json {
        let mut w = arrow_json::LineDelimitedWriter::new(std::io::stdout().lock());
        w.write(&head)?;
        w.finish()?;
        return Ok(());
    }
    println!("{table} as of version {version}: {} rows", batch.num_rows());
    println!("{}", arrow::util::pretty::pretty_format_batches(&[head])?);
    Ok(())
}

/// Print the rows versions `from..=to` inserted or deleted (all of them as JSON lines with `json`).
pub async fn changes(
    lake: &Lake,
    table: &str,
    from: u64,
    to: Option<u64>,
    limit: usize,
    json: bool,
) -> Result<()> {
    let c = inspect::changes(lake, table, from, to).await?;
    if json {
        let mut w = arrow_json::LineDelimitedWriter::new(std::io::stdout().lock());
        w.write(&c.rows)?;
        w.finish()?;
        return Ok(());
    }
    println!(
        "{table}: {} changed rows in versions {}..={}",
        c.rows.num_rows(),
        c.from,
        c.to
    );
    let head = c.rows.slice(0, limit.min(c.rows.num_rows()));
    println!("{}", arrow::util::pretty::pretty_format_batches(&[head])?);
    Ok(())
}

/// Print how far behind each job of `config` is.
pub async fn lag(config: &lakestream_formats::config::PipelineConfig, json: bool) -> Result<()> {
    let lake = Lake::new(&config.lake)?;
    let lag = inspect::lag(&lake, config, chrono::Utc::now()).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&lag)?);
        return Ok(());
    }
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or("-".to_string(), |t| {
            t.format("%Y-%m-%d %H:%M:%SZ").to_string()
        })
    };
    println!("kafka (offsets committed in the tables; compare with the topics' end offsets):");
    for k in &lag.kafka {
        let parts: Vec<String> = k
            .partitions
            .iter()
            .map(|(p, o)| format!("{p}={o}"))
            .collect();
        match k.latest {
            Some((v, at)) => println!(
                "  {} -> {} (v{v}, {}): {}",
                k.topic,
                k.table,
                time(at),
                parts.join(" ")
            ),
            None => println!("  {} -> {}: no table yet", k.topic, k.table),
        }
    }
    println!("refine (source versions consumed / latest):");
    for r in &lag.refine {
        let consumed = r.consumed.map_or("-".into(), |c| c.to_string());
        let latest = r.latest.map_or("-".into(), |c| c.to_string());
        let keep = match (r.unread_since, r.must_read_by) {
            _ if r.too_far_behind => format!(
                "; TOO FAR BEHIND: versions it needs are no longer kept, skip ahead with \
                 `lakestream refine {} --skip-to {}=V` and rebuild the output",
                r.job, r.source
            ),
            (Some(since), Some(by)) => format!(
                "; unread since {}, kept until {} (max lag {} h), then it must re-read",
                time(Some(since)),
                time(Some(by)),
                r.max_lag_hours.unwrap_or_default()
            ),
            _ => String::new(),
        };
        let keys = match &r.keys {
            Some((k, Some(from))) if from == "config" => format!("; keys [{k}] declared"),
            Some((k, from)) => format!(
                "; keys [{k}] from the records ({}): declare them in `cdc.<family>.keys` to fix \
                 them by config",
                from.as_deref().unwrap_or("source unrecorded")
            ),
            None => String::new(),
        };
        println!(
            "  {} -> {}: {} {consumed}/{latest} ({} behind{keep}{keys})",
            r.job, r.output, r.source, r.behind
        );
    }
    println!("access logs (log objects committed in the last 24 h, newest request time):");
    for a in &lag.access_logs {
        println!(
            "  {}: {} objects, newest log {}, last commit {}",
            a.table,
            a.objects_last_24h,
            time(a.newest_log_time),
            time(a.last_commit)
        );
    }
    Ok(())
}
