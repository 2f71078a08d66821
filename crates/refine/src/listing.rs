//! The `[[cdc]]` families' tables a warm refine process knows: the listing is kept for the
//! settings' `listing_ttl` (a notice names its table, so a new table runs at once). Listing
//! again, the folders the last listing found to be tables are not asked again whether they are
//! (one LIST each, a third of the LISTs of `make bench-fresh` at 15 minutes when every table
//! was asked every time), except every [`FULL_LISTING_EVERY`]: a folder that stopped being a
//! table (its `_delta_log/` removed, other objects left) drops out then; a folder that is gone
//! drops out at once.

use chrono::{DateTime, Utc};
use lakestream_core::Lake;
use lakestream_core::refine::cdc::family::all_jobs_after;
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::refine::RefineJob;
use std::sync::Mutex;

/// How often a warm process asks every family folder again whether it is a table.
pub const FULL_LISTING_EVERY: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// The listing a process keeps (none before its first).
#[derive(Default)]
pub struct Listing(Mutex<Option<Listed>>);

struct Listed {
    /// When it was made.
    at: DateTime<Utc>,
    /// When every folder was last asked whether it is a table.
    full_at: DateTime<Utc>,
    /// The jobs it found (the configured ones first).
    jobs: Vec<RefineJob>,
}

impl Listing {
    /// The configured jobs plus every family table's apply job, listed when the kept listing
    /// is older than `ttl` at `now`.
    pub async fn jobs(
        &self,
        lake: &Lake,
        config: &PipelineConfig,
        ttl: chrono::TimeDelta,
        now: DateTime<Utc>,
    ) -> lakestream_core::Result<Vec<RefineJob>> {
        let (before, full_at) = match self.0.lock().as_deref() {
            Ok(Some(l)) if now - l.at < ttl => return Ok(l.jobs.clone()),
            Ok(Some(l)) if now - l.full_at < FULL_LISTING_EVERY => (l.jobs.clone(), l.full_at),
            _ => (Vec::new(), now),
        };
        let jobs = all_jobs_after(lake, config, &before).await?;
        if let Ok(mut held) = self.0.lock() {
            *held = Some(Listed {
                at: now,
                full_at,
                jobs: jobs.clone(),
            });
        }
        Ok(jobs)
    }
}
