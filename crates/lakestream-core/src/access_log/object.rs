//! One log object's content: its lines parsed into per-table batches and dead letters, and the
//! dead letters that stand for a whole object (missing, superseded, refused by a table).

use super::arrow::AccessLogBatchBuilder;
use super::ingest::LogObject;
use super::parse::parse_line;
use crate::deadletter::DeadLetter;
use crate::error::Result;
use deltalake::arrow::record_batch::RecordBatch;
use std::collections::BTreeMap;
use std::io::BufRead;

/// Parsed content of one object, split by target table.
pub(super) struct Parsed {
    pub(super) by_table: BTreeMap<String, RecordBatch>,
    pub(super) letters: Vec<DeadLetter>,
}

/// Parse an object's lines (gzip or plain), routing rows to `table_for(bucket)`.
pub(super) fn parse_object(
    obj: &LogObject,
    bytes: &[u8],
    pipeline: &str,
    table_for: impl Fn(&str) -> String,
) -> Result<Parsed> {
    let uri = obj.uri();
    let app = obj.app_id(pipeline);
    let mut builders: BTreeMap<String, AccessLogBatchBuilder> = BTreeMap::new();
    let mut letters = Vec::new();
    let mut reject = |line_no: i64, raw: &[u8], reason: String| {
        letters.push(DeadLetter {
            topic: None,
            partition: None,
            offset: None,
            kafka_timestamp_ms: None,
            object_uri: Some(uri.clone()),
            line_number: Some(line_no),
            raw_base64: Some(DeadLetter::encode_raw(raw)),
            error: reason,
            target_table: None,
            txn: Some((app.clone(), 1)),
        });
    };
    let mut on_line = |line_no: i64, raw: &[u8]| {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let Ok(text) = std::str::from_utf8(raw) else {
            reject(line_no, raw, "line is not valid UTF-8".into());
            return;
        };
        match parse_line(text) {
            Ok(rec) => match rec.bucket() {
                Some(b) => builders
                    .entry(table_for(b))
                    .or_default()
                    .append(&rec, &uri, line_no),
                None => reject(line_no, raw, "bucket field is `-`".into()),
            },
            Err(e) => reject(line_no, raw, e.0),
        }
    };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut reader = std::io::BufReader::new(flate2::read::MultiGzDecoder::new(bytes));
        let mut buf = Vec::new();
        let mut n = 0i64;
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {
                    n += 1;
                    let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
                    on_line(n, line);
                }
                Err(e) => {
                    reject(
                        n + 1,
                        &[],
                        format!("gzip stream is corrupt after line {n}: {e}"),
                    );
                    break;
                }
            }
        }
    } else {
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            on_line(i as i64 + 1, line);
        }
    }
    let mut by_table = BTreeMap::new();
    for (t, mut b) in builders {
        by_table.insert(t, b.finish()?);
    }
    Ok(Parsed { by_table, letters })
}

/// The rows of `obj` that `table` refused for good (one letter per object and table; the lines
/// are in the object, named by `object_uri`).
pub(super) fn refused_letter(
    obj: &LogObject,
    pipeline: &str,
    table: &str,
    rows: usize,
    e: &crate::error::Error,
) -> DeadLetter {
    DeadLetter {
        target_table: Some(table.to_string()),
        txn: Some((format!("{}#refused-by:{table}", obj.app_id(pipeline)), 1)),
        ..object_letter(
            obj,
            pipeline,
            format!("{rows} line(s) of this object were refused by table `{table}`: {e}"),
        )
    }
}

pub(super) fn object_letter(obj: &LogObject, pipeline: &str, error: String) -> DeadLetter {
    DeadLetter {
        topic: None,
        partition: None,
        offset: None,
        kafka_timestamp_ms: None,
        object_uri: Some(obj.uri()),
        line_number: None,
        raw_base64: None,
        error,
        target_table: None,
        txn: Some((obj.app_id(pipeline), 1)),
    }
}
