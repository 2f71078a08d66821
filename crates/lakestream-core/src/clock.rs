//! Injected time, so processing-time partitions, `lastUpdated` and ingestion timestamps are
//! testable.

use chrono::{DateTime, Utc};
use std::sync::Mutex;

/// A source of "now".
pub trait Clock: Send + Sync {
    /// The current instant, UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that returns a set instant until moved; for tests and reproducible demos.
#[derive(Debug)]
pub struct FixedClock(Mutex<DateTime<Utc>>);

impl FixedClock {
    /// A clock stopped at `at`.
    pub fn new(at: DateTime<Utc>) -> Self {
        Self(Mutex::new(at))
    }

    /// Move the clock to `at`.
    pub fn set(&self, at: DateTime<Utc>) {
        if let Ok(mut guard) = self.0.lock() {
            *guard = at;
        }
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
            .lock()
            .map(|g| *g)
            .unwrap_or_else(|p| *p.into_inner())
    }
}
