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

/// The row columns of the CDC topic most tests use (TOML inline tables, one a line): `id` (the
/// key), `v` and `ts` (the order).
pub const CDC_ROW: &str = r#"  { name = "id", type = "int64", nullable = false },
  { name = "v", type = "string" },
  { name = "ts", type = "timestamp", nullable = false },
"#;

/// The change-type column of a CDC topic (`I`, `U`, `D`), after its row columns.
pub const CDC_OP: &str = "  { name = \"op\", type = \"string\" },\n";

/// Topic `cdc` into `raw/cdc` with `columns` (TOML inline tables, one a line) and `options`
/// (more `key = value` lines of the topic, e.g. `schema_mode = "merge"`; empty for none).
pub fn cdc_topic(columns: &str, options: &str) -> String {
    format!(
        "\n[[topics]]\ntopic = \"cdc\"\ntable = \"raw/cdc\"\n{options}columns = [\n{columns}]\n"
    )
}

/// Refine job `job`: the latest-wins upsert of `raw/cdc` into `output`, keyed by `id`, ordered
/// by `ts`; with `deletes`, a change whose `op` is `D` deletes its key.
pub fn cdc_upsert(job: &str, output: &str, deletes: bool) -> String {
    let op = if deletes {
        "op = { column = \"op\", delete = [\"D\"] }\n"
    } else {
        ""
    };
    format!(
        "\n[[refine]]\njob = \"{job}\"\noutput = \"{output}\"\n[refine.upsert]\n\
         source = \"raw/cdc\"\nkey = [\"id\"]\norder_by = [\"ts\"]\n{op}"
    )
}

/// The CDC pipeline most tests share: topic `cdc` ([`CDC_ROW`] and [`CDC_OP`]) and its upsert
/// `job` into `silver/cdc`, deletes included.
pub fn cdc_config(job: &str) -> String {
    cdc_topic(&format!("{CDC_ROW}{CDC_OP}"), "") + &cdc_upsert(job, "silver/cdc", true)
}
