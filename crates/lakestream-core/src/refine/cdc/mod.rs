//! The CDC-apply kind: a bronze table's changes applied per key into silver, SCD type 1 or 2,
//! with Delta's change data feed written in the same commit (ARCHITECTURE.md "CDC lakehouse").

use super::context::RunContext;
use super::report::RunReport;
use crate::error::{Error, Result};
use crate::table::TableHandle;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::cdc::CdcApply;

/// One apply run on the one commit loop.
pub(crate) async fn run_once(
    _ctx: &RunContext<'_>,
    cfg: &RefineJob,
    _apply: &CdcApply,
    _output: TableHandle,
) -> Result<RunReport> {
    Err(Error::Config(format!(
        "refine job `{}`: CDC apply is being built (issue 26)",
        cfg.job
    )))
}
