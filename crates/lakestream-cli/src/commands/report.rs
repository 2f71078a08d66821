//! `lakestream report access`: the access-pattern report as a table, JSON, or one
//! self-contained HTML page (inline SVG charts and styles, no script, nothing fetched).

use anyhow::{Context, Result};
use lakestream_core::Lake;
use lakestream_core::access_log::report::{AccessReport, ReportOptions, UsageStats, access_report};
use lakestream_formats::config::PipelineConfig;
use std::fmt::Write as _;
use std::path::Path;

/// Build the report and print it (and write the HTML page when asked).
pub async fn access(
    config: &PipelineConfig,
    opts: ReportOptions,
    html: Option<&Path>,
    json: bool,
) -> Result<()> {
    let lake = Lake::new(&config.lake)?;
    let report = access_report(&lake, config, opts).await?;
    if let Some(path) = html {
        std::fs::write(path, render_html(&report))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if html.is_none() {
        print_text(&report);
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1_048_576.0)
}

fn print_text(r: &AccessReport) {
    println!(
        "access report: {} requests in the last {} days (only they are read), datasets at depth {}",
        r.rows, r.since_days, r.depth
    );
    println!("\nbuckets:");
    for b in &r.buckets {
        println!(
            "  {:<28} {:>7} requests {:>6} reads {:>6} writes {:>11} sent {:>4} requesters {:>5.1}% errors",
            b.bucket,
            b.requests,
            b.reads,
            b.writes,
            mib(b.bytes_sent),
            b.requesters,
            b.error_rate * 100.0
        );
    }
    println!(
        "\ndatasets, most read first (age of data read: new <7d / recent <90d / old / unknown):"
    );
    for d in &r.datasets {
        println!(
            "  {:<44} {:>6} reads {:>6} writes {:>11} sent {:>4} requesters {:>5.1}% errors  age {}/{}/{}/{}",
            format!("{}/{}", d.bucket, d.dataset),
            d.reads,
            d.writes,
            mib(d.bytes_sent),
            d.requesters,
            d.error_rate * 100.0,
            d.age.new,
            d.age.recent,
            d.age.old,
            d.age.unknown
        );
    }
    println!(
        "\nnot read in the last {} days (candidates for cheaper storage):",
        r.since_days
    );
    for (bucket, dataset, last) in &r.cold {
        let last = last.map_or("requests, no read in the window".into(), |t| {
            format!("last read {}", t.format("%Y-%m-%d"))
        });
        println!("  {bucket}/{dataset} ({last})");
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const COLORS: [(&str, &str); 4] = [
    ("new (&lt;7 d)", "#2b8a3e"),
    ("recent (&lt;90 d)", "#74b816"),
    ("old", "#e67700"),
    ("unknown", "#adb5bd"),
];

/// Horizontal bars: reads per dataset (top 15).
fn reads_chart(datasets: &[UsageStats]) -> String {
    let top: Vec<&UsageStats> = datasets.iter().filter(|d| d.reads > 0).take(15).collect();
    if top.is_empty() {
        return "<p>No reads in the window.</p>".into();
    }
    let max = top.iter().map(|d| d.reads).max().unwrap_or(1).max(1) as f64;
    let (label_w, bar_w, row_h) = (330.0, 420.0, 24.0);
    let h = row_h * top.len() as f64 + 10.0;
    let mut svg = format!(
        r#"<svg role="img" aria-label="reads per dataset" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#,
        w = label_w + bar_w + 80.0
    );
    for (i, d) in top.iter().enumerate() {
        let y = i as f64 * row_h + 5.0;
        let w = (d.reads as f64 / max * bar_w).max(1.0);
        let _ = write!(
            svg,
            r##"<text x="{lx}" y="{ty}" text-anchor="end" class="lbl">{name}</text><rect class="bar" x="{x}" y="{y}" width="{w:.1}" height="{bh}" fill="#1c7ed6"><title>{name}: {reads} reads</title></rect><text x="{vx:.1}" y="{ty}" class="val">{reads}</text>"##,
            lx = label_w - 8.0,
            ty = y + 15.0,
            name = esc(&format!("{}/{}", d.bucket, d.dataset)),
            x = label_w,
            bh = row_h - 6.0,
            vx = label_w + w + 6.0,
            reads = d.reads
        );
    }
    svg + "</svg>"
}

/// Stacked bars: the age of the data each dataset's reads touched (shares of its reads).
fn age_chart(datasets: &[UsageStats]) -> String {
    let top: Vec<&UsageStats> = datasets.iter().filter(|d| d.reads > 0).take(15).collect();
    if top.is_empty() {
        return String::new();
    }
    let (label_w, bar_w, row_h) = (330.0, 420.0, 24.0);
    let h = row_h * top.len() as f64 + 34.0;
    let mut svg = format!(
        r#"<svg role="img" aria-label="age of data read" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#,
        w = label_w + bar_w + 20.0
    );
    for (i, d) in top.iter().enumerate() {
        let y = i as f64 * row_h + 5.0;
        let total = (d.age.new + d.age.recent + d.age.old + d.age.unknown).max(1) as f64;
        let mut x = label_w;
        let _ = write!(
            svg,
            r#"<text x="{lx}" y="{ty}" text-anchor="end" class="lbl">{name}</text>"#,
            lx = label_w - 8.0,
            ty = y + 15.0,
            name = esc(&format!("{}/{}", d.bucket, d.dataset))
        );
        for ((label, color), n) in
            COLORS
                .iter()
                .zip([d.age.new, d.age.recent, d.age.old, d.age.unknown])
        {
            if n == 0 {
                continue;
            }
            let w = n as f64 / total * bar_w;
            let _ = write!(
                svg,
                r#"<rect class="seg" x="{x:.1}" y="{y}" width="{w:.1}" height="{bh}" fill="{color}"><title>{label}: {n} reads</title></rect>"#,
                bh = row_h - 6.0
            );
            x += w;
        }
    }
    let ly = row_h * top.len() as f64 + 22.0;
    let mut lx = label_w;
    for (label, color) in COLORS {
        let _ = write!(
            svg,
            r#"<rect x="{lx}" y="{y}" width="12" height="12" fill="{color}"/><text x="{tx}" y="{ty}" class="val">{label}</text>"#,
            y = ly - 10.0,
            tx = lx + 16.0,
            ty = ly
        );
        lx += 130.0;
    }
    svg + "</svg>"
}

/// The whole page.
pub fn render_html(r: &AccessReport) -> String {
    let mut bucket_rows = String::new();
    for b in &r.buckets {
        let _ = write!(
            bucket_rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            esc(&b.bucket),
            b.requests,
            b.reads,
            b.writes,
            mib(b.bytes_sent),
            b.requesters,
            b.error_rate * 100.0
        );
    }
    let mut cold_rows = String::new();
    for (bucket, dataset, last) in &r.cold {
        let last = last.map_or("no read in the window".into(), |t| {
            t.format("%Y-%m-%d").to_string()
        });
        let _ = write!(
            cold_rows,
            "<tr class=\"cold\"><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(bucket),
            esc(dataset),
            last
        );
    }
    if cold_rows.is_empty() {
        cold_rows = "<tr><td colspan=\"3\">Every dataset was read in the window.</td></tr>".into();
    }
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Lakestream access report</title>
<style>
body{{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:64em;color:#212529}}
h1{{font-size:1.6em;margin-bottom:.2em}} h2{{font-size:1.2em;margin-top:1.6em}}
.meta{{color:#495057}} table{{border-collapse:collapse;margin:.5em 0}}
td,th{{padding:.25em .8em;border-bottom:1px solid #dee2e6;text-align:left}}
td:not(:first-child),th:not(:first-child){{text-align:right}}
.lbl{{font-size:12px;fill:#343a40}} .val{{font-size:12px;fill:#495057}}
.cold td{{background:#fff4e6}}
</style></head><body>
<h1>Who reads the lake</h1>
<p class="meta">{rows} requests in the last {days} days up to {now} (only they are read); a dataset is the bucket and the first {depth} key segment(s).</p>
<h2>Most read datasets</h2>
{reads}
<h2>How old is the data that is read</h2>
<p class="meta">From a date in the key (2026/04/01, date=2026-04-01) or, without one, the first time the window shows the key written.</p>
{age}
<h2>Buckets</h2>
<table><tr><th>bucket</th><th>requests</th><th>reads</th><th>writes</th><th>sent</th><th>requesters</th><th>errors</th></tr>{bucket_rows}</table>
<h2>Not read in the last {days} days: candidates for cheaper storage</h2>
<table><tr><th>bucket</th><th>dataset</th><th>last read</th></tr>{cold_rows}</table>
</body></html>
"#,
        rows = r.rows,
        days = r.since_days,
        now = r.now.format("%Y-%m-%d %H:%M UTC"),
        depth = r.depth,
        reads = reads_chart(&r.datasets),
        age = age_chart(&r.datasets),
    )
}
