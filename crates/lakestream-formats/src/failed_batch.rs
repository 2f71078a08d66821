//! A Kafka batch Lambda gave up on, as an event source mapping's on-failure destination keeps
//! it: a JSON document with `requestContext` (why and which invocation), `KafkaBatchInfo` and,
//! for S3 destinations, the whole invocation event in `payload` as an *escaped JSON string*
//! (a Kafka-topic destination carries it as an object; both are read). SQS and SNS destinations
//! get no `payload`: such a record names offsets but holds no data, and is refused with a
//! message saying so.

use crate::kafka::KafkaEvent;
use serde::Deserialize;

/// A failed batch with the event it failed on.
#[derive(Debug, Clone)]
pub struct FailedKafkaBatch {
    /// `requestContext.requestId`: the invocation that failed (unique per failed batch).
    pub request_id: String,
    /// `requestContext.condition`, e.g. `RetryAttemptsExhausted`.
    pub condition: Option<String>,
    /// `timestamp` of the failure record.
    pub timestamp: Option<String>,
    /// The event the function failed on.
    pub event: KafkaEvent,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    request_context: Option<RequestContext>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    payload: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestContext {
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    condition: Option<String>,
}

impl FailedKafkaBatch {
    /// Parse an on-failure record; the error says what is missing and why it matters.
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let raw: Raw = serde_json::from_slice(bytes)
            .map_err(|e| format!("not a Lambda on-failure record (invalid JSON: {e})"))?;
        let ctx = raw.request_context.ok_or(
            "not a Lambda on-failure record: no `requestContext` (expected the object an event \
             source mapping writes to its on-failure destination)",
        )?;
        let request_id = ctx
            .request_id
            .filter(|id| !id.is_empty())
            .ok_or("on-failure record without `requestContext.requestId`")?;
        let event = match raw.payload {
            None | Some(serde_json::Value::Null) => {
                return Err(format!(
                    "on-failure record {request_id} has no `payload`: only S3 and Kafka \
                     destinations keep the records (SQS/SNS keep offsets only; read those \
                     offsets from Kafka before the topic's retention drops them)"
                ));
            }
            Some(serde_json::Value::String(text)) => KafkaEvent::from_json(text.as_bytes()),
            Some(value) => serde_json::from_value(value),
        }
        .map_err(|e| {
            format!("on-failure record {request_id}: `payload` is not a Kafka event: {e}")
        })?;
        Ok(Self {
            request_id,
            condition: ctx.condition,
            timestamp: raw.timestamp,
            event,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S3_RECORD: &str = include_str!("../../../events/msk-failed-batch-s3.json");

    #[test]
    fn s3_destination_record_carries_the_event_as_an_escaped_string() {
        let f = FailedKafkaBatch::from_json(S3_RECORD.as_bytes()).expect("parse");
        assert_eq!(f.request_id, "316aa6d0-8154-4b5e-9af7-85d5f4a6bc81");
        assert_eq!(f.condition.as_deref(), Some("RetryAttemptsExhausted"));
        let records = f.event.into_source_records();
        assert_eq!(records.len(), 6);
        assert_eq!(
            records
                .iter()
                .map(|r| (r.partition, r.offset))
                .collect::<Vec<_>>(),
            [
                (0, 1204310),
                (0, 1204311),
                (1, 1205207),
                (1, 1205208),
                (2, 1206118),
                (2, 1206119)
            ]
        );
    }

    #[test]
    fn kafka_destination_record_carries_the_event_as_an_object() {
        let mut v: serde_json::Value = serde_json::from_str(S3_RECORD).expect("json");
        let text = v["payload"].as_str().expect("string").to_string();
        v["payload"] = serde_json::from_str(&text).expect("event");
        let f = FailedKafkaBatch::from_json(v.to_string().as_bytes()).expect("parse");
        assert_eq!(f.event.len(), 6);
    }

    #[test]
    fn a_partition_beyond_32_bits_is_refused_with_the_reason() {
        let mut v: serde_json::Value = serde_json::from_str(S3_RECORD).expect("json");
        let text = v["payload"].as_str().expect("string").to_string();
        let mut event: serde_json::Value = serde_json::from_str(&text).expect("event");
        let records = event["records"].as_object_mut().expect("records");
        let first = records.values_mut().next().expect("a partition");
        first[0]["partition"] = serde_json::json!(2_147_483_648i64);
        v["payload"] = serde_json::Value::String(event.to_string());
        let e = FailedKafkaBatch::from_json(v.to_string().as_bytes()).expect_err("partition");
        assert!(
            e.contains("`payload` is not a Kafka event") && e.contains("2147483648"),
            "{e}"
        );
    }

    #[test]
    fn metadata_only_and_foreign_documents_are_refused_with_the_reason() {
        let mut v: serde_json::Value = serde_json::from_str(S3_RECORD).expect("json");
        v.as_object_mut().expect("object").remove("payload");
        let e = FailedKafkaBatch::from_json(v.to_string().as_bytes()).expect_err("no payload");
        assert!(
            e.contains("only S3 and Kafka destinations keep the records"),
            "{e}"
        );
        let e = FailedKafkaBatch::from_json(br#"{"records":{}}"#).expect_err("an MSK event");
        assert!(e.contains("no `requestContext`"), "{e}");
        let e = FailedKafkaBatch::from_json(b"{").expect_err("json");
        assert!(e.contains("invalid JSON"), "{e}");
        v["payload"] = serde_json::Value::String("[1,2]".into());
        let e = FailedKafkaBatch::from_json(v.to_string().as_bytes()).expect_err("payload");
        assert!(e.contains("`payload` is not a Kafka event"), "{e}");
    }
}
