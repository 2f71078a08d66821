//! Freshness targets (`freshness = "60s" | "5m" | "15m"` on a `[[topics]]` entry, a `[[cdc]]`
//! family or one of its tables, and a `[[refine]]` job): how old a record may be when it is
//! readable in the table, and the cadence that follows from it.
//!
//! A target `T` is split into a margin for the work itself (`max(10 s, T / 6)`) and time
//! spent waiting, which is what makes a table cheaper: every commit costs the same requests
//! however many records it holds, so the longer a table may wait, the fewer commits it makes.
//! - A topic's table waits in the MSK batching window: `min(300 s, T - margin)` (300 s is
//!   MSK's maximum). Waiting there costs nothing.
//! - A refine job waits after its sources' changes arrive: it applies once its oldest
//!   unapplied change is older than its *hold*, `T - margin - (how late its sources' changes
//!   arrive by design)`, at least 0. Changes that arrive meanwhile coalesce into that one run.
//!   A topic's table's changes arrive within its window; a refine job's output's within its
//!   target less its margin; other tables' (S3 notifications) at once.
//!
//! | target | margin | MSK window | hold of a job on a topic of the same target |
//! |---|---|---|---|
//! | 60 s (default) | 10 s | 50 s | 0 |
//! | 5 m | 50 s | 250 s | 0 |
//! | 15 m | 150 s | 300 s | 450 s |
//!
//! The margin was measured: at 70 busy tables and a 40 s window the bench's silver p99 was
//! 41.6 s (max 42.4 s), the work itself 2.4 s at most; 10 s leaves room for S3's and
//! Lambda's latencies on AWS.

use serde::Deserialize;
use std::time::Duration;

/// A freshness target: the longest a record should wait until it is readable in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Freshness(Duration);

/// The target of a table or job whose config does not say (`60s`).
pub const DEFAULT_FRESHNESS: Freshness = Freshness(Duration::from_secs(60));

/// The shortest target: below it the margin leaves MSK no window to batch in.
pub const MIN_FRESHNESS: Duration = Duration::from_secs(30);

/// The longest target (a day): a change older than that is an outage, not a cadence.
pub const MAX_FRESHNESS: Duration = Duration::from_secs(86_400);

/// MSK's largest batching window (`MaximumBatchingWindowInSeconds`).
pub const MAX_BATCHING_WINDOW: Duration = Duration::from_secs(300);

impl Default for Freshness {
    fn default() -> Self {
        DEFAULT_FRESHNESS
    }
}

impl Freshness {
    /// Parse `"60s"`, `"5m"`, `"15m"`, `"1h"` (whole seconds, 30 s to 24 h).
    pub fn parse(text: &str) -> Result<Self, String> {
        let d = humantime::parse_duration(text.trim()).map_err(|e| {
            format!(
                "freshness \"{text}\" is not a duration ({e}); use e.g. \"60s\", \"5m\", \"15m\""
            )
        })?;
        if d.subsec_nanos() != 0 || d < MIN_FRESHNESS || d > MAX_FRESHNESS {
            return Err(format!(
                "freshness \"{text}\": give whole seconds from 30s to 24h, e.g. \"60s\", \"5m\", \"15m\""
            ));
        }
        Ok(Self(d))
    }

    /// A target of `d` (clamped to 30 s ..= 24 h; tests and the bench).
    pub fn of(d: Duration) -> Self {
        Self(d.clamp(MIN_FRESHNESS, MAX_FRESHNESS))
    }

    /// The target.
    pub fn target(self) -> Duration {
        self.0
    }

    /// Kept for the work itself (ingest, apply, the notice between them): `max(10 s, T / 6)`.
    pub fn margin(self) -> Duration {
        (self.0 / 6).max(Duration::from_secs(10))
    }

    /// The MSK batching window of a topic with this target: `min(300 s, T - margin)`, whole
    /// seconds.
    pub fn batching_window(self) -> Duration {
        self.0
            .saturating_sub(self.margin())
            .min(MAX_BATCHING_WINDOW)
    }

    /// How late, by design, a change reaches a refine job's output with this target: the
    /// target less its margin (what the next job's hold accounts for).
    pub fn arrives_within(self) -> Duration {
        self.0.saturating_sub(self.margin())
    }

    /// A refine job's hold: its oldest unapplied change waits this long before the job applies
    /// it, given that its sources' changes arrive up to `arrives_within` late.
    pub fn hold(self, arrives_within: Duration) -> Duration {
        self.0
            .saturating_sub(self.margin())
            .saturating_sub(arrives_within)
    }

    /// As written in the config (`"60s"`, `"90s"`, `"5m"`, `"15m"`, `"1h"`).
    pub fn label(self) -> String {
        let s = self.0.as_secs();
        match s {
            s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
            s if s >= 120 && s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        }
    }
}

impl<'de> Deserialize<'de> for Freshness {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(text: &str) -> Freshness {
        Freshness::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_documented_table_holds() {
        let secs = |d: Duration| d.as_secs();
        // (target, margin, window, hold of a job on a topic of the same target)
        for (t, margin, window, hold) in [
            ("60s", 10, 50, 0),
            ("5m", 50, 250, 0),
            ("15m", 150, 300, 450),
        ] {
            let x = f(t);
            assert_eq!(secs(x.margin()), margin, "{t}");
            assert_eq!(secs(x.batching_window()), window, "{t}");
            assert_eq!(secs(x.hold(x.batching_window())), hold, "{t}");
            assert_eq!(x.label(), t);
        }
        assert_eq!(DEFAULT_FRESHNESS, f("1m"));
    }

    #[test]
    fn a_chain_of_jobs_at_15m_holds_only_where_there_is_room() {
        let t = f("15m");
        // raw (topic, 300 s window) -> curated (holds 450 s) -> processed (its source's
        // changes arrive up to 750 s late: no hold).
        assert_eq!(t.hold(t.batching_window()).as_secs(), 450);
        assert_eq!(t.hold(t.arrives_within()).as_secs(), 0);
        // A 60 s job on a 15 m source could never meet its target: nothing to hold.
        assert_eq!(f("60s").hold(t.batching_window()), Duration::ZERO);
    }

    /// The template's `Freshness` mapping (the MSK windows it deploys) is this module's.
    #[test]
    fn the_template_deploys_these_windows() {
        let template = include_str!("../../../../template.yaml");
        for t in ["60s", "5m", "15m"] {
            let row = format!(
                "\"{t}\": {{BatchingWindow: {}}}",
                f(t).batching_window().as_secs()
            );
            assert!(template.contains(&row), "template.yaml lacks {row}");
        }
        assert!(template.contains("AllowedValues: [\"60s\", \"5m\", \"15m\"]"));
    }

    #[test]
    fn bad_targets_say_how_to_write_one() {
        for bad in ["", "soon", "10s", "25h", "90.5s", "-5m"] {
            let e = Freshness::parse(bad).err().unwrap_or_default();
            assert!(e.contains("\"15m\""), "{bad}: {e}");
        }
        assert_eq!(f(" 2h ").target(), Duration::from_secs(7200));
    }
}
