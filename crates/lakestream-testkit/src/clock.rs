//! Stopped clocks at the instants the tests and their fixtures are written for, so a test's
//! partition dates, retention windows and late-row checks do not depend on when it runs.

use chrono::{DateTime, Utc};
use lakestream_core::FixedClock;
use std::sync::Arc;

/// 2025-11-29T07:06:40Z (Unix seconds): the ingestion time of the Kafka tests.
pub const INGEST_TIME: i64 = 1_764_400_000;

/// 2026-11-29T08:00:00Z (Unix seconds): the hour of the access-log fixtures.
pub const LOG_TIME: i64 = 1_795_939_200;

/// The instant `secs` Unix seconds, or the epoch for an out-of-range value.
fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap_or_default()
}

/// [`INGEST_TIME`] as a time.
pub fn ingest_time() -> DateTime<Utc> {
    at(INGEST_TIME)
}

/// [`LOG_TIME`] as a time.
pub fn log_time() -> DateTime<Utc> {
    at(LOG_TIME)
}

/// A clock stopped at `time`, shared the way the ingestors take it.
pub fn fixed_clock(time: DateTime<Utc>) -> Arc<FixedClock> {
    Arc::new(FixedClock::new(time))
}
