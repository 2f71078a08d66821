//! Fuzz target bodies, shared by `cargo fuzz` (`fuzz/fuzz_targets/*`) and by the corpus
//! regression test (`tests/corpus.rs`) that CI runs on every saved input. Each body feeds
//! arbitrary bytes to one parser and checks what the rest of Lakestream relies on; a broken
//! property panics, which is what a fuzzer reports as a crash.
#![allow(clippy::panic)]

use crate::access_log::{FIELDS, parse_line};
use crate::config::PipelineConfig;
use crate::kafka::KafkaEvent;
use crate::notification::{Notification, decode_key, parse_body};

/// A target body: arbitrary bytes in, a panic when a property breaks.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name (the names of `fuzz/fuzz_targets/*.rs` and `fuzz/corpus/*`).
pub const TARGETS: [(&str, Target); 4] = [
    ("access_log_line", access_log_line),
    ("kafka_event", kafka_event),
    ("notification", notification),
    ("pipeline_config", pipeline_config),
];

/// An access-log line: parses or says why; parsed text fields borrow from the line, every
/// field renders, the request time is a representable instant, parsing is deterministic.
pub fn access_log_line(data: &[u8]) {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(rec) = parse_line(line) else {
        return;
    };
    let range = line.as_bytes().as_ptr_range();
    for text in rec.text.iter().flatten().chain(rec.extra.iter()) {
        let start = text.as_ptr();
        if !(text.is_empty() || range.contains(&start)) {
            panic!("field {text:?} does not borrow from the line");
        }
    }
    for i in 0..FIELDS.len() {
        let _ = rec.field(i);
    }
    if chrono::DateTime::from_timestamp_micros(rec.time_us).is_none() {
        panic!("time {} has no date (the partition column)", rec.time_us);
    }
    if parse_line(line).as_ref() != Ok(&rec) {
        panic!("parsing is not deterministic");
    }
}

/// An MSK event: parses or fails cleanly; every record is unwrapped once, in order.
pub fn kafka_event(data: &[u8]) {
    let Ok(event) = KafkaEvent::from_json(data) else {
        return;
    };
    let n = event.len();
    let records = event.into_source_records();
    if records.len() != n {
        panic!("{n} records delivered, {} unwrapped", records.len());
    }
    let keys: Vec<_> = records
        .iter()
        .map(|r| (&r.topic, r.partition, r.offset))
        .collect();
    if !keys.is_sorted() {
        panic!("records are not in (topic, partition, offset) order");
    }
    if records
        .iter()
        .any(|r| r.timestamp_ms.is_some_and(|t| t < 0))
    {
        panic!("a negative timestamp survived (Kafka's -1 means none)");
    }
}

/// An SQS message body (S3 / SNS / EventBridge notification): parses or says why; objects
/// have a bucket and a key; key decoding never panics.
pub fn notification(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = decode_key(&text);
    if let Ok(Notification::Objects(objects)) = parse_body(&text) {
        if objects.is_empty() {
            panic!("Objects with no object");
        }
        for o in &objects {
            let _ = o.app_id("p");
            let _ = o.uri();
        }
    }
}

/// A pipeline config: parses and validates or names the key that is wrong; a config that
/// loads is valid, and loading is deterministic.
pub fn pipeline_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match PipelineConfig::from_toml(text) {
        Ok(cfg) => {
            if let Err(e) = cfg.validate() {
                panic!("a loaded config does not validate: {e}");
            }
            if cfg.topics.iter().any(|t| cfg.topic(&t.topic).is_none()) {
                panic!("a configured topic cannot be looked up");
            }
        }
        Err(e) => {
            if e.to_string().is_empty() {
                panic!("an error without a message");
            }
        }
    }
}
