//! One module per command or group of commands (`lakestream <command>`), and what they share:
//! the pipeline config a command runs on, its lake (with the test-only crash point installed
//! when `--crash-at` asks for it) and the `after-commit` crash step.

pub mod access_logs;
pub mod catalog;
pub mod demo;
pub mod demo_cdc;
pub mod inspect;
pub mod invoke;
pub mod load;
pub mod maintain;
pub mod redrive;
pub mod refine;
pub mod report;
#[cfg(feature = "sql")]
pub mod sql;
pub mod tables;

use crate::args::{LakeArgs, SqlArgs};
use crate::crash;
use anyhow::Result;
use lakestream_core::Lake;
use lakestream_formats::config::PipelineConfig;
use std::path::Path;

/// The example pipeline, used when no config is given and `./lakestream.toml` does not exist.
pub const EXAMPLE_CONFIG: &str = include_str!("../../../../lakestream.toml");

/// The config of `--config`, else `./lakestream.toml`, else the example; `--lake` overrides
/// its root.
pub fn load_config(args: &LakeArgs) -> Result<PipelineConfig> {
    let mut cfg = match &args.config {
        Some(p) => PipelineConfig::load(&p.to_string_lossy())?,
        None if Path::new("lakestream.toml").exists() => PipelineConfig::load("lakestream.toml")?,
        None => PipelineConfig::from_toml(EXAMPLE_CONFIG)?,
    };
    if let Some(root) = &args.lake {
        cfg.lake.root = root.clone();
    }
    Ok(cfg)
}

/// The lake of `cfg`, with the crash point installed when one is asked for.
pub fn open_lake(cfg: &PipelineConfig, args: &LakeArgs) -> Result<Lake> {
    let lake = Lake::new(&cfg.lake)?;
    Ok(match &args.crash_at {
        Some(c) => c.install(lake),
        None => lake,
    })
}

/// Abort here when `--crash-at after-commit` asks for it.
pub fn after_commit(args: &LakeArgs) {
    if let Some(c) = &args.crash_at {
        c.reached(crash::Step::Committed);
    }
}

/// `lakestream sql` (DataFusion; only with the `sql` feature).
#[cfg(feature = "sql")]
pub async fn sql(args: SqlArgs) -> Result<()> {
    use crate::args::SqlFormat;
    let cfg = load_config(&args.lake)?;
    let at = args
        .at
        .iter()
        .map(|a| sql::parse_at(a))
        .collect::<Result<Vec<_>>>()?;
    let format = match args.format {
        SqlFormat::Table => sql::Format::Table,
        SqlFormat::Csv => sql::Format::Csv,
        SqlFormat::Json => sql::Format::Json,
    };
    sql::run(&Lake::new(&cfg.lake)?, &cfg, &args.query, &at, format).await
}

/// `lakestream sql` without the `sql` feature: say how to get it.
#[cfg(not(feature = "sql"))]
pub async fn sql(args: SqlArgs) -> Result<()> {
    let _ = load_config(&args.lake)?;
    anyhow::bail!(
        "this lakestream was built without SQL (DataFusion adds minutes to a build): \
         `cargo run --features sql --bin lakestream -- sql ...`, or `cargo install --path \
         crates/lakestream-cli --features sql`"
    )
}
