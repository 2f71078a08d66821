//! The seed pipeline's data (shared PIPELINE.md §1): six orders whose `order_value` and
//! `timestamp` keep changing, and their six owners whose membership level keeps changing.
//! Deterministic for a given seed, so demos, tests and benchmarks are reproducible.

use chrono::{DateTime, SecondsFormat, Utc};
use lakestream_formats::record::SourceRecord;

/// The six order owners.
pub const OWNERS: [&str; 6] = ["alice", "bob", "carol", "dave", "erin", "frank"];
/// Membership levels.
pub const LEVELS: [&str; 4] = ["bronze", "silver", "gold", "platinum"];

/// Generates seed records packed as Kafka records with realistic offsets.
#[derive(Debug)]
pub struct SeedGenerator {
    rng: fastrand::Rng,
    start: DateTime<Utc>,
    tick_ms: i64,
    /// Next offset per (topic index, partition).
    next_offset: Vec<Vec<i64>>,
    /// Partitions of the orders topic.
    pub order_partitions: i32,
    /// Partitions of the members topic.
    pub member_partitions: i32,
    produced: i64,
}

impl SeedGenerator {
    /// A generator starting at `start`, one event every `tick_ms`.
    pub fn new(seed: u64, start: DateTime<Utc>, tick_ms: i64) -> Self {
        let order_partitions = 3;
        let member_partitions = 2;
        Self {
            rng: fastrand::Rng::with_seed(seed),
            start,
            tick_ms,
            // Topics that have been running for a while: offsets far from zero.
            next_offset: vec![
                (0..order_partitions)
                    .map(|p| 1_204_000 + 1000 * p as i64)
                    .collect(),
                (0..member_partitions)
                    .map(|p| 88_100 + 100 * p as i64)
                    .collect(),
            ],
            order_partitions,
            member_partitions,
            produced: 0,
        }
    }

    fn next_ts(&mut self) -> DateTime<Utc> {
        self.produced += 1;
        self.start + chrono::Duration::milliseconds(self.produced * self.tick_ms)
    }

    fn take_offset(&mut self, topic: usize, partition: i32) -> i64 {
        let o = &mut self.next_offset[topic][partition as usize];
        let v = *o;
        *o += 1;
        v
    }

    /// One order update (topic `orders`), keyed to a partition by `order_id`.
    pub fn order(&mut self) -> SourceRecord {
        let order_id = self.rng.i32(1..=6);
        let owner = OWNERS[(order_id - 1) as usize];
        let value = self.rng.i32(1..=1000);
        let ts = self.next_ts();
        let json = format!(
            r#"{{"order_id":{order_id},"order_owner":"{owner}","order_value":{value},"timestamp":"{}"}}"#,
            ts.to_rfc3339_opts(SecondsFormat::Millis, true)
        );
        let partition = order_id % self.order_partitions;
        let offset = self.take_offset(0, partition);
        SourceRecord::new(
            "orders",
            partition,
            offset,
            ts.timestamp_millis(),
            json.as_bytes(),
        )
    }

    /// One membership change (topic `members`), keyed to a partition by owner.
    pub fn member(&mut self) -> SourceRecord {
        let i = self.rng.usize(0..OWNERS.len());
        let owner = OWNERS[i];
        let level = LEVELS[self.rng.usize(0..LEVELS.len())];
        let ts = self.next_ts();
        let json = format!(
            r#"{{"order_owner":"{owner}","membership":"{level}","timestamp":"{}"}}"#,
            ts.to_rfc3339_opts(SecondsFormat::Millis, true)
        );
        let partition = (i as i32) % self.member_partitions;
        let offset = self.take_offset(1, partition);
        SourceRecord::new(
            "members",
            partition,
            offset,
            ts.timestamp_millis(),
            json.as_bytes(),
        )
    }

    /// `n` records, about three orders for every membership change.
    pub fn records(&mut self, n: usize) -> Vec<SourceRecord> {
        (0..n)
            .map(|i| {
                if i % 4 == 3 {
                    self.member()
                } else {
                    self.order()
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_offsets_increase() {
        let start = DateTime::from_timestamp(1_650_000_000, 0).unwrap_or_default();
        let a = SeedGenerator::new(7, start, 1000).records(40);
        let b = SeedGenerator::new(7, start, 1000).records(40);
        assert_eq!(a, b);
        assert_eq!(a.iter().filter(|r| r.topic == "members").count(), 10);
        for p in 0..3 {
            let offs: Vec<i64> = a
                .iter()
                .filter(|r| r.topic == "orders" && r.partition == p)
                .map(|r| r.offset)
                .collect();
            assert!(offs.windows(2).all(|w| w[1] == w[0] + 1));
        }
    }
}
