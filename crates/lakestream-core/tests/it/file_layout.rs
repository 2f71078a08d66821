//! Data files keep row groups of about `ROW_GROUP_BYTES` (16 MiB, estimated encoded) whatever
//! one write holds, and a refine run's files end near 32 MiB: a rewrite decodes one row group
//! at a time, so what it holds follows the row group, not the file. Before, Parquet's default
//! (a million rows) was the only bound: a CDC apply of 1.5 M rows wrote one 158 MB file of one
//! row group, and an ingest of one 250 k-row object one row group (`make bench-memory`).

use anyhow::{Context, Result};
use deltalake::parquet::file::reader::FileReader;
use deltalake::parquet::file::serialized_reader::SerializedFileReader;
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::{KafkaIngestor, Lake, read};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{Backend, CDC_OP, CDC_ROW, TestLake, cdc_topic, cdc_upsert};
use std::path::Path;
use std::sync::Arc;

const ROWS: usize = 40_000;
/// Characters of `v` per row: ~640 B of text that does not compress, ~25 MB in all.
const TEXT: usize = 640;

/// Text that Snappy cannot shrink much: hex of a xorshift stream.
fn text(seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = String::with_capacity(TEXT);
    while out.len() < TEXT {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(&format!("{x:016x}"));
    }
    out.truncate(TEXT);
    out
}

/// (rows, compressed bytes) of each row group of each data file under `dir` (partition
/// folders included; the log and the change data are not data files).
fn row_groups(dir: &Path) -> Result<Vec<Vec<(i64, i64)>>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        if path.is_dir() && !name.as_deref().is_some_and(|n| n.starts_with('_')) {
            out.extend(row_groups(&path)?);
        } else if path.extension().is_some_and(|e| e == "parquet") {
            let reader = SerializedFileReader::new(std::fs::File::open(&path)?)?;
            out.push(
                reader
                    .metadata()
                    .row_groups()
                    .iter()
                    .map(|g| (g.num_rows(), g.compressed_size()))
                    .collect(),
            );
        }
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_write_keeps_row_groups_and_files_bounded() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "file-layout")?;
    let cfg = lake.config_with(
        &(cdc_topic(&format!("{CDC_ROW}{CDC_OP}"), "")
            + &cdc_upsert("sensors", "silver/cdc", true)),
    )?;
    let records: Vec<SourceRecord> = (0..ROWS)
        .map(|i| {
            let json = format!(
                r#"{{"id":{i},"v":"{}","ts":"2026-01-01T10:00:00Z","op":"I"}}"#,
                text(i as u64)
            );
            SourceRecord::new("cdc", 0, i as i64, 0, json.as_bytes())
        })
        .collect();
    let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
    ing.ingest(&records).await?;
    let l = Lake::new(&cfg.lake)?;
    let s: CommitSettings = (&cfg.commit).into();
    let job = cfg.refine_job("sensors").context("job")?;
    let ctx = RunContext::new(&cfg, &l, &s, chrono::Utc::now());
    run_job(&ctx, job, 10).await?;
    assert_eq!(
        read::read_table(&l, "silver/cdc", None).await?.num_rows(),
        ROWS,
        "every row once"
    );

    let mib = |b: i64| b as f64 / f64::from(1 << 20);
    for (table, name) in [("bronze", "raw/cdc"), ("silver", "silver/cdc")] {
        let files = row_groups(&lake.table_dir(name).context("a filesystem lake")?)?;
        let groups: Vec<(i64, i64)> = files.iter().flatten().copied().collect();
        assert_eq!(
            groups.iter().map(|g| g.0).sum::<i64>(),
            ROWS as i64,
            "{table}"
        );
        assert!(
            groups.len() >= 2,
            "{table}: ~25 MB of rows in {} row group(s) {groups:?}",
            groups.len()
        );
        for (rows, bytes) in &groups {
            assert!(
                mib(*bytes) <= 20.0,
                "{table}: a row group of {rows} rows, {:.1} MiB",
                mib(*bytes)
            );
        }
        for f in &files {
            let size: i64 = f.iter().map(|g| g.1).sum();
            assert!(mib(size) <= 40.0, "{table}: a file of {:.1} MiB", mib(size));
        }
    }
    Ok(())
}
