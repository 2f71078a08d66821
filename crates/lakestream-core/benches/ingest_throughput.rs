//! Decode + write throughput of the core on generated seed orders (not a test).
//!
//! `cargo bench -p lakestream-core --bench ingest_throughput -- [RECORDS] [BATCH] [--data DIR]
//! [--json FILE]` (defaults: 1,000,000 records in batches of 10,000, the largest MSK batch). Runs
//! the full ingest path (dedup against `txn`, JSON -> Arrow, Parquet, Delta commit) into a
//! filesystem lake on a current-thread runtime (one core), and separately times decoding alone.
//! `--data DIR` shares the records with a peer (`make bench-compare`): `DIR/values.ndjson` (one
//! value per line) and `DIR/meta.csv` (partition, offset) are read when present, else generated
//! and written. `--json FILE` writes the results.

use lakestream_core::kafka::decode::decode_values;
use lakestream_core::schema::TableLayout;
use lakestream_core::seed::SeedGenerator;
use lakestream_core::{FixedClock, KafkaIngestor};
use lakestream_formats::config::{PipelineConfig, SchemaMode};
use lakestream_formats::record::RecordValue;
use std::sync::Arc;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1))
            .map(std::path::PathBuf::from)
    };
    let args: Vec<usize> = argv.iter().filter_map(|a| a.parse().ok()).collect();
    let n = args.first().copied().unwrap_or(1_000_000);
    let batch = args.get(1).copied().unwrap_or(10_000);
    let start = chrono::DateTime::from_timestamp(1_649_067_330, 0).unwrap_or_default();
    let records = match flag("--data") {
        Some(dir) => shared_records(&dir, n, start)?,
        None => {
            let mut g = SeedGenerator::new(1, start, 10);
            (0..n).map(|_| g.order()).collect()
        }
    };
    let bytes: usize = records.iter().map(|r| r.value_len()).sum();
    let mb = bytes as f64 / 1e6;

    let mut cfg = PipelineConfig::from_toml(include_str!("../../../lakestream.toml"))?;
    let layout = TableLayout::for_topic(&cfg.topics[0]);
    let value_schema = Arc::new(deltalake::arrow::datatypes::Schema::new(
        layout
            .config_schema
            .fields()
            .iter()
            .take(4)
            .cloned()
            .collect::<Vec<_>>(),
    ));
    let t = Instant::now();
    let mut rows = 0;
    for chunk in records.chunks(batch) {
        let values: Vec<Option<&[u8]>> = chunk
            .iter()
            .map(|r| match &r.value {
                RecordValue::Bytes(b) => Some(b.as_slice()),
                _ => None,
            })
            .collect();
        rows += decode_values(&values, &value_schema, SchemaMode::Enforce)?
            .batch
            .num_rows();
    }
    let secs = t.elapsed().as_secs_f64();
    let decode_secs = secs;
    println!(
        "decode only:      {n} records, {mb:.1} MB in {secs:.2}s = {:.0} records/s, {:.1} MB/s",
        rows as f64 / secs,
        mb / secs
    );

    let dir = tempfile::tempdir()?;
    cfg.lake.root = dir.path().to_string_lossy().into_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let ing = KafkaIngestor::new(cfg, Arc::new(FixedClock::new(start)))?;
    let t = Instant::now();
    let mut written = 0;
    let mut commits = 0;
    for chunk in records.chunks(batch) {
        let r = rt.block_on(ing.ingest(chunk))?;
        written += r.written;
        commits += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    anyhow::ensure!(written == n, "wrote {written} of {n}");
    println!(
        "decode+write:     {n} records, {mb:.1} MB in {secs:.2}s = {:.0} records/s, {:.1} MB/s ({commits} commits of {batch}, one core)",
        n as f64 / secs,
        mb / secs
    );
    if let Some(path) = flag("--json") {
        let (files, parquet_bytes) = parquet_files(&dir.path().join("raw/order"))?;
        let out = serde_json::json!({
            "records": n, "json_bytes": bytes, "commits": commits, "secs": secs,
            "decode_only_secs": decode_secs, "files": files, "parquet_bytes": parquet_bytes,
        });
        std::fs::write(path, out.to_string())?;
    }
    Ok(())
}

/// The records shared with a peer benchmark: read from `dir` when it holds `n` of them, else
/// generated and written there.
fn shared_records(
    dir: &std::path::Path,
    n: usize,
    start: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<Vec<lakestream_formats::record::SourceRecord>> {
    use std::io::Write;
    let (values, meta) = (dir.join("values.ndjson"), dir.join("meta.csv"));
    if let (Ok(v), Ok(m)) = (std::fs::read(&values), std::fs::read_to_string(&meta)) {
        let lines: Vec<&[u8]> = v.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
        let metas: Vec<&str> = m.lines().skip(1).collect();
        if lines.len() == n && metas.len() == n {
            return lines
                .iter()
                .zip(metas)
                .map(|(value, meta)| {
                    let (p, o) = meta.split_once(',').unwrap_or_default();
                    Ok(lakestream_formats::record::SourceRecord::new(
                        "orders",
                        p.parse()?,
                        o.parse()?,
                        start.timestamp_millis(),
                        value,
                    ))
                })
                .collect();
        }
    }
    std::fs::create_dir_all(dir)?;
    let mut g = SeedGenerator::new(1, start, 10);
    let records: Vec<_> = (0..n).map(|_| g.order()).collect();
    let mut v = std::io::BufWriter::new(std::fs::File::create(&values)?);
    let mut m = std::io::BufWriter::new(std::fs::File::create(&meta)?);
    writeln!(m, "kafka_partition,kafka_offset")?;
    for r in &records {
        if let RecordValue::Bytes(b) = &r.value {
            v.write_all(b)?;
            v.write_all(b"\n")?;
        }
        writeln!(m, "{},{}", r.partition, r.offset)?;
    }
    v.flush()?;
    m.flush()?;
    Ok(records)
}

/// Number and total size of the Parquet files under `dir`.
fn parquet_files(dir: &std::path::Path) -> anyhow::Result<(usize, u64)> {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let path = e.path();
            if e.file_type()?.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "parquet") {
                files += 1;
                bytes += e.metadata()?.len();
            }
        }
    }
    Ok((files, bytes))
}
