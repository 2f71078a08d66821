//! `lakestream tables` (every table of the lake with its summary) and `lakestream ddl` (the
//! Athena DDL of a table, named uniquely among the pipeline's tables).

use super::load_config;
use crate::args::{DdlArgs, LakeArgs};
use anyhow::Result;
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;

/// `lakestream tables`: one summary line per table.
pub async fn list(lake_args: &LakeArgs) -> Result<()> {
    let cfg = load_config(lake_args)?;
    let l = Lake::new(&cfg.lake)?;
    for name in table_names(&cfg, &l).await? {
        if let Some(s) = read::summarize(&l, &name).await? {
            println!(
                "{:<24} version {:>4}  files {:>5}  rows {:>8}  bytes {:>10}  partitioned by [{}]",
                s.table,
                s.version,
                s.files,
                s.rows,
                s.bytes,
                s.partition_columns.join(", ")
            );
        }
    }
    Ok(())
}

/// Tables of a lake: every table the pipeline writes (the maintenance function's list), plus,
/// on a filesystem lake, any other Delta table found on disk.
async fn table_names(cfg: &PipelineConfig, lake: &Lake) -> Result<Vec<String>> {
    let mut names: Vec<String> = lakestream_core::maintenance::maintained_tables(cfg, lake)
        .await?
        .into_iter()
        .map(|t| t.name)
        .collect();
    if let Ok(root) = lake.root().to_file_path() {
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            if dir.join("_delta_log").is_dir() {
                if let Ok(rel) = dir.strip_prefix(&root) {
                    names.push(rel.to_string_lossy().replace('\\', "/"));
                }
                continue;
            }
            if let Ok(entries) = std::fs::read_dir(&dir) {
                stack.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// `lakestream ddl`: print the CREATE EXTERNAL TABLE of a table.
pub async fn ddl(args: DdlArgs) -> Result<()> {
    use lakestream_core::inspect::ddl;
    let cfg = load_config(&args.lake)?;
    let form = if args.manifest {
        ddl::DdlForm::Manifest
    } else {
        ddl::DdlForm::Native
    };
    let l = Lake::new(&cfg.lake)?;
    let name = match args.name {
        Some(n) => ddl::valid_athena_name(&n)?,
        None => ddl::unique_athena_name(&ddl::pipeline_tables(&l, &cfg).await?, &args.table)?,
    };
    print!("{}", ddl::ddl_named(&l, &args.table, &name, form).await?);
    Ok(())
}
