//! Text records out of a byte stream, pushed chunk by chunk as they arrive: CSV through
//! `csv-core` (the splitter arrow-csv itself is built on; used directly because a bad row must
//! be dead-lettered alone with its raw bytes, where arrow-csv's decoder fails the whole batch)
//! and JSON lines. Each record keeps the bytes it was read from, without its line ending.

use csv_core::{ReadRecordResult, Reader, ReaderBuilder};

/// One record as read: its fields (CSV) or its line (JSON lines), and its raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// CSV: the fields, unquoted; JSON lines: one field, the line.
    pub fields: Vec<Vec<u8>>,
    /// The bytes the record was read from, without the line ending.
    pub raw: Vec<u8>,
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
    out: Vec<u8>,
    ends: Vec<usize>,
    out_len: usize,
    ends_len: usize,
    raw: Vec<u8>,
    done: bool,
}

impl CsvSplitter {
    /// A splitter for `delimiter`.
    pub fn new(delimiter: u8) -> Self {
        Self {
            reader: ReaderBuilder::new().delimiter(delimiter).build(),
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
            self.raw.extend_from_slice(&input[..nin]);
            input = &input[nin..];
            self.out_len += nout;
            self.ends_len += nend;
            match res {
                ReadRecordResult::InputEmpty => {
                    if !at_end {
                        return;
                    }
                }
                ReadRecordResult::OutputFull => {
                    let n = self.out.len() * 2;
                    self.out.resize(n, 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    let n = self.ends.len() * 2;
                    self.ends.resize(n, 0);
                }
                ReadRecordResult::Record => {
                    let mut fields = Vec::with_capacity(self.ends_len);
                    let mut start = 0;
                    for &end in &self.ends[..self.ends_len] {
                        fields.push(self.out[start..end].to_vec());
                        start = end;
                    }
                    let mut raw = std::mem::take(&mut self.raw);
                    trim_line(&mut raw);
                    out.push(RawRecord { fields, raw });
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
#[derive(Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    fn push(&mut self, input: &[u8], out: &mut Vec<RawRecord>) {
        let mut emit = |mut line: Vec<u8>| {
            trim_line(&mut line);
            if !line.iter().all(u8::is_ascii_whitespace) {
                out.push(RawRecord {
                    fields: vec![line.clone()],
                    raw: line,
                });
            }
        };
        if input.is_empty() {
            if !self.pending.is_empty() {
                emit(std::mem::take(&mut self.pending));
            }
            return;
        }
        let mut rest = input;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            self.pending.extend_from_slice(&rest[..i]);
            emit(std::mem::take(&mut self.pending));
            rest = &rest[i + 1..];
        }
        self.pending.extend_from_slice(rest);
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
            Splitter::Csv(Box::new(CsvSplitter::new(b','))),
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
    fn lines_across_chunks() {
        let recs = split(
            Splitter::Lines(LineSplitter::default()),
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
        let mut s = Splitter::Csv(Box::new(CsvSplitter::new(b',')));
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
