//! What bounds a run's memory.
//!
//! Data files keep row groups of about `ROW_GROUP_BYTES` (16 MiB, estimated encoded) whatever
//! one write holds, and a refine run's files end near 32 MiB: a rewrite decodes one row group
//! at a time, so what it holds follows the row group, not the file. Before, Parquet's default
//! (a million rows) was the only bound: a CDC apply of 1.5 M rows wrote one 158 MB file of one
//! row group, and an ingest of one 250 k-row object one row group (`make bench-memory`);
//! compaction merged such files into row groups of up to a million rows.
//!
//! A run that reads a whole bronze snapshot at once (a CDC apply's first run, a rebuild) larger
//! than the function's memory holds (`snapshot_max_mib`, which the refine function sets from
//! its memory) fails before it reads anything, saying what to do, instead of being killed by
//! Lambda at every retry; the run goes through once the limit allows it, and later runs read in
//! chunks whatever the limit.
//!
//! A chunk's limit counts Parquet bytes, and Parquet compresses: a chunk of rows that compress
//! well is also cut where its rows take 1.5 times the limit in memory, so the run's memory
//! follows what it holds, not what the files weigh.

use anyhow::{Context, Result};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::parquet::file::reader::FileReader;
use deltalake::parquet::file::serialized_reader::SerializedFileReader;
use lakestream_core::commit::CommitSettings;
use lakestream_core::maintenance::{CompactOptions, compact};
use lakestream_core::refine::{RunContext, rebuild, run_job};
use lakestream_core::table::TableHandle;
use lakestream_core::{KafkaIngestor, Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::cdc::{BronzeChange, append_bronze};
use lakestream_testkit::{
    Backend, CDC_OP, CDC_ROW, TestLake, backends, cdc_topic, cdc_upsert, fixed_clock, ingest_time,
};
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

fn mib(bytes: i64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// Every row group of `name` (a filesystem lake's table) holds at most ~20 MiB; the groups
/// hold `rows` rows in all. Returns each file's groups.
async fn bounded_groups(
    lake: &TestLake,
    l: &Lake,
    name: &str,
    rows: usize,
) -> Result<Vec<Vec<(i64, i64)>>> {
    let files = row_groups(lake, l, name).await?;
    let groups: Vec<(i64, i64)> = files.iter().flatten().copied().collect();
    assert_eq!(
        groups.iter().map(|g| g.0).sum::<i64>(),
        rows as i64,
        "{name}"
    );
    assert!(
        groups.len() >= 2,
        "{name}: {rows} rows of ~640 B in {} row group(s) {groups:?}",
        groups.len()
    );
    for (n, bytes) in &groups {
        assert!(
            mib(*bytes) <= 20.0,
            "{name}: a row group of {n} rows, {:.1} MiB",
            mib(*bytes)
        );
    }
    Ok(files)
}

/// (rows, compressed bytes) of each row group of each live data file of `name`.
async fn row_groups(lake: &TestLake, l: &Lake, name: &str) -> Result<Vec<Vec<(i64, i64)>>> {
    let dir = lake.table_dir(name).context("a filesystem lake")?;
    let handle = TableHandle::open_existing(l, name).await?;
    let mut out = Vec::new();
    for f in handle.live_files()? {
        let reader = SerializedFileReader::new(std::fs::File::open(dir.join(f.path()))?)?;
        out.push(
            reader
                .metadata()
                .row_groups()
                .iter()
                .map(|g| (g.num_rows(), g.compressed_size()))
                .collect(),
        );
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
    let records = |from: usize| -> Vec<SourceRecord> {
        (from..from + ROWS)
            .map(|i| {
                let json = format!(
                    r#"{{"id":{i},"v":"{}","ts":"2026-01-01T10:00:00Z","op":"I"}}"#,
                    text(i as u64)
                );
                SourceRecord::new("cdc", 0, i as i64, 0, json.as_bytes())
            })
            .collect()
    };
    let ing = KafkaIngestor::new(cfg.clone(), fixed_clock(ingest_time()))?;
    ing.ingest(&records(0)).await?;
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

    bronze_and_silver_are_bounded(&lake, &l).await?;

    // Compaction merges bronze's two ~25 MB files into one, in row groups of ~16 MiB still.
    ing.ingest(&records(ROWS)).await?;
    let opts = CompactOptions {
        min_small_files: 2,
        ..CompactOptions::default()
    };
    let r = compact(&l, "raw/cdc", &opts, ingest_time(), &|_, _| {}).await?;
    assert_eq!((r.files_removed, r.files_added), (2, 1), "{r:?}");
    bounded_groups(&lake, &l, "raw/cdc", 2 * ROWS).await?;
    Ok(())
}

/// Bronze (one ingest) and silver (one upsert run) of ROWS rows: bounded row groups, and
/// silver's files end near 32 MiB.
async fn bronze_and_silver_are_bounded(lake: &TestLake, l: &Lake) -> Result<()> {
    bounded_groups(lake, l, "raw/cdc", ROWS).await?;
    for f in bounded_groups(lake, l, "silver/cdc", ROWS).await? {
        let size: i64 = f.iter().map(|g| g.1).sum();
        assert!(mib(size) <= 40.0, "silver: a file of {:.1} MiB", mib(size));
    }
    Ok(())
}

const BRONZE: &str = "bronze/crm/public/orders";
const SILVER: &str = "silver/crm/public/orders";

/// `n` bronze inserts from id `from` (~650 B each), appended as one bronze commit.
async fn append(l: &Lake, from: usize, n: usize) -> Result<()> {
    append_text(l, from, n, text).await
}

/// [`append`] with each row's `v` from `v(id)`.
async fn append_text(l: &Lake, from: usize, n: usize, v: fn(u64) -> String) -> Result<()> {
    let rows: Vec<(String, String)> = (from..from + n)
        .map(|i| {
            let row = format!(r#"{{"id":{i},"v":"{}"}}"#, v(i as u64));
            (format!("s{i:08}"), row)
        })
        .collect();
    let changes: Vec<BronzeChange<'_>> = rows
        .iter()
        .map(|(seq, row)| ("c", seq.as_str(), row.as_str()))
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]));
    append_bronze(l, BRONZE, Some("id"), &changes, &schema).await?;
    Ok(())
}

/// The config with the apply job `orders`, its snapshot limit `snapshot_max_mib`.
fn apply_config(lake: &TestLake, snapshot_max_mib: Option<u64>) -> Result<PipelineConfig> {
    apply_config_with(lake, snapshot_max_mib, "")
}

/// [`apply_config`] with `job_lines` (TOML) in the job's table.
fn apply_config_with(
    lake: &TestLake,
    snapshot_max_mib: Option<u64>,
    job_lines: &str,
) -> Result<PipelineConfig> {
    let mut cfg = lake.config_with(&format!(
        "\n[[refine]]\njob = \"orders\"\noutput = \"{SILVER}\"\n{job_lines}[refine.cdc]\nsource = \"{BRONZE}\"\n"
    ))?;
    for j in &mut cfg.refine {
        j.snapshot_max_mib = snapshot_max_mib;
    }
    Ok(cfg)
}

async fn apply(cfg: &PipelineConfig, l: &Lake) -> Result<()> {
    let s: CommitSettings = (&cfg.commit).into();
    let job = cfg.refine_job("orders").context("job")?;
    run_job(&RunContext::new(cfg, l, &s, chrono::Utc::now()), job, 100).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_run_larger_than_the_memory_holds_fails_before_reading() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "snapshot-limit")?;
        let l = Lake::new(&lake.config.lake)?;
        append(&l, 0, 6_000).await?; // ~3.7 MiB of Parquet
        let err = apply(&apply_config(&lake, Some(2))?, &l)
            .await
            .err()
            .context("a 3 MiB snapshot over a 2 MiB limit must fail")?;
        let text = format!("{err:#}");
        for says in [
            "3 MiB",
            "about 2 MiB",
            "RefineMemory to at least 48 MB",
            "lakestream refine orders",
        ] {
            assert!(text.contains(says), "{backend:?}: `{says}` in {text}");
        }
        assert!(
            TableHandle::open_existing(&l, SILVER).await.is_err(),
            "{backend:?}: nothing written"
        );
        apply(&apply_config(&lake, Some(4))?, &l).await?;
        // Later runs read in chunks: the limit no longer applies.
        append(&l, 6_000, 6_000).await?;
        apply(&apply_config(&lake, Some(1))?, &l).await?;
        assert_eq!(
            read::read_table(&l, SILVER, None).await?.num_rows(),
            12_000,
            "{backend:?}"
        );
        // A rebuild (an operator's, or the function's own after a GDPR erasure in bronze)
        // whose next run would be refused is refused before it empties silver.
        let cfg = apply_config(&lake, Some(2))?;
        let s: CommitSettings = (&cfg.commit).into();
        let job = cfg.refine_job("orders").context("job")?;
        let ctx = RunContext::new(&cfg, &l, &s, chrono::Utc::now());
        let err = rebuild::rebuild(&ctx, job).await.err().context("refused")?;
        assert!(
            format!("{err:#}").contains("Nothing was read or changed"),
            "{err:#}"
        );
        assert_eq!(
            read::read_table(&l, SILVER, None).await?.num_rows(),
            12_000,
            "{backend:?}: silver kept"
        );
    }
    Ok(())
}

/// ~640 B of text that compresses to almost nothing (one letter, repeated).
fn compressible(id: u64) -> String {
    let letter = char::from(b'a' + (id % 26) as u8);
    std::iter::repeat_n(letter, TEXT).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_that_compresses_well_is_cut_by_what_its_rows_take_in_memory() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "decoded-limit")?;
        let l = Lake::new(&lake.config.lake)?;
        let cfg = apply_config_with(&lake, None, "max_mib_per_run = 1\n")?;
        // The first run reads the snapshot; the backlog after it is read in chunks.
        append_text(&l, 0, 10, compressible).await?;
        apply(&cfg, &l).await?;
        // 8 commits of 1,000 rows: ~0.75 MB in memory each, a few KiB of Parquet, so the
        // whole backlog is far below 1 MiB of Parquet, and ~6 MB in memory.
        for c in 0..8 {
            append_text(&l, 10 + c * 1_000, 1_000, compressible).await?;
        }
        let s: CommitSettings = (&cfg.commit).into();
        let job = cfg.refine_job("orders").context("job")?;
        let report = run_job(&RunContext::new(&cfg, &l, &s, chrono::Utc::now()), job, 100).await?;
        let per_run: Vec<usize> = report
            .runs
            .iter()
            .map(|r| r.sides.iter().map(|s| s.rows).sum())
            .collect();
        // 1.5 MiB in memory per chunk (~2-3 commits; a commit past the limit ends it): several
        // runs of whole commits, where the Parquet limit alone made one run of all 8.
        assert!(
            per_run.len() >= 2
                && per_run
                    .iter()
                    .all(|&r| r > 0 && r % 1_000 == 0 && r < 8_000)
                && per_run.iter().sum::<usize>() == 8_000,
            "{backend:?}: rows per run {per_run:?}"
        );
        let silver = read::read_table(&l, SILVER, None).await?;
        assert_eq!(silver.num_rows(), 8_010, "{backend:?}: every row once");
    }
    Ok(())
}
