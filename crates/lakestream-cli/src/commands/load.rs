//! `lakestream load TABLE FILE...`: back-fill historical rows (Parquet, CSV, JSON lines) into a
//! table through the one commit path, exactly once per file content (`lakestream_core::load`).
//! Files are loaded one after the other, one commit each; a file that fails is reported and
//! the rest still load.

use super::{after_commit, load_config, open_lake};
use crate::args::LoadArgs;
use anyhow::{Context, Result, bail};
use lakestream_core::commit::CommitSettings;
use lakestream_core::load::{FileFormat, LoadFile, load_file};

/// `lakestream load`.
pub async fn run_command(args: LoadArgs) -> Result<()> {
    let cfg = load_config(&args.lake)?;
    let lake = open_lake(&cfg, &args.lake)?;
    let settings: CommitSettings = (&cfg.commit).into();
    let mut failed = Vec::new();
    let mut reports = Vec::new();
    for file in &args.files {
        let format = match args.format.as_deref() {
            Some("parquet") => Some(FileFormat::Parquet),
            Some("csv") => Some(FileFormat::Csv),
            Some("json") => Some(FileFormat::Json),
            Some(other) => bail!("--format {other}: use parquet, csv or json"),
            None => FileFormat::of(file),
        };
        let Some(format) = format else {
            eprintln!(
                "{file}: cannot tell the format from the name; pass --format parquet|csv|json"
            );
            failed.push(file.clone());
            continue;
        };
        let out = async {
            let bytes = tokio::fs::read(file)
                .await
                .with_context(|| format!("reading {file}"))?;
            let now = chrono::Utc::now();
            let f = LoadFile {
                name: file.clone(),
                bytes: bytes.into(),
                format,
            };
            Ok::<_, anyhow::Error>(load_file(&lake, &cfg, &settings, now, &args.table, &f).await?)
        }
        .await;
        match out {
            Ok(r) => {
                if !args.json {
                    match (r.already_loaded, r.version) {
                        (true, _) => println!(
                            "{}: already loaded into {} (same content), nothing written",
                            r.file, r.table
                        ),
                        (false, Some(v)) => {
                            println!(
                                "{}: {} rows loaded into {} at version {v}",
                                r.file, r.rows, r.table
                            )
                        }
                        (false, None) => println!("{}: no rows, nothing written", r.file),
                    }
                }
                reports.push(r);
            }
            Err(e) => {
                eprintln!("{file}: {e:#}");
                failed.push(file.clone());
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    after_commit(&args.lake);
    if !failed.is_empty() {
        bail!("{} file(s) not loaded: {}", failed.len(), failed.join(", "));
    }
    Ok(())
}
