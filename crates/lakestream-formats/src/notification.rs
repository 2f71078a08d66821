//! S3 "object created" notifications as they arrive in SQS message bodies: a direct S3 event
//! (possibly several records), an SNS envelope around one, or an EventBridge "Object Created"
//! event; and the `s3:TestEvent` that S3 sends when notifications are configured.

use serde_json::Value;

/// An object named by a notification.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogObject {
    /// Bucket holding the log object.
    pub bucket: String,
    /// Object key (already URL-decoded).
    pub key: String,
    /// Key to try when `key` does not exist (sources that may or may not URL-encode keys).
    pub alt_key: Option<String>,
    /// ETag from the notification, if given, without quotes: the version to read (`If-Match`).
    /// The idempotency key uses the ETag the read answered with, not this one.
    pub etag: Option<String>,
    /// When S3 says the object was created (the record's `eventTime`, EventBridge `time`):
    /// orders plain CDC files (`source = "files"`) that carry no commit time. Not part of the
    /// object's identity for ingestion (the idempotency key is the key and ETag read).
    pub event_time: Option<chrono::DateTime<chrono::Utc>>,
}

impl LogObject {
    /// `s3://bucket/key`.
    pub fn uri(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }

    /// The `txn` appId that marks this object (this exact version, by ETag) as committed:
    /// `<pipeline>/s3/<bucket>/<key>#<etag>` (ETag without quotes). The ingestor builds it from
    /// the object as read (the key that existed, the ETag of the response), never from a
    /// notification's text, which anyone who can send to the queue writes.
    pub fn app_id(&self, pipeline: &str) -> String {
        format!(
            "{pipeline}/s3/{}/{}#{}",
            self.bucket,
            self.key,
            self.etag.as_deref().map_or("", unquote)
        )
    }
}

/// An ETag without the quotes S3 puts around it in headers (`"abc"` -> `abc`).
pub fn unquote(etag: &str) -> &str {
    etag.trim_matches('"')
}

/// The notification's ETag, unquoted; S3 and EventBridge send one with every "object created"
/// event, so a notification without one is not from S3 and is refused with `why`.
fn notified_etag(etag: Option<&str>, why: &str) -> Result<String, String> {
    match etag.map(unquote) {
        Some(e) if !e.is_empty() => Ok(e.to_string()),
        _ => Err(format!(
            "{why}: an \"object created\" notification without an ETag; S3 always sends one, so \
             this one is not from S3 (forged or hand-written): dead-lettered, nothing was read"
        )),
    }
}

/// What a message body holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    /// Objects to ingest.
    Objects(Vec<LogObject>),
    /// S3's configuration test message: acknowledge and skip.
    TestEvent,
    /// A well-formed notification with nothing to ingest (e.g. `ObjectRemoved`); the reason.
    Ignored(String),
}

/// Parse an SQS message body. `Err` carries the reason the body is unusable.
pub fn parse_body(body: &str) -> Result<Notification, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("body is not JSON: {e}"))?;
    parse_value(&v, 0)
}

fn parse_value(v: &Value, depth: u8) -> Result<Notification, String> {
    if v.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        return Ok(Notification::TestEvent);
    }
    if let Some(records) = v.get("Records").and_then(Value::as_array) {
        return s3_records(records);
    }
    if v.get("Type").and_then(Value::as_str) == Some("Notification") && depth == 0 {
        let msg = v
            .get("Message")
            .and_then(Value::as_str)
            .ok_or("SNS envelope without a Message string")?;
        let inner: Value =
            serde_json::from_str(msg).map_err(|e| format!("SNS Message is not JSON: {e}"))?;
        return parse_value(&inner, depth + 1);
    }
    if v.get("source").and_then(Value::as_str) == Some("aws.s3") {
        let detail_type = v.get("detail-type").and_then(Value::as_str).unwrap_or("");
        if detail_type != "Object Created" {
            return Ok(Notification::Ignored(format!(
                "EventBridge `{detail_type}`"
            )));
        }
        let d = v.get("detail").ok_or("EventBridge event without detail")?;
        let bucket =
            str_at(d, &["bucket", "name"]).ok_or("EventBridge detail.bucket.name missing")?;
        let raw_key =
            str_at(d, &["object", "key"]).ok_or("EventBridge detail.object.key missing")?;
        // Whether EventBridge URL-encodes keys is unverified: try the key as given, then decoded.
        let decoded = decode_key(raw_key);
        return Ok(Notification::Objects(vec![LogObject {
            bucket: bucket.to_string(),
            key: raw_key.to_string(),
            alt_key: (decoded != raw_key).then_some(decoded),
            etag: Some(notified_etag(
                str_at(d, &["object", "etag"]),
                "EventBridge detail.object.etag missing",
            )?),
            event_time: str_at(v, &["time"]).and_then(event_time),
        }]));
    }
    Err("not an S3 notification (no Records, SNS envelope, EventBridge event or test event)".into())
}

fn s3_records(records: &[Value]) -> Result<Notification, String> {
    let mut objects = Vec::new();
    let mut ignored = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let version = r.get("eventVersion").and_then(Value::as_str).unwrap_or("2");
        if !version.starts_with("2.") && version != "2" {
            return Err(format!("Records[{i}]: unsupported eventVersion {version}"));
        }
        let name = r.get("eventName").and_then(Value::as_str).unwrap_or("");
        if !name.starts_with("ObjectCreated:") {
            ignored.push(name.to_string());
            continue;
        }
        let bucket = str_at(r, &["s3", "bucket", "name"])
            .ok_or_else(|| format!("Records[{i}].s3.bucket.name missing"))?;
        let key = str_at(r, &["s3", "object", "key"])
            .ok_or_else(|| format!("Records[{i}].s3.object.key missing"))?;
        objects.push(LogObject {
            bucket: bucket.to_string(),
            key: decode_key(key),
            alt_key: None,
            etag: Some(notified_etag(
                str_at(r, &["s3", "object", "eTag"]),
                &format!("Records[{i}].s3.object.eTag missing"),
            )?),
            event_time: str_at(r, &["eventTime"]).and_then(event_time),
        });
    }
    if objects.is_empty() {
        return Ok(Notification::Ignored(format!("events {ignored:?}")));
    }
    Ok(Notification::Objects(objects))
}

/// An RFC 3339 event time (`2026-11-29T11:34:01.123Z`); anything else is no time.
fn event_time(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

/// S3 notification keys are form-encoded: `+` is a space, `%XX` a byte. Invalid UTF-8 after
/// decoding keeps the key as given.
pub fn decode_key(key: &str) -> String {
    let spaced = key.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(body: &str) -> Vec<LogObject> {
        match parse_body(body) {
            Ok(Notification::Objects(o)) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_envelope() {
        let direct = include_str!("../../../events/s3-notification.json");
        let o = objects(direct);
        assert_eq!(
            (o[0].bucket.as_str(), o[0].key.as_str()),
            ("raw-logs", "logs/2026-11-29-08-00-00-A1B2C3D4E5F6")
        );
        let multi = objects(include_str!("../../../events/s3-notification-multi.json"));
        assert_eq!(multi.len(), 2);
        let sns = objects(include_str!("../../../events/s3-notification-sns.json"));
        assert_eq!(sns[0].key, "logs/2026-11-29-09-00-00-F6E5D4C3B2A1.gz");
        let eb = objects(include_str!(
            "../../../events/s3-eventbridge-object-created.json"
        ));
        assert_eq!(eb[0].key, "logs/2026-11-29-10-00-00-0A1B2C3D4E5F");
        assert_eq!(
            parse_body(include_str!("../../../events/s3-test-event.json")),
            Ok(Notification::TestEvent)
        );
        let enc = objects(include_str!(
            "../../../events/s3-notification-encoded-key.json"
        ));
        assert_eq!(enc[0].key, "logs/my logs/2026+11+29 (a).log");
    }

    #[test]
    fn unusable_bodies_say_why() {
        assert!(parse_body("nope").is_err_and(|e| e.contains("not JSON")));
        assert!(parse_body("{}").is_err_and(|e| e.contains("not an S3 notification")));
        assert!(
            parse_body(r#"{"Records":[{"eventVersion":"1.0","eventName":"ObjectCreated:Put"}]}"#)
                .is_err()
        );
        assert!(matches!(
            parse_body(
                r#"{"Records":[{"eventVersion":"2.1","eventName":"ObjectRemoved:Delete","s3":{}}]}"#
            ),
            Ok(Notification::Ignored(_))
        ));
        let no_etag = r#"{"Records":[{"eventVersion":"2.1","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}"#;
        assert!(parse_body(no_etag).is_err_and(|e| e.contains("eTag missing")));
        let quoted = no_etag.replace(r#""key":"k""#, r#""key":"k","eTag":"\"abc\"""#);
        assert_eq!(objects(&quoted)[0].etag.as_deref(), Some("abc"));
        assert_eq!(decode_key("a%2Bb+c%20d"), "a+b c d");
        assert_eq!(decode_key("bad%FF"), "bad%FF");
    }
}
