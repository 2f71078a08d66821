//! One S3 server access log line -> typed fields, without regex and without allocating: the
//! record borrows from the line. Tokens are separated by spaces; `"..."` and `[...]` tokens may
//! hold spaces; a bare `-` (or a quoted `"-"`) is null. Lines from older formats end early and
//! leave the trailing fields null; fields beyond the known ones are kept verbatim.

use memchr::memchr;

/// Names of the known fields, in log order (the table's column names).
pub const FIELDS: [&str; 27] = [
    "bucket_owner",
    "bucket",
    "time",
    "remote_ip",
    "requester",
    "request_id",
    "operation",
    "key",
    "request_uri",
    "http_status",
    "error_code",
    "bytes_sent",
    "object_size",
    "total_time_ms",
    "turnaround_time_ms",
    "referer",
    "user_agent",
    "version_id",
    "host_id",
    "signature_version",
    "cipher_suite",
    "authentication_type",
    "host_header",
    "tls_version",
    "access_point_arn",
    "acl_required",
    "source_region",
];

/// Fewer fields than this is a truncated line (user agent, field 17, is in every format).
pub const MIN_FIELDS: usize = 17;

/// Index of the time field.
const TIME: usize = 2;
/// Index of the HTTP status field.
const HTTP_STATUS: usize = 9;
/// Indexes of the int64 fields.
const INT64: [usize; 4] = [11, 12, 13, 14];

/// A parsed line. String fields are as logged (the key stays URL-encoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLogRecord<'a> {
    /// Text fields by position (`None` = null); index `TIME`, `HTTP_STATUS` and the int64
    /// positions are `None` here: see the typed fields.
    pub text: [Option<&'a str>; 27],
    /// Request time, epoch microseconds UTC.
    pub time_us: i64,
    /// HTTP status.
    pub http_status: Option<i32>,
    /// bytes_sent, object_size, total_time_ms, turnaround_time_ms.
    pub numbers: [Option<i64>; 4],
    /// Unknown trailing fields, verbatim, space separated.
    pub extra: Option<&'a str>,
}

impl<'a> AccessLogRecord<'a> {
    /// The bucket field.
    pub fn bucket(&self) -> Option<&'a str> {
        self.text[1]
    }

    /// A field as text, by name (typed fields are rendered).
    pub fn field(&self, i: usize) -> Option<std::borrow::Cow<'a, str>> {
        if i == TIME {
            return chrono::DateTime::from_timestamp_micros(self.time_us)
                .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string().into());
        }
        if i == HTTP_STATUS {
            return self.http_status.map(|s| s.to_string().into());
        }
        if let Some(k) = INT64.iter().position(|&j| j == i) {
            return self.numbers[k].map(|n| n.to_string().into());
        }
        self.text.get(i).copied().flatten().map(Into::into)
    }
}

/// Why a line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parse one line (a trailing `\r` is ignored). Empty lines are an error the caller may skip.
pub fn parse_line(line: &str) -> Result<AccessLogRecord<'_>, ParseError> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let bytes = line.as_bytes();
    let mut rec = AccessLogRecord {
        text: [None; 27],
        time_us: 0,
        http_status: None,
        numbers: [None; 4],
        extra: None,
    };
    let mut pos = 0usize;
    let mut n = 0usize;
    let mut have_time = false;
    loop {
        while pos < bytes.len() && bytes[pos] == b' ' {
            pos += 1;
        }
        if pos >= bytes.len() {
            break;
        }
        if n == FIELDS.len() {
            rec.extra = Some(&line[pos..]);
            break;
        }
        let start = pos;
        let value: &str = match bytes[pos] {
            b'"' => {
                let mut end = None;
                let mut i = pos + 1;
                while let Some(off) = memchr(b'"', &bytes[i..]) {
                    let q = i + off;
                    if q + 1 == bytes.len() || bytes[q + 1] == b' ' {
                        end = Some(q);
                        break;
                    }
                    i = q + 1;
                }
                let Some(q) = end else {
                    return Err(ParseError(format!(
                        "unbalanced quote in field {} ({})",
                        n + 1,
                        FIELDS[n]
                    )));
                };
                pos = q + 1;
                &line[start + 1..q]
            }
            b'[' => {
                let Some(off) = memchr(b']', &bytes[pos..]) else {
                    return Err(ParseError(format!(
                        "unclosed [ in field {} ({})",
                        n + 1,
                        FIELDS[n]
                    )));
                };
                pos += off + 1;
                &line[start + 1..start + off]
            }
            _ => {
                let end = memchr(b' ', &bytes[pos..]).map_or(bytes.len(), |o| pos + o);
                pos = end;
                &line[start..end]
            }
        };
        let value = (value != "-").then_some(value);
        match n {
            TIME => {
                let v = value.ok_or_else(|| ParseError("time is missing".into()))?;
                rec.time_us = parse_time(v).ok_or_else(|| {
                    ParseError("bad time: not [dd/Mon/yyyy:HH:MM:SS +zzzz]".into())
                })?;
                have_time = true;
            }
            HTTP_STATUS => rec.http_status = value.map(|v| parse_int::<i32>(v, n)).transpose()?,
            11..=14 => rec.numbers[n - 11] = value.map(|v| parse_int::<i64>(v, n)).transpose()?,
            _ => rec.text[n] = value,
        }
        n += 1;
    }
    if n < MIN_FIELDS {
        return Err(ParseError(format!(
            "truncated line: {n} fields, at least {MIN_FIELDS} expected"
        )));
    }
    if !have_time {
        return Err(ParseError("time is missing".into()));
    }
    Ok(rec)
}

fn parse_int<T: std::str::FromStr>(v: &str, n: usize) -> Result<T, ParseError> {
    v.parse::<T>().map_err(|_| {
        ParseError(format!(
            "field {} ({}): a text of {} characters is not a number in range",
            n + 1,
            FIELDS[n],
            v.chars().count()
        ))
    })
}

/// `06/Feb/2019:00:00:38 +0000` -> epoch microseconds UTC.
pub fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 26 || b[2] != b'/' || b[6] != b'/' || b[11] != b':' || b[20] != b' ' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        b[r].iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let month = match &b[3..6] {
        b"Jan" => 1,
        b"Feb" => 2,
        b"Mar" => 3,
        b"Apr" => 4,
        b"May" => 5,
        b"Jun" => 6,
        b"Jul" => 7,
        b"Aug" => 8,
        b"Sep" => 9,
        b"Oct" => 10,
        b"Nov" => 11,
        b"Dec" => 12,
        _ => return None,
    };
    if b[14] != b':' || b[17] != b':' {
        return None;
    }
    let secs = crate::civil::epoch_seconds(
        num(7..11)?,
        month,
        num(0..2)?,
        num(12..14)?,
        num(15..17)?,
        num(18..20)?,
    )?;
    let sign = match b[21] {
        b'+' => 1i64,
        b'-' => -1,
        _ => return None,
    };
    let (oh, om) = (num(22..24)?, num(24..26)?);
    if om >= 60 {
        return None;
    }
    let offset_s = sign * (oh * 3600 + om * 60);
    Some((secs - offset_s) * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS documentation's example line (all 27 fields).
    pub const AWS_EXAMPLE: &str = "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be amzn-s3-demo-bucket1 [06/Feb/2019:00:00:38 +0000] 192.0.2.3 79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be 3E57427F3EXAMPLE REST.GET.VERSIONING - \"GET /amzn-s3-demo-bucket1?versioning HTTP/1.1\" 200 - 113 - 7 - \"-\" \"S3Console/0.4\" - s9lzHYrFp76ZVxRcpX9+5cjAnEH2ROuNkd2BHfIa6UkFVdtjf5mKR3/eTPFvsiP/XV/VLi31234= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader amzn-s3-demo-bucket1.s3.us-west-1.amazonaws.com TLSV1.2 arn:aws:s3:us-west-1:123456789012:accesspoint/example-AP Yes us-east-1";

    fn ok(line: &str) -> AccessLogRecord<'_> {
        match parse_line(line) {
            Ok(r) => r,
            Err(e) => panic!("{e}: {line}"),
        }
    }

    fn err(line: &str) -> String {
        match parse_line(line) {
            Ok(r) => panic!("parsed: {r:?}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn aws_example_every_field() {
        let r = ok(AWS_EXAMPLE);
        assert_eq!(r.bucket(), Some("amzn-s3-demo-bucket1"));
        assert_eq!(r.time_us, 1_549_411_238_000_000);
        assert_eq!(r.text[3], Some("192.0.2.3"));
        assert_eq!(r.text[6], Some("REST.GET.VERSIONING"));
        assert_eq!(r.text[7], None, "key `-`");
        assert_eq!(
            r.text[8],
            Some("GET /amzn-s3-demo-bucket1?versioning HTTP/1.1")
        );
        assert_eq!(r.http_status, Some(200));
        assert_eq!(r.text[10], None);
        assert_eq!(r.numbers, [Some(113), None, Some(7), None]);
        assert_eq!(r.text[15], None, "quoted \"-\" referer is null");
        assert_eq!(r.text[16], Some("S3Console/0.4"));
        assert_eq!(r.text[19], Some("SigV4"));
        assert_eq!(r.text[23], Some("TLSV1.2"));
        assert_eq!(
            r.text[24],
            Some("arn:aws:s3:us-west-1:123456789012:accesspoint/example-AP")
        );
        assert_eq!(r.text[25], Some("Yes"));
        assert_eq!(r.text[26], Some("us-east-1"));
        assert_eq!(r.extra, None);
    }

    #[test]
    fn quoted_fields_with_spaces_commas_parentheses_and_bare_dashes() {
        let line = "owner bkt [06/Feb/2019:00:00:38 +0000] 2001:db8::1 arn:aws:iam::123456789012:user/alice REQ1 REST.PUT.OBJECT photos/my%20cat.jpg \"PUT /bkt/photos/my%20cat.jpg HTTP/1.1\" 200 - - 2048 70 10 \"https://example.com/a b?c=(1),2\" \"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)\" - hostid SigV4 ECDHE AuthHeader bkt.s3.amazonaws.com TLSv1.2 - - -";
        let r = ok(line);
        assert_eq!(r.text[7], Some("photos/my%20cat.jpg"), "key as logged");
        assert_eq!(r.text[15], Some("https://example.com/a b?c=(1),2"));
        assert_eq!(
            r.text[16],
            Some("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)")
        );
        assert_eq!(r.numbers[0], None, "bytes sent `-` is null");
        assert_eq!(r.text[26], None);
        let bare = "owner bkt [06/Feb/2019:00:00:38 +0000] - - REQ2 REST.HEAD.OBJECT k - 404 NoSuchKey - - 5 - - -";
        let r = ok(bare);
        assert_eq!(
            r.text[8], None,
            "bare - where a quoted request-URI is usual"
        );
        assert_eq!(r.text[10], Some("NoSuchKey"));
        assert_eq!(r.text[17], None);
    }

    #[test]
    fn offsets_are_converted_to_utc() {
        let t = |s| parse_time(s);
        assert_eq!(t("06/Feb/2019:00:00:38 +0000"), Some(1_549_411_238_000_000));
        assert_eq!(t("06/Feb/2019:02:00:38 +0200"), Some(1_549_411_238_000_000));
        assert_eq!(t("05/Feb/2019:19:30:38 -0430"), Some(1_549_411_238_000_000));
        assert_eq!(t("31/Feb/2019:00:00:38 +0000"), None);
        assert_eq!(t("06/Fev/2019:00:00:38 +0000"), None);
        assert_eq!(t("06/Feb/2019 00:00:38 +0000"), None);
        assert_eq!(t("06/Feb/2019:00:00:38"), None);
    }

    #[test]
    fn older_shorter_lines_crlf_and_future_fields() {
        let old = "owner bkt [06/Feb/2019:00:00:38 +0000] 192.0.2.3 req ID REST.GET.OBJECT k \"GET /bkt/k HTTP/1.1\" 200 - 10 10 1 1 \"-\" \"curl/7.0\" -\r";
        let r = ok(old);
        assert_eq!(r.text[16], Some("curl/7.0"));
        assert!(r.text[18..].iter().all(Option::is_none));
        let future = format!("{AWS_EXAMPLE} NewField1 \"new field 2\"");
        let r = ok(&future);
        assert_eq!(r.text[26], Some("us-east-1"));
        assert_eq!(r.extra, Some("NewField1 \"new field 2\""));
    }

    #[test]
    fn malformed_lines_say_why() {
        assert!(err("owner bkt [06/Feb/2019:00:00:38 +0000] 1.2.3.4 req").contains("truncated"));
        assert!(err("owner bkt [06/Feb/2019:00:00:38 +0000 1.2.3.4").contains("unclosed"));
        let unbalanced = AWS_EXAMPLE.replace("\"S3Console/0.4\"", "\"S3Console/0.4");
        assert!(
            err(&unbalanced).contains("unbalanced quote"),
            "{}",
            err(&unbalanced)
        );
        let bad_date = AWS_EXAMPLE.replace("06/Feb/2019", "06/Feb/20x9");
        assert!(err(&bad_date).contains("bad time"));
        let not_num = AWS_EXAMPLE.replace(" 200 - 113 ", " 200 - 11x ");
        assert!(err(&not_num).contains("bytes_sent"), "{}", err(&not_num));
        let overflow = AWS_EXAMPLE.replace(" 200 - 113 ", " 200 - 99999999999999999999 ");
        assert!(err(&overflow).contains("bytes_sent"));
        let status = AWS_EXAMPLE.replace(" 200 - 113 ", " 99999999999 - 113 ");
        assert!(err(&status).contains("http_status"));
        assert!(err("").contains("truncated"));
    }
}
