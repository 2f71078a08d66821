//! A tolerant MSK / self-managed Kafka event. `aws_lambda_events::kafka` rejects events AWS
//! does send (no `headers`, `partition` as a string, timestamp `-1`) and panics on a fractional
//! timestamp, so we own these types: unknown fields are ignored, numbers may be strings, and a
//! value that is not valid base64 becomes a dead letter instead of an error.

use crate::record::{RecordValue, SourceRecord};
use base64::Engine as _;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// The event Lambda delivers for an MSK or self-managed Kafka trigger.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaEvent {
    /// `aws:kafka` or a self-managed spelling.
    #[serde(default)]
    pub event_source: Option<String>,
    /// Cluster ARN (MSK only).
    #[serde(default)]
    pub event_source_arn: Option<String>,
    /// Broker list.
    #[serde(default)]
    pub bootstrap_servers: Option<String>,
    /// `"<topic>-<partition>"` -> records. Never split the key: topics may contain `-`.
    #[serde(default)]
    pub records: BTreeMap<String, Vec<KafkaRecord>>,
}

/// One record as delivered.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaRecord {
    /// Topic.
    pub topic: String,
    /// Partition (number or numeric string; Kafka's are 32-bit, a larger one is an error).
    #[serde(deserialize_with = "lenient_partition")]
    pub partition: i32,
    /// Offset (number or numeric string).
    #[serde(deserialize_with = "lenient_i64")]
    pub offset: i64,
    /// Epoch ms; `-1` or absent means none.
    #[serde(default, deserialize_with = "lenient_opt_i64")]
    pub timestamp: Option<i64>,
    /// `CREATE_TIME` or `LOG_APPEND_TIME`.
    #[serde(default)]
    pub timestamp_type: Option<String>,
    /// Base64 key, may be absent.
    #[serde(default)]
    pub key: Option<String>,
    /// Base64 value; absent or null for a tombstone.
    #[serde(default)]
    pub value: Option<String>,
    /// Headers as delivered (kept opaque; not stored).
    #[serde(default)]
    pub headers: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrText {
    Int(i64),
    Float(f64),
    Text(String),
}

fn to_i64(v: NumOrText) -> Option<i64> {
    match v {
        NumOrText::Int(i) => Some(i),
        NumOrText::Float(f) if f.is_finite() => Some(f.trunc() as i64),
        NumOrText::Float(_) => None,
        NumOrText::Text(s) => s.trim().parse().ok(),
    }
}

fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    to_i64(NumOrText::deserialize(d)?)
        .ok_or_else(|| serde::de::Error::custom("expected an integer or a numeric string"))
}

fn lenient_partition<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    let p = lenient_i64(d)?;
    i32::try_from(p).map_err(|_| {
        serde::de::Error::custom(format!(
            "partition {p} is not a Kafka partition (they are 32-bit numbers)"
        ))
    })
}

fn lenient_opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Ok(Option::<NumOrText>::deserialize(d)?
        .and_then(to_i64)
        .filter(|t| *t >= 0))
}

impl KafkaEvent {
    /// Parse an event from JSON; the error says which part is malformed.
    pub fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.values().map(Vec::len).sum()
    }

    /// True when the event holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Unwrap into core records, in (topic, partition, offset) order.
    pub fn into_source_records(self) -> Vec<SourceRecord> {
        let mut out: Vec<SourceRecord> = self
            .records
            .into_values()
            .flatten()
            .map(KafkaRecord::into_source_record)
            .collect();
        out.sort_by(|a, b| {
            (&a.topic, a.partition, a.offset).cmp(&(&b.topic, b.partition, b.offset))
        });
        out
    }
}

impl KafkaRecord {
    /// Unwrap the base64 value and key; one that is not base64 is kept verbatim as `Invalid`.
    pub fn into_source_record(self) -> SourceRecord {
        SourceRecord {
            topic: self.topic,
            partition: self.partition,
            offset: self.offset,
            timestamp_ms: self.timestamp,
            value: unbase64(self.value, "value"),
            key: unbase64(self.key, "key"),
        }
    }
}

fn unbase64(text: Option<String>, what: &str) -> RecordValue {
    match text {
        None => RecordValue::Null,
        Some(v) => match base64::engine::general_purpose::STANDARD.decode(v.as_bytes()) {
            Ok(bytes) => RecordValue::Bytes(bytes),
            Err(e) => RecordValue::Invalid {
                reason: format!("{what} is not valid base64 ({e})"),
                raw: v,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_example_and_traps() -> Result<(), Box<dyn std::error::Error>> {
        let ev = KafkaEvent::from_json(include_bytes!("../../../events/msk-aws-example.json"))?;
        assert_eq!(ev.len(), 1);
        let r = ev.into_source_records();
        assert_eq!(r[0].topic, "mytopic");
        assert_eq!(r[0].offset, 15);
        assert_eq!(r[0].timestamp_ms, Some(1545084650987));
        assert_eq!(
            r[0].value,
            RecordValue::Bytes(b"Hello, this is a test.".to_vec())
        );

        // No headers, no key, partition as text, timestamp -1, fractional timestamp, topic
        // with '-', null value, bad base64.
        let traps = br#"{"eventSource":"SelfManagedKafka","records":{"my-topic-0":[
          {"topic":"my-topic","partition":"0","offset":"7","timestamp":-1,"value":"e30="},
          {"topic":"my-topic","partition":0,"offset":8,"timestamp":1.5e12,"value":null},
          {"topic":"my-topic","partition":0,"offset":9,"value":"%%%"}]}}"#;
        let r = KafkaEvent::from_json(traps)?.into_source_records();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].partition, r[0].offset, r[0].timestamp_ms),
            (0, 7, None)
        );
        assert_eq!(r[0].value, RecordValue::Bytes(b"{}".to_vec()));
        assert_eq!(r[1].timestamp_ms, Some(1_500_000_000_000));
        assert_eq!(r[1].value, RecordValue::Null);
        assert!(matches!(&r[2].value, RecordValue::Invalid { raw, .. } if raw == "%%%"));
        Ok(())
    }

    /// Kafka partitions are 32-bit: a larger number is an error naming it, not a partition
    /// silently saturated to `i32::MAX` (two of them would share one `txn` appId).
    #[test]
    fn a_partition_beyond_32_bits_is_an_error_not_a_saturated_number() {
        for p in [
            "2147483648",
            "\"2147483649\"",
            "-2147483649",
            "4294967296.0",
        ] {
            let ev =
                format!(r#"{{"records":{{"t-0":[{{"topic":"t","partition":{p},"offset":1}}]}}}}"#);
            let e = KafkaEvent::from_json(ev.as_bytes())
                .map(|e| e.into_source_records())
                .expect_err(p)
                .to_string();
            assert!(e.contains("partition") && e.contains("32-bit"), "{e}");
        }
        let ev = br#"{"records":{"t-0":[{"topic":"t","partition":2147483647,"offset":1}]}}"#;
        let r = KafkaEvent::from_json(ev).map(KafkaEvent::into_source_records);
        assert_eq!(r.ok().map(|r| r[0].partition), Some(i32::MAX));
    }

    #[test]
    fn malformed_event_is_an_error_not_a_panic() {
        assert!(
            KafkaEvent::from_json(
                br#"{"records":{"t-0":[{"topic":"t","partition":"x","offset":1}]}}"#
            )
            .is_err()
        );
        assert!(KafkaEvent::from_json(b"[1,2]").is_err());
        assert!(KafkaEvent::from_json(b"{}").is_ok_and(|e| e.is_empty()));
    }
}
