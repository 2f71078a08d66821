//! A refine job that lags its source, for the maintenance-against-readers tests of the core and
//! of the maintenance function: alice's one membership, orders one a minute, the curated job run
//! to completion, and the order ids it wrote.

use crate::records::{self, Order};
use crate::{Error, Result, int64s};
use chrono::Utc;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;

/// Order `id` of alice at 2026-01-01T12:`id`:00Z, offset `id` of partition 0 of `orders`.
pub fn order(id: i64) -> SourceRecord {
    Order {
        id,
        owner: "alice",
        value: id,
        timestamp: &format!("\"2026-01-01T12:{id:02}:00Z\""),
    }
    .record(0, id, 0)
}

/// Alice's `gold` membership from 2026-01-01T12:00:00Z (offset 0 of `members`).
pub fn member() -> SourceRecord {
    records::member(0, 0, "alice", "gold", "2026-01-01T12:00:00Z", 0)
}

/// Run the `curated` job until nothing is new; the number of rows it joined.
pub async fn run_curated(cfg: &PipelineConfig, lake: &Lake) -> Result<usize> {
    let settings = (&cfg.commit).into();
    let ctx = RunContext::new(cfg, lake, &settings, Utc::now());
    let job = cfg
        .refine_job("curated")
        .ok_or_else(|| Error::Env("the config has no `curated` refine job".into()))?;
    Ok(run_job(&ctx, job, 1000).await?.joined())
}

/// The order ids in `curated/order`, sorted.
pub async fn curated_order_ids(lake: &Lake) -> Result<Vec<i64>> {
    let batch = read::read_table(lake, "curated/order", None).await?;
    let mut ids: Vec<i64> = int64s(&batch, "order_id")?.into_iter().flatten().collect();
    ids.sort();
    Ok(ids)
}
