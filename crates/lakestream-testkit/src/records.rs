//! Kafka records of the example config's topics (`orders` into `raw/order`, `members` into
//! `raw/member`), built in one place: every test that ingests orders or memberships builds them
//! here, field for field as the example's columns name them, instead of formatting the JSON by
//! hand.

use lakestream_formats::record::SourceRecord;

/// 2022-04-04T10:15:30Z: the event time of [`order`] (its `timestamp` field).
pub const ORDER_TIME: &str = "2022-04-04T10:15:30Z";

/// [`ORDER_TIME`] in Unix milliseconds: the Kafka timestamp of [`order`]'s records.
pub const ORDER_KAFKA_TS: i64 = 1_649_067_330_000;

/// An order, the value of an `orders` record: the example's `orders` columns.
#[derive(Debug, Clone, Copy)]
pub struct Order<'a> {
    /// `order_id`.
    pub id: i64,
    /// `order_owner` (the join key of the example's refine job).
    pub owner: &'a str,
    /// `order_value`.
    pub value: i64,
    /// `timestamp`, as JSON: a quoted time (`"\"2026-01-01T12:00:00Z\""`) or epoch milliseconds.
    pub timestamp: &'a str,
}

impl Order<'_> {
    /// The order as the JSON object a producer sends.
    pub fn json(&self) -> String {
        let Order {
            id,
            owner,
            value,
            timestamp,
        } = self;
        format!(
            r#"{{"order_id":{id},"order_owner":"{owner}","order_value":{value},"timestamp":{timestamp}}}"#
        )
    }

    /// This order as offset `offset` of partition `partition` of `orders`, with Kafka
    /// timestamp `kafka_ts` (Unix ms; negative for none).
    pub fn record(&self, partition: i32, offset: i64, kafka_ts: i64) -> SourceRecord {
        SourceRecord::new(
            "orders",
            partition,
            offset,
            kafka_ts,
            self.json().as_bytes(),
        )
    }
}

/// Order `id` of `owner` worth `value` at [`ORDER_TIME`], as offset `offset` of partition
/// `partition` of `orders` (Kafka timestamp [`ORDER_KAFKA_TS`]).
pub fn order(partition: i32, offset: i64, id: i64, owner: &str, value: i64) -> SourceRecord {
    Order {
        id,
        owner,
        value,
        timestamp: &format!("\"{ORDER_TIME}\""),
    }
    .record(partition, offset, ORDER_KAFKA_TS)
}

/// `owner`'s membership `level` from `timestamp` (text, e.g. `2026-01-01T12:00:00Z`) as offset
/// `offset` of partition `partition` of `members`, with Kafka timestamp `kafka_ts`.
pub fn member(
    partition: i32,
    offset: i64,
    owner: &str,
    level: &str,
    timestamp: &str,
    kafka_ts: i64,
) -> SourceRecord {
    let json =
        format!(r#"{{"order_owner":"{owner}","membership":"{level}","timestamp":"{timestamp}"}}"#);
    SourceRecord::new("members", partition, offset, kafka_ts, json.as_bytes())
}

/// The `(partition, offset)` pairs of `parts` (offset ranges per Kafka partition), sorted: what
/// a table holds once the records built for them landed exactly once.
pub fn partition_offsets(parts: &[(i32, std::ops::Range<i64>)]) -> Vec<(i32, i64)> {
    let mut v: Vec<(i32, i64)> = parts
        .iter()
        .flat_map(|(p, r)| r.clone().map(move |o| (*p, o)))
        .collect();
    v.sort();
    v
}
