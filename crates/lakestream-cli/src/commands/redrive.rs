//! `lakestream redrive`: put Kafka batches that Lambda gave up on back into the lake, exactly
//! once. Sources are the on-failure records the event source mapping wrote to the
//! failed-batches bucket: local files, directories (every file under them), or `s3://bucket/prefix`
//! (every object under it; the usual AWS variables and `AWS_ENDPOINT_URL` apply).

use anyhow::{Context, Result, bail};
use lakestream_core::{KafkaIngestor, Redrive, RedriveReport};
use lakestream_formats::failed_batch::FailedKafkaBatch;
use std::path::{Path, PathBuf};

/// One on-failure record to re-drive: where it came from and its bytes.
struct Source {
    name: String,
    bytes: Vec<u8>,
}

/// Re-drive every record found under `sources`, one after the other; a record that cannot be
/// read or re-driven is reported and the rest still run. Errors if any failed.
pub async fn run(
    ingestor: &KafkaIngestor,
    sources: &[String],
    allow_duplicates: bool,
    json: bool,
) -> Result<Vec<RedriveReport>> {
    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for source in sources {
        let found = if let Some(rest) = source.strip_prefix("s3://") {
            s3_objects(rest).await
        } else {
            local_files(Path::new(source))
        }
        .with_context(|| format!("listing {source}"))?;
        if found.is_empty() {
            bail!("{source}: no on-failure records found");
        }
        for s in found {
            let out = async {
                let batch = FailedKafkaBatch::from_json(&s.bytes).map_err(anyhow::Error::msg)?;
                let records = batch.event.into_source_records();
                let report = ingestor
                    .redrive(Redrive {
                        records: &records,
                        id: &batch.request_id,
                        allow_duplicates,
                    })
                    .await?;
                anyhow::Ok(report)
            }
            .await;
            match out {
                Ok(r) => {
                    if !json {
                        println!(
                            "{}: {} records: {} written under redrive/{}, {} already in the lake, \
                             {} dead-lettered",
                            s.name, r.received, r.written, r.id, r.duplicates, r.dead_lettered
                        );
                    }
                    reports.push(r);
                }
                Err(e) => {
                    eprintln!("{}: not re-driven: {e:#}", s.name);
                    failures.push(s.name);
                }
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    if !failures.is_empty() {
        bail!(
            "{} of {} on-failure records were not re-driven ({}); fix the cause and run the \
             command again: what was re-driven is not written twice",
            failures.len(),
            failures.len() + reports.len(),
            failures.join(", ")
        );
    }
    Ok(reports)
}

/// A file, or every file under a directory (sorted, so runs are reproducible).
fn local_files(path: &Path) -> Result<Vec<Source>> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut todo = vec![path.to_path_buf()];
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            for entry in
                std::fs::read_dir(&p).with_context(|| format!("reading {}", p.display()))?
            {
                todo.push(entry?.path());
            }
        } else {
            paths.push(p);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
            Ok(Source {
                name: p.display().to_string(),
                bytes,
            })
        })
        .collect()
}

/// Every object under `bucket/prefix`.
async fn s3_objects(bucket_and_prefix: &str) -> Result<Vec<Source>> {
    let (bucket, prefix) = bucket_and_prefix
        .split_once('/')
        .unwrap_or((bucket_and_prefix, ""));
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let conf = aws_sdk_s3::config::Builder::from(&aws)
        .force_path_style(true)
        .build();
    let client = aws_sdk_s3::Client::from_conf(conf);
    let mut keys = Vec::new();
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.with_context(|| format!("listing s3://{bucket}/{prefix}"))?;
        keys.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_string)),
        );
    }
    keys.sort();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let obj = client
            .get_object()
            .bucket(bucket)
            .key(&key)
            .send()
            .await
            .with_context(|| format!("reading s3://{bucket}/{key}"))?;
        let bytes = obj
            .body
            .collect()
            .await
            .with_context(|| format!("reading s3://{bucket}/{key}"))?
            .into_bytes()
            .to_vec();
        out.push(Source {
            name: format!("s3://{bucket}/{key}"),
            bytes,
        });
    }
    Ok(out)
}
