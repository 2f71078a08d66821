//! Access-log parse -> Arrow throughput (not a test), side by side with the Athena RegexSerDe
//! pattern in Rust `regex` and in Python `re`, on the same generated file, one core.
//!
//! `taskset -c 0 cargo bench -p lakestream-core --bench access_log_parse -- [LINES]`
//! (default 200,000 lines, ~84 MB). Python runs if `python3` is on PATH.

use deltalake::arrow::array::StringBuilder;
use lakestream_core::access_log::AccessLogBatchBuilder;
use lakestream_core::access_log::generate::generate_lines;
use lakestream_formats::access_log::parse_line;
use std::time::Instant;

/// AWS's Athena RegexSerDe pattern for S3 access logs (shared FORMATS.md).
const ATHENA: &str = r#"([^ ]*) ([^ ]*) \[(.*?)\] ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ("[^"]*"|-) (-|[0-9]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ("[^"]*"|-) ([^ ]*)(?: ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*))?.*$"#;

fn report(name: &str, lines: usize, bytes: usize, secs: f64) {
    println!(
        "{name:<34} {:>10.0} lines/s {:>8.1} MB/s  ({lines} lines, {:.1} MB, {secs:.2}s)",
        lines as f64 / secs,
        bytes as f64 / 1e6 / secs,
        bytes as f64 / 1e6
    );
}

fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200_000);
    let start = chrono::DateTime::from_timestamp(1_795_939_200, 0).unwrap_or_default();
    let text = generate_lines(
        42,
        n,
        &["datalake-prod", "analytics-archive", "ml-features"],
        start,
    );
    let path = std::env::temp_dir().join("lakestream-access-log-bench.log");
    std::fs::write(&path, &text)?;
    let bytes = text.len();

    // Lakestream, parse only: every line to a typed record (time, status, sizes as numbers).
    let t = Instant::now();
    let (mut parsed, mut sent) = (0usize, 0i64);
    for line in text.lines() {
        if let Ok(rec) = parse_line(line) {
            parsed += 1;
            sent = sent.wrapping_add(rec.numbers[0].unwrap_or(0) ^ rec.time_us);
        }
    }
    anyhow::ensure!(parsed == n && sent != 0, "parsed {parsed} of {n}");
    report(
        "lakestream parse -> typed record",
        n,
        bytes,
        t.elapsed().as_secs_f64(),
    );

    // Lakestream: hand-written tokenizer straight into Arrow builders, typed columns.
    let t = Instant::now();
    let mut b = AccessLogBatchBuilder::new();
    let mut rows = 0;
    for line in text.lines() {
        if let Ok(rec) = parse_line(line) {
            b.append(&rec, "s3://raw-logs/bench", 1);
        }
        if b.len() == 10_000 {
            rows += b.finish()?.num_rows();
        }
    }
    rows += b.finish()?.num_rows();
    anyhow::ensure!(rows == n, "parsed {rows} of {n}");
    report(
        "lakestream parse -> Arrow",
        n,
        bytes,
        t.elapsed().as_secs_f64(),
    );

    // Rust regex, Athena pattern: captures into string builders (no typing, no time parsing).
    let re = regex::Regex::new(ATHENA)?;
    let t = Instant::now();
    let mut cols: Vec<StringBuilder> = (0..27).map(|_| StringBuilder::new()).collect();
    let mut matched = 0;
    for line in text.lines() {
        if let Some(c) = re.captures(line) {
            for (i, col) in cols.iter_mut().enumerate() {
                col.append_option(c.get(i + 1).map(|m| m.as_str()));
            }
            matched += 1;
        }
        if matched % 10_000 == 0 {
            for col in &mut cols {
                let _ = col.finish();
            }
        }
    }
    anyhow::ensure!(matched == n, "regex matched {matched} of {n}");
    report(
        "rust regex (Athena) -> strings",
        n,
        bytes,
        t.elapsed().as_secs_f64(),
    );

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/access_log_re.py");
    match std::process::Command::new("python3")
        .arg(script)
        .arg(&path)
        .output()
    {
        Ok(out) if out.status.success() => print!("{}", String::from_utf8_lossy(&out.stdout)),
        Ok(out) => eprintln!("python3 failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => eprintln!("python3 not run: {e}"),
    }
    Ok(())
}
