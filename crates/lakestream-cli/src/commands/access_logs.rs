//! `lakestream access-logs parse FILE`: the access-log line parser on a file, one JSON object
//! per input line (the record or its error), to see what ingestion would make of a log.

use anyhow::{Context, Result};
use std::path::Path;

/// Parse `file` (plain or gzip); exit 0 even when some lines fail.
pub fn parse(file: &Path) -> Result<()> {
    use lakestream_formats::access_log::{FIELDS, parse_line};
    use std::io::{BufRead, Write};
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let reader: Box<dyn BufRead> = if bytes.starts_with(&[0x1f, 0x8b]) {
        Box::new(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(
            &bytes[..],
        )))
    } else {
        Box::new(&bytes[..])
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (i, line) in reader.split(b'\n').enumerate() {
        let n = i + 1;
        let line = line?;
        let value = match std::str::from_utf8(&line) {
            Err(_) => serde_json::json!({"line": n, "error": "line is not valid UTF-8"}),
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => match parse_line(text) {
                Ok(rec) => {
                    let mut m = serde_json::Map::new();
                    for (k, name) in FIELDS.iter().enumerate() {
                        let v = match (k, rec.field(k)) {
                            (9 | 11..=14, Some(_)) => match k {
                                9 => serde_json::json!(rec.http_status),
                                _ => serde_json::json!(rec.numbers[k - 11]),
                            },
                            (_, Some(s)) => serde_json::Value::String(s.into_owned()),
                            (_, None) => serde_json::Value::Null,
                        };
                        m.insert((*name).to_string(), v);
                    }
                    m.insert("extra_fields".into(), serde_json::json!(rec.extra));
                    serde_json::Value::Object(m)
                }
                Err(e) => serde_json::json!({"line": n, "error": e.0}),
            },
        };
        writeln!(out, "{value}")?;
    }
    Ok(())
}
