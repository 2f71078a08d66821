//! One dead letter as the Rust side sees it: where the record came from ([`Origin`]), its raw
//! bytes, why it was rejected and the table it was meant for. Each source builds its letters
//! through one constructor, so the columns a source fills (and the idempotency key it is written
//! under) are decided here, not at every call site; [`super::table`] turns letters into the
//! table's rows.

use base64::Engine as _;
use lakestream_formats::record::{RecordValue, SourceRecord};

/// One record that could not be ingested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Where it came from: fills the `topic` .. `line_number` columns and names the key that
    /// makes the write idempotent.
    pub origin: Origin,
    /// The value exactly as received, base64 (column `raw_base64`); `None` for a null Kafka value
    /// and for a letter that stands for a whole object.
    pub raw_base64: Option<String>,
    /// Why it was rejected and what to do about it (column `error`).
    pub reason: String,
    /// The table it was meant for, if known (column `target_table`).
    pub target_table: Option<String>,
}

/// Where a dead letter came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A Kafka record. Idempotent through its partition's watermark in the dead-letter table
    /// (see [`super::write`]).
    Kafka {
        /// Topic (column `topic`).
        topic: String,
        /// Partition (column `partition`).
        partition: i32,
        /// Offset (column `offset`).
        offset: i64,
        /// Kafka timestamp, epoch ms (column `kafka_timestamp`).
        timestamp_ms: Option<i64>,
    },
    /// A source object (an access-log object `s3://bucket/key`), whole or one of its lines.
    Object {
        /// The object (column `object_uri`).
        uri: String,
        /// 1-based line within the object; `None` for the whole object (column `line_number`).
        line_number: Option<i64>,
        /// The `txn` appId that makes the letter idempotent (version 1).
        app_id: String,
    },
    /// An input that names no object and cannot be used at all (a queue message whose body is
    /// not a notification: `sqs-message:<id>`).
    Input {
        /// The input's identity (column `object_uri`).
        id: String,
        /// The `txn` appId that makes the letter idempotent (version 1).
        app_id: String,
    },
    /// A row of a Delta table version (a row a refine job found late or too far in the future).
    DeltaRow {
        /// The source table.
        table: String,
        /// The source version that added the row (column `object_uri`: `delta:<table>@<version>`,
        /// [`delta_row_uri`]).
        version: u64,
        /// The `txn` appId that makes the letter idempotent (version = `version`).
        app_id: String,
    },
}

/// The `object_uri` of a letter for a row of `table` added in `version`.
pub fn delta_row_uri(table: &str, version: u64) -> String {
    format!("{}{version}", delta_row_uri_prefix(table))
}

/// What the `object_uri` of every letter for a row of `table` starts with.
pub fn delta_row_uri_prefix(table: &str) -> String {
    format!("delta:{table}@")
}

impl DeadLetter {
    /// A Kafka record that cannot be ingested: its value as received (a null value has none).
    pub fn kafka(record: &SourceRecord, target_table: Option<&str>, reason: String) -> Self {
        let raw_base64 = match &record.value {
            RecordValue::Bytes(b) => Some(encode_raw(b)),
            RecordValue::Invalid { raw, .. } => Some(raw.clone()),
            RecordValue::Null => None,
        };
        Self {
            origin: Origin::Kafka {
                topic: record.topic.clone(),
                partition: record.partition,
                offset: record.offset,
                timestamp_ms: record.timestamp_ms,
            },
            raw_base64,
            reason,
            target_table: target_table.map(str::to_string),
        }
    }

    /// One line (`line_number`, 1-based) of object `uri`, keyed by `app_id`.
    pub fn object_line(
        uri: String,
        line_number: i64,
        raw: &[u8],
        app_id: String,
        reason: String,
    ) -> Self {
        Self {
            origin: Origin::Object {
                uri,
                line_number: Some(line_number),
                app_id,
            },
            raw_base64: Some(encode_raw(raw)),
            reason,
            target_table: None,
        }
    }

    /// A whole object `uri` (missing, superseded, refused), keyed by `app_id`; no raw bytes.
    pub fn object(uri: String, app_id: String, reason: String) -> Self {
        Self {
            origin: Origin::Object {
                uri,
                line_number: None,
                app_id,
            },
            raw_base64: None,
            reason,
            target_table: None,
        }
    }

    /// An input `id` that cannot be used at all, with its bytes, keyed by `app_id`.
    pub fn input(id: String, raw: &[u8], app_id: String, reason: String) -> Self {
        Self {
            origin: Origin::Input { id, app_id },
            raw_base64: Some(encode_raw(raw)),
            reason,
            target_table: None,
        }
    }

    /// A row (`row`: its JSON) of `table` added in `version`, meant for `target_table`, keyed
    /// by `app_id`.
    pub fn delta_row(
        table: &str,
        version: u64,
        row: &[u8],
        target_table: &str,
        app_id: String,
        reason: String,
    ) -> Self {
        Self {
            origin: Origin::DeltaRow {
                table: table.to_string(),
                version,
                app_id,
            },
            raw_base64: Some(encode_raw(row)),
            reason,
            target_table: Some(target_table.to_string()),
        }
    }

    /// The same letter, meant for `table`.
    pub fn for_table(self, table: &str) -> Self {
        Self {
            target_table: Some(table.to_string()),
            ..self
        }
    }

    /// Column `topic`.
    pub fn topic(&self) -> Option<&str> {
        match &self.origin {
            Origin::Kafka { topic, .. } => Some(topic),
            _ => None,
        }
    }

    /// Column `partition`.
    pub fn partition(&self) -> Option<i32> {
        match &self.origin {
            Origin::Kafka { partition, .. } => Some(*partition),
            _ => None,
        }
    }

    /// Column `offset`.
    pub fn offset(&self) -> Option<i64> {
        match &self.origin {
            Origin::Kafka { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// Kafka timestamp in epoch ms (column `kafka_timestamp`, stored in µs).
    pub fn kafka_timestamp_ms(&self) -> Option<i64> {
        match &self.origin {
            Origin::Kafka { timestamp_ms, .. } => *timestamp_ms,
            _ => None,
        }
    }

    /// Column `object_uri`.
    pub fn object_uri(&self) -> Option<String> {
        match &self.origin {
            Origin::Kafka { .. } => None,
            Origin::Object { uri, .. } => Some(uri.clone()),
            Origin::Input { id, .. } => Some(id.clone()),
            Origin::DeltaRow { table, version, .. } => Some(delta_row_uri(table, *version)),
        }
    }

    /// Column `line_number`.
    pub fn line_number(&self) -> Option<i64> {
        match &self.origin {
            Origin::Object { line_number, .. } => *line_number,
            _ => None,
        }
    }
}

/// Raw bytes to base64 (column `raw_base64`).
fn encode_raw(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_origin_fills_its_own_columns() {
        let r = SourceRecord::new("orders", 2, 7, 1_000, b"{}");
        let k = DeadLetter::kafka(&r, Some("raw/order"), "bad".into());
        assert_eq!(
            (k.topic(), k.partition(), k.offset(), k.kafka_timestamp_ms()),
            (Some("orders"), Some(2), Some(7), Some(1_000))
        );
        assert_eq!((k.object_uri(), k.line_number()), (None, None));
        assert_eq!(k.raw_base64.as_deref(), Some("e30="));
        assert_eq!(k.target_table.as_deref(), Some("raw/order"));

        let null = SourceRecord {
            value: RecordValue::Null,
            ..r
        };
        assert_eq!(DeadLetter::kafka(&null, None, "x".into()).raw_base64, None);

        let l = DeadLetter::object_line(
            "s3://b/k".into(),
            3,
            b"{}",
            "p/s3/b/k#e#lines".into(),
            "x".into(),
        );
        assert_eq!(
            (l.topic(), l.object_uri().as_deref(), l.line_number()),
            (None, Some("s3://b/k"), Some(3))
        );

        let o = DeadLetter::object("s3://b/k".into(), "id".into(), "gone".into()).for_table("t");
        assert_eq!((o.raw_base64.as_deref(), o.line_number()), (None, None));
        assert_eq!(o.target_table.as_deref(), Some("t"));

        let d = DeadLetter::delta_row(
            "raw/order",
            12,
            b"{}",
            "curated/x",
            "a/late/12".into(),
            "late".into(),
        );
        assert_eq!(d.object_uri().as_deref(), Some("delta:raw/order@12"));

        let i = DeadLetter::input(
            "sqs-message:1".into(),
            b"x",
            "p/input/sqs-message:1".into(),
            "no".into(),
        );
        assert_eq!(i.object_uri().as_deref(), Some("sqs-message:1"));
    }
}
