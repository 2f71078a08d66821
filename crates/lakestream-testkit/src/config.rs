//! The example pipeline config (`lakestream.toml` at the repository root), the one every test
//! starts from, so the tests follow the example as it changes.

use crate::Result;
use lakestream_formats::config::PipelineConfig;

/// The text of the example config.
pub const EXAMPLE: &str = include_str!("../../../lakestream.toml");

/// The example config, parsed.
pub fn example_config() -> Result<PipelineConfig> {
    Ok(PipelineConfig::from_toml(EXAMPLE).map_err(lakestream_core::Error::from)?)
}

/// The example config with `extra` TOML (more topics, refine jobs, ...) appended.
pub fn example_config_with(extra: &str) -> Result<PipelineConfig> {
    Ok(PipelineConfig::from_toml(&format!("{EXAMPLE}\n{extra}"))
        .map_err(lakestream_core::Error::from)?)
}
