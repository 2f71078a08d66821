//! Text records out of a byte stream, pushed chunk by chunk as they arrive: CSV through
//! `csv-core` (the splitter arrow-csv itself is built on; used directly because a bad row must
//! be dead-lettered alone with its raw bytes, where arrow-csv's decoder fails the whole batch)
//! and JSON lines. Each record keeps the bytes it was read from, without its line ending. A
//! record longer than the line bound is cut: its first bytes are kept, the rest is read past
//! without being buffered, and it comes out marked [`RawRecord::overlong`].

use csv_core::{ReadRecordResult, Reader, ReaderBuilder};

/// One record as read: its fields (CSV) or its line (JSON lines), and its raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// CSV: the fields, unquoted; JSON lines: one field, the line.
    pub fields: Vec<Vec<u8>>,
    /// The bytes the record was read from, without the line ending (only the first bytes up
    /// to the line bound when `overlong`).
    pub raw: Vec<u8>,
    /// Longer than the line bound: `fields` is empty, `raw` its start.
    pub overlong: bool,
}

/// Splits records out of pushed bytes.
pub enum Splitter {
    /// CSV with a delimiter.
    Csv(Box<CsvSplitter>),
    /// One JSON object per line.
    Lines(LineSplitter),
}

impl Splitter {
    /// Push `input` (`&[]` at the end of the stream), appending complete records to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<RawRecord>) {
        match self {
            Splitter::Csv(c) => c.push(input, out),
            Splitter::Lines(l) => l.push(input, out),
        }
    }
}

/// CSV records (RFC 4180 quoting, `""` escapes, fields over several lines); blank lines are
/// skipped.
pub struct CsvSplitter {
    reader: Reader,
    max: usize,
    overlong: bool,
    out: Vec<u8>,
    ends: Vec<usize>,
    out_len: usize,
    ends_len: usize,
    raw: Vec<u8>,
    done: bool,
}

impl CsvSplitter {
    /// A splitter for `delimiter`, records of at most `max` bytes.
    pub fn new(delimiter: u8, max: usize) -> Self {
        Self {
            reader: ReaderBuilder::new().delimiter(delimiter).build(),
            max: max.max(1),
            overlong: false,
            out: vec![0; 4096],
            ends: vec![0; 64],
            out_len: 0,
            ends_len: 0,
            raw: Vec::new(),
            done: false,
        }
    }

    fn push(&mut self, mut input: &[u8], out: &mut Vec<RawRecord>) {
        if self.done {
            return;
        }
        let at_end = input.is_empty();
        loop {
            // An empty input tells csv-core the stream ended: only pass one at the end.
            if input.is_empty() && !at_end {
                return;
            }
            let (res, nin, nout, nend) = self.reader.read_record(
                input,
                &mut self.out[self.out_len..],
                &mut self.ends[self.ends_len..],
            );
            let mut read = &input[..nin];
            if self.raw.is_empty() {
                // Blank lines before a record are not part of it.
                let blank = read.iter().take_while(|b| **b == b'\n' || **b == b'\r');
                read = &read[blank.count()..];
            }
            // Keep up to the bound and a line ending; past it, read on keeping nothing.
            let room = (self.max + 2)
                .saturating_sub(self.raw.len())
                .min(read.len());
            self.raw.extend_from_slice(&read[..room]);
            self.overlong |= room < read.len();
            input = &input[nin..];
            self.out_len += nout;
            self.ends_len += nend;
            match res {
                ReadRecordResult::InputEmpty => {
                    if !at_end {
                        return;
                    }
                }
                ReadRecordResult::OutputFull if self.overlong || self.out.len() > self.max => {
                    self.overlong = true;
                    self.out_len = 0;
                }
                ReadRecordResult::OutputFull => {
                    let n = self.out.len() * 2;
                    self.out.resize(n, 0);
                }
                ReadRecordResult::OutputEndsFull if self.overlong || self.ends.len() > self.max => {
                    self.overlong = true;
                    self.ends_len = 0;
                }
                ReadRecordResult::OutputEndsFull => {
                    let n = self.ends.len() * 2;
                    self.ends.resize(n, 0);
                }
                ReadRecordResult::Record => {
                    let mut raw = std::mem::take(&mut self.raw);
                    trim_line(&mut raw);
                    let overlong = std::mem::take(&mut self.overlong) || raw.len() > self.max;
                    let mut fields = Vec::with_capacity(self.ends_len);
                    if overlong {
                        raw.truncate(self.max);
                    } else {
                        let mut start = 0;
                        for &end in &self.ends[..self.ends_len] {
                            fields.push(self.out[start..end].to_vec());
                            start = end;
                        }
                    }
                    out.push(RawRecord {
                        fields,
                        raw,
                        overlong,
                    });
                    self.out_len = 0;
                    self.ends_len = 0;
                }
                ReadRecordResult::End => {
                    self.done = true;
                    return;
                }
            }
        }
    }
}

/// Lines (`\n`, optional `\r`); blank lines are skipped.
pub struct LineSplitter {
    pending: Vec<u8>,
    max: usize,
    overlong: bool,
}

impl LineSplitter {
    /// A splitter of lines of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            pending: Vec::new(),
            max: max.max(1),
            overlong: false,
        }
    }

    /// Keep `bytes` of the current line up to the bound (and a `\r`).
    fn keep(&mut self, bytes: &[u8]) {
        let room = (self.max + 1)
            .saturating_sub(self.pending.len())
            .min(bytes.len());
        self.pending.extend_from_slice(&bytes[..room]);
        self.overlong |= room < bytes.len();
    }

    fn emit(&mut self, out: &mut Vec<RawRecord>) {
        let mut line = std::mem::take(&mut self.pending);
        let overlong = std::mem::take(&mut self.overlong);
        trim_line(&mut line);
        let overlong = overlong || line.len() > self.max;
        if overlong {
            line.truncate(self.max);
            out.push(RawRecord {
                fields: vec![],
                raw: line,
                overlong,
            });
        } else if !line.iter().all(u8::is_ascii_whitespace) {
            out.push(RawRecord {
                fields: vec![line.clone()],
                raw: line,
                overlong,
            });
        }
    }

    fn push(&mut self, input: &[u8], out: &mut Vec<RawRecord>) {
        if input.is_empty() {
            if !self.pending.is_empty() || self.overlong {
                self.emit(out);
            }
            return;
        }
        let mut rest = input;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            self.keep(&rest[..i]);
            self.emit(out);
            rest = &rest[i + 1..];
        }
        self.keep(rest);
    }
}

/// Drop a trailing line ending and any blank lines before the record.
fn trim_line(raw: &mut Vec<u8>) {
    while raw.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        raw.pop();
    }
    let lead = raw
        .iter()
        .take_while(|b| **b == b'\n' || **b == b'\r')
        .count();
    raw.drain(..lead);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(mut s: Splitter, chunks: &[&[u8]]) -> Vec<RawRecord> {
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut out);
        }
        s.push(&[], &mut out);
        out
    }

    #[test]
    fn csv_records_across_chunks_keep_their_bytes() {
        let recs = split(
            Splitter::Csv(Box::new(CsvSplitter::new(b',', 1 << 20))),
            &[b"I,1,\"a,", b"b\"\r\n\nU,2,x\nD,3,\"q\"\"\"", b"\n4,last"],
        );
        let fields: Vec<Vec<String>> = recs
            .iter()
            .map(|r| {
                r.fields
                    .iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect()
            })
            .collect();
        assert_eq!(
            fields,
            [
                vec!["I", "1", "a,b"],
                vec!["U", "2", "x"],
                vec!["D", "3", "q\""],
                vec!["4", "last"]
            ]
        );
        assert_eq!(recs[0].raw, b"I,1,\"a,b\"");
        assert_eq!(recs[1].raw, b"U,2,x");
        assert_eq!(recs[3].raw, b"4,last");
    }

    #[test]
    fn overlong_records_keep_their_start_and_read_past_the_rest() {
        let long = "x".repeat(50);
        let body = format!("I,1,ok\nI,2,\"{long}\n{long}\"\nI,3,{long}\nI,4,fine\n");
        let recs = split(
            Splitter::Csv(Box::new(CsvSplitter::new(b',', 16))),
            &body.as_bytes().chunks(7).collect::<Vec<_>>(),
        );
        let got: Vec<(bool, usize, String)> = recs
            .iter()
            .map(|r| {
                (
                    r.overlong,
                    r.fields.len(),
                    String::from_utf8_lossy(&r.raw).into(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (false, 3, "I,1,ok".into()),
                (true, 0, format!("I,2,\"{}", &long[..11])),
                (true, 0, format!("I,3,{}", &long[..12])),
                (false, 3, "I,4,fine".into()),
            ]
        );
        let body = format!("{{\"a\":1}}\n{{\"a\":\"{long}\"}}\n{{\"a\":3}}");
        let recs = split(
            Splitter::Lines(LineSplitter::new(16)),
            &body.as_bytes().chunks(5).collect::<Vec<_>>(),
        );
        let got: Vec<(bool, usize)> = recs.iter().map(|r| (r.overlong, r.raw.len())).collect();
        assert_eq!(got, [(false, 7), (true, 16), (false, 7)]);
    }

    #[test]
    fn lines_across_chunks() {
        let recs = split(
            Splitter::Lines(LineSplitter::new(1 << 20)),
            &[b"{\"a\":1}\n{\"a\"", b":2}\r\n\n  \n{\"a\":3}"],
        );
        let raws: Vec<&[u8]> = recs.iter().map(|r| r.raw.as_slice()).collect();
        assert_eq!(raws, [&b"{\"a\":1}"[..], b"{\"a\":2}", b"{\"a\":3}"]);
    }
}
#[cfg(test)]
mod big {
    use super::*;

    /// A chunk that ends right after a record must not read as the end of the stream.
    #[test]
    fn many_records_in_small_chunks() {
        let mut body = Vec::new();
        for i in 1..=20_000 {
            body.extend_from_slice(
                format!(
                    "2026-11-29 11:30:00.000000,{i},item {i},{}.25,true\n",
                    i % 1000
                )
                .as_bytes(),
            );
        }
        let mut s = Splitter::Csv(Box::new(CsvSplitter::new(b',', 1 << 20)));
        let mut out = Vec::new();
        let mut n = 0;
        for c in body.chunks(4096) {
            s.push(c, &mut out);
            n += out.len();
            out.clear();
        }
        s.push(&[], &mut out);
        n += out.len();
        assert_eq!(n, 20_000);
    }
}
