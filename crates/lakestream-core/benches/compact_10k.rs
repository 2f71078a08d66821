//! Compaction of a table of 10,000 small files (not a test): throughput (MB/s of input
//! rewritten), peak RSS during the compaction, and, on an S3 endpoint, how many requests the
//! vacuum that follows makes.
//!
//! Filesystem: `cargo bench -p lakestream-core --bench compact_10k -- [FILES]`
//! S3 emulator: `MOTO_LOG=target/moto.log LAKESTREAM_BENCH_S3=http://127.0.0.1:5055 cargo bench ...`
//! (the request count is the number of lines moto logged during the vacuum).

use deltalake::arrow::array::{Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::{Action, StructType};
use deltalake::operations::create::CreateBuilder;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use lakestream_core::maintenance::{CompactOptions, VacuumOptions, compact, vacuum};
use lakestream_core::table::TableHandle;
use lakestream_core::{FixedClock, Lake};
use lakestream_formats::config::LakeConfig;
use std::sync::Arc;
use std::time::Instant;

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn moto_lines() -> usize {
    std::env::var("MOTO_LOG")
        .ok()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map_or(0, |s| s.lines().count())
}

fn main() -> anyhow::Result<()> {
    let files: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    let cfg = match std::env::var("LAKESTREAM_BENCH_S3") {
        Ok(endpoint) => LakeConfig {
            root: format!("s3://lakestream-test/compact-bench-{}", std::process::id()),
            endpoint_url: Some(endpoint),
            region: Some("us-east-1".into()),
            allow_http: true,
            storage_options: Default::default(),
            assume_conditional_put: false,
        },
        Err(_) => LakeConfig {
            root: dir.path().to_string_lossy().into_owned(),
            endpoint_url: None,
            region: None,
            allow_http: false,
            storage_options: Default::default(),
            assume_conditional_put: false,
        },
    };
    let lake = Lake::new(&cfg)?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("owner", DataType::Utf8, false),
        Field::new("value", DataType::Int64, false),
    ]));
    let url = lake.table_url("bench/small")?;
    rt.block_on(async {
        let t = Instant::now();
        let mut adds = Vec::with_capacity(files);
        let mut tasks = futures::stream::FuturesUnordered::new();
        use futures::StreamExt;
        for i in 0..files {
            let (url, schema, opts) = (url.clone(), schema.clone(), lake.storage_options().clone());
            tasks.push(tokio::spawn(async move {
                let rows = 200i64;
                let base = i as i64 * rows;
                let batch = RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        Arc::new(Int64Array::from_iter_values(base..base + rows)),
                        Arc::new(StringArray::from_iter_values((0..rows).map(|r| format!("owner-{}", r % 6)))),
                        Arc::new(Int64Array::from_iter_values((0..rows).map(|r| r * 7 % 1000))),
                    ],
                )?;
                let mut w = RecordBatchWriter::try_new(url.as_str(), schema, None, Some(opts))?;
                w.write(batch).await?;
                anyhow::Ok(w.flush().await?)
            }));
            if tasks.len() >= 32
                && let Some(r) = tasks.next().await
            {
                adds.extend(r??);
            }
        }
        while let Some(r) = tasks.next().await {
            adds.extend(r??);
        }
        let st: StructType = schema.as_ref().try_into_kernel()?;
        let h = TableHandle::open(&lake, "bench/small")?;
        CreateBuilder::new()
            .with_log_store(h.log_store())
            .with_columns(st.fields().cloned())
            .with_actions(adds.into_iter().map(Action::Add))
            .await?;
        println!("setup: {files} small files written and committed in {:.1}s", t.elapsed().as_secs_f64());

        let opts = CompactOptions { min_small_files: 2, ..Default::default() };
        reset_peak_rss();
        let rss0 = peak_rss_mib();
        let t = Instant::now();
        let r = compact(&lake, "bench/small", &opts, chrono::Utc::now(), &|_, _| {}).await?;
        let secs = t.elapsed().as_secs_f64();
        let mb = r.bytes_rewritten as f64 / 1e6;
        println!(
            "compaction: {} -> {} files, {:.1} MB rewritten in {secs:.1}s = {:.1} MB/s ({:.0} files/s); peak RSS {:.0} MiB (baseline {:.0} MiB)",
            r.files_before, r.files_after, mb, mb / secs, r.files_removed as f64 / secs, peak_rss_mib(), rss0
        );
        let clock = Arc::new(FixedClock::new(chrono::Utc::now() + chrono::Duration::days(8)));
        let before = moto_lines();
        let t = Instant::now();
        let v = vacuum(&lake, "bench/small", &VacuumOptions::default(), clock).await?;
        let requests = moto_lines() - before;
        println!(
            "vacuum: {} files, {:.1} MB removed in {:.1}s{}",
            v.files.len(),
            v.bytes as f64 / 1e6,
            t.elapsed().as_secs_f64(),
            if requests > 0 { format!("; {requests} S3 requests (moto log lines)") } else { String::new() }
        );
        anyhow::Ok(())
    })?;
    Ok(())
}
