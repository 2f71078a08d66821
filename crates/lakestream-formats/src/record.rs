//! Source records as the core sees them: already unwrapped from whatever envelope the trigger
//! used (MSK event, CLI file, test), but not yet decoded.

/// The value bytes of a source record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordValue {
    /// The decoded value bytes.
    Bytes(Vec<u8>),
    /// The value was absent or null (a Kafka tombstone).
    Null,
    /// The value could not even be unwrapped (e.g. invalid base64); kept verbatim.
    Invalid {
        /// The value exactly as it arrived.
        raw: String,
        /// Why it could not be unwrapped.
        reason: String,
    },
}

/// One Kafka record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    /// Topic name as carried by the record (never parsed from the batch map key).
    pub topic: String,
    /// Kafka partition.
    pub partition: i32,
    /// Offset within the partition.
    pub offset: i64,
    /// Kafka timestamp in epoch milliseconds; `None` when Kafka sent `-1` or nothing.
    pub timestamp_ms: Option<i64>,
    /// The value.
    pub value: RecordValue,
    /// The record key (`Null` when absent). Only CDC (Debezium) topics read it.
    pub key: RecordValue,
}

impl SourceRecord {
    /// A record with a JSON (or any bytes) value; convenient for tests and generators.
    pub fn new(topic: &str, partition: i32, offset: i64, timestamp_ms: i64, value: &[u8]) -> Self {
        Self {
            topic: topic.to_string(),
            partition,
            offset,
            timestamp_ms: (timestamp_ms >= 0).then_some(timestamp_ms),
            value: RecordValue::Bytes(value.to_vec()),
            key: RecordValue::Null,
        }
    }

    /// The same record with key bytes `key`.
    pub fn with_key(mut self, key: &[u8]) -> Self {
        self.key = RecordValue::Bytes(key.to_vec());
        self
    }

    /// Size of the value in bytes (0 when absent).
    pub fn value_len(&self) -> usize {
        match &self.value {
            RecordValue::Bytes(b) => b.len(),
            RecordValue::Invalid { raw, .. } => raw.len(),
            RecordValue::Null => 0,
        }
    }
}

/// The `txn` appId under which a pipeline records the highest offset it committed for one
/// Kafka partition: `<pipeline>/<topic>/<partition>`.
pub fn app_id(pipeline: &str, topic: &str, partition: i32) -> String {
    format!("{pipeline}/{topic}/{partition}")
}
