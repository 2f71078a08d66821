//! Decode + write throughput of the core on generated seed orders (not a test).
//!
//! `cargo bench -p lakestream-core --bench ingest_throughput -- [RECORDS] [BATCH]`
//! (defaults: 1,000,000 records in batches of 10,000, the largest MSK batch). Runs the full
//! ingest path (dedup against `txn`, JSON -> Arrow, Parquet, Delta commit) into a filesystem lake
//! on a current-thread runtime (one core), and separately times decoding alone.

use lakestream_core::config::SchemaMode;
use lakestream_core::decode::decode_values;
use lakestream_core::schema::TableLayout;
use lakestream_core::seed::SeedGenerator;
use lakestream_core::{FixedClock, Ingestor, PipelineConfig, RecordValue};
use std::sync::Arc;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(1_000_000);
    let batch = args.get(1).copied().unwrap_or(10_000);
    let start = chrono::DateTime::from_timestamp(1_649_067_330, 0).unwrap_or_default();
    let mut g = SeedGenerator::new(1, start, 10);
    let records: Vec<_> = (0..n).map(|_| g.order()).collect();
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
    let ing = Ingestor::new(cfg, Arc::new(FixedClock::new(start)))?;
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
    Ok(())
}
