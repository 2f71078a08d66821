//! One log object's content: its lines parsed into per-table batches and dead letters, and the
//! dead letters that stand for a whole object (missing, superseded, refused by a table). A line
//! whose `bucket` field is not a valid S3 bucket name is a dead letter: the field names a table.

use super::arrow::AccessLogBatchBuilder;
use crate::dead_letter::DeadLetter;
use crate::error::Result;
use deltalake::arrow::record_batch::RecordBatch;
use lakestream_formats::access_log::parse_line;
use lakestream_formats::names::check_bucket_name;
use lakestream_formats::notification::LogObject;
use std::collections::BTreeMap;
use std::io::{BufRead, Read};

/// Parsed content of one object, split by target table.
pub(super) struct Parsed {
    pub(super) by_table: BTreeMap<String, RecordBatch>,
    pub(super) letters: Vec<DeadLetter>,
    /// Bytes of lines read (inflated for gzip).
    pub(super) inflated: u64,
}

/// What one object may cost (from `[access_logs]`): inflated bytes of a gzip object, bytes of
/// one line, malformed lines.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) max_inflated: u64,
    pub(super) max_line: usize,
    pub(super) max_bad_lines: u64,
}

impl Limits {
    pub(super) fn of(c: &lakestream_formats::config::AccessLogsConfig) -> Self {
        Self {
            max_inflated: c.max_inflated_mib.saturating_mul(1 << 20),
            max_line: usize::try_from(c.max_line_kib.saturating_mul(1 << 10)).unwrap_or(usize::MAX),
            max_bad_lines: c.max_bad_lines,
        }
    }
}

/// Parse an object's lines (gzip or plain), routing rows to `table_for(bucket)`. `obj` is the
/// object as read (key and ETag of the read). `Ok(Err((why, read)))` refuses the whole object (a
/// limit of `limits` was passed) after `read` bytes of lines: nothing of it is written.
pub(super) fn parse_object(
    obj: &LogObject,
    bytes: &[u8],
    pipeline: &str,
    limits: Limits,
    table_for: impl Fn(&str) -> String,
) -> Result<std::result::Result<Parsed, (String, u64)>> {
    let mut lines = Lines {
        uri: obj.uri(),
        // Line letters have their own key: a whole-object letter (refused, missing) committed
        // earlier must not hide them when the object is ingested later.
        app: format!("{}#lines", obj.app_id(pipeline)),
        limits,
        table_for,
        builders: BTreeMap::new(),
        letters: Vec::new(),
    };
    let gzip = bytes.starts_with(&[0x1f, 0x8b]);
    let mut reader = line_reader(bytes, gzip, limits.max_inflated);
    let mut buf = Vec::new();
    let mut n = 0i64;
    let mut inflated = 0u64;
    let mut bad = 0u64;
    loop {
        match next_line(&mut reader, &mut buf, limits.max_line) {
            Ok(None) => break,
            Ok(Some((too_long, used))) => {
                inflated += used;
                if gzip && inflated > limits.max_inflated {
                    return Ok(Err((
                        format!(
                            "gzip object inflates to more than {} MiB (`access_logs.max_inflated_mib`): \
                         refused as a whole, nothing of it written (a gzip bomb, or raise the limit \
                         and the function's memory)",
                            limits.max_inflated >> 20
                        ),
                        inflated,
                    )));
                }
                n += 1;
                if lines.on_line(n, &buf, too_long) {
                    bad += 1;
                    if bad > limits.max_bad_lines {
                        return Ok(Err((
                            format!(
                                "more than {} malformed lines (`access_logs.max_bad_lines`), the last \
                             at line {n}: not an access log? refused as a whole, nothing of it \
                             written",
                                limits.max_bad_lines
                            ),
                            inflated,
                        )));
                    }
                }
            }
            Err(e) => {
                lines.reject(
                    n + 1,
                    &[],
                    format!("gzip stream is corrupt after line {n}: {e}"),
                );
                break;
            }
        }
    }
    let mut by_table = BTreeMap::new();
    for (t, mut b) in lines.builders {
        by_table.insert(t, b.finish()?);
    }
    Ok(Ok(Parsed {
        by_table,
        letters: lines.letters,
        inflated,
    }))
}

/// The object's bytes as lines: inflated as a stream when `gzip`, one line at a time; at most
/// `max_inflated` + 1 bytes are read.
fn line_reader(bytes: &[u8], gzip: bool, max_inflated: u64) -> Box<dyn BufRead + '_> {
    if gzip {
        Box::new(std::io::BufReader::new(
            flate2::read::MultiGzDecoder::new(bytes).take(max_inflated.saturating_add(1)),
        ))
    } else {
        Box::new(bytes)
    }
}

/// Where one object's lines go: rows into per-table builders, bad lines into dead letters.
struct Lines<F> {
    /// The object's URI (each row's and letter's origin).
    uri: String,
    /// The line letters' key.
    app: String,
    limits: Limits,
    table_for: F,
    builders: BTreeMap<String, AccessLogBatchBuilder>,
    letters: Vec<DeadLetter>,
}

impl<F: Fn(&str) -> String> Lines<F> {
    /// Dead-letter line `line_no` (`raw`) for `reason`.
    fn reject(&mut self, line_no: i64, raw: &[u8], reason: String) {
        self.letters.push(DeadLetter::object_line(
            self.uri.clone(),
            line_no,
            raw,
            self.app.clone(),
            reason,
        ));
    }

    /// Take one line (cut at the limit when `too_long`). True when the line was dead-lettered.
    fn on_line(&mut self, line_no: i64, raw: &[u8], too_long: bool) -> bool {
        if too_long {
            let max_line = self.limits.max_line;
            self.reject(
                line_no,
                raw,
                format!(
                    "line is longer than {} bytes (`access_logs.max_line_kib`); its first {} \
                     bytes are kept here, the rest was not read into memory",
                    max_line, max_line
                ),
            );
            return true;
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            return false;
        }
        let Ok(text) = std::str::from_utf8(raw) else {
            self.reject(line_no, raw, "line is not valid UTF-8".into());
            return true;
        };
        match parse_line(text) {
            Ok(rec) => match rec.bucket() {
                // The bucket names a table: only a real bucket name may (no path, no URL syntax).
                Some(b) => match check_bucket_name(b) {
                    Ok(()) => {
                        self.builders
                            .entry((self.table_for)(b))
                            .or_default()
                            .append(&rec, &self.uri, line_no);
                        false
                    }
                    Err(why) => {
                        self.reject(
                            line_no,
                            raw,
                            format!(
                                "the bucket field ({} characters) is not a valid S3 bucket name \
                                 ({why}); the line is not written to any table",
                                b.chars().count()
                            ),
                        );
                        true
                    }
                },
                None => {
                    self.reject(line_no, raw, "bucket field is `-`".into());
                    true
                }
            },
            Err(e) => {
                self.reject(line_no, raw, e.0);
                true
            }
        }
    }
}

/// Read one line (without its `\n`) into `buf`, keeping at most `max` bytes of it and reading
/// past the rest without holding it. `None` at the end; else (whether it was cut, bytes
/// consumed including the newline).
fn next_line(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<(bool, u64)>> {
    buf.clear();
    let (mut too_long, mut used_total, mut any) = (false, 0u64, false);
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            return Ok(any.then_some((too_long, used_total)));
        }
        any = true;
        let newline = avail.iter().position(|b| *b == b'\n');
        let chunk = &avail[..newline.unwrap_or(avail.len())];
        let room = max.saturating_sub(buf.len());
        if chunk.len() > room {
            too_long = true;
            buf.extend_from_slice(&chunk[..room]);
        } else {
            buf.extend_from_slice(chunk);
        }
        let used = newline.map_or(avail.len(), |i| i + 1);
        r.consume(used);
        used_total += used as u64;
        if newline.is_some() {
            return Ok(Some((too_long, used_total)));
        }
    }
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
    object_letter(
        obj,
        pipeline,
        &format!("refused-by:{table}"),
        format!("{rows} line(s) of this object were refused by table `{table}`: {e}"),
    )
    .for_table(table)
}

/// The dead letter that stands for a whole object, idempotent per object and `kind`
/// (`refused`, `missing`, `superseded`): each kind has its own key, apart from the line letters'
/// (`#lines`) and the rows', so none of them hides another.
pub(super) fn object_letter(
    obj: &LogObject,
    pipeline: &str,
    kind: &str,
    error: String,
) -> DeadLetter {
    DeadLetter::object(obj.uri(), format!("{}#{kind}", obj.app_id(pipeline)), error)
}
