//! The CDC-apply kind: a bronze table's changes applied per key into silver, SCD type 1 or 2,
//! with Delta's change data feed written in the same commit (ARCHITECTURE.md "CDC lakehouse").
//!
//! - `changes`: what bronze gained since the silver `txn`, keys resolved, one change per
//!   (key, `__seq`), sorted by key then `__seq` (shared by both SCD types).
//! - `compacted`: deletes known only from their Kafka tombstone, placed in the key's order.
//! - `positions`: position resets and the check that positions never silently went back.
//! - `scd1`: SCD type 1 on the upsert's machinery, with truncates.
//! - [`feed`]: the change data feed rows of a commit's touched keys.
//! - `scd2`: SCD type 2 (history rebuilt per touched key).
//! - [`family`]: a family's tables found by listing, and their apply jobs.

pub(crate) mod changes;
mod compacted;
pub mod family;
pub mod feed;
pub(crate) mod positions;
pub(crate) mod scd1;
pub(crate) mod scd2;

use super::context::RunContext;
use super::report::RunReport;
use crate::error::Result;
use crate::table::TableHandle;
use lakestream_formats::config::ScdType;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::cdc::CdcApply;

/// One apply run on the one commit loop.
pub(crate) async fn run_once(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    apply: &CdcApply,
    output: TableHandle,
) -> Result<RunReport> {
    match apply.scd {
        ScdType::One => scd1::run_once(ctx, cfg, apply, output).await,
        ScdType::Two => scd2::run_once(ctx, cfg, apply, output).await,
    }
}
