//! Text timestamps of JSON values -> epoch microseconds UTC.
//!
//! The common shape, `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, is parsed by hand (it was 6% of the
//! ingest benchmark through the general parser); everything else goes to arrow's
//! `string_to_datetime`, which defines what is accepted. The fast path agrees with it on every
//! input it takes (property test below).

/// Parse one timestamp to epoch microseconds: integer text = epoch milliseconds; otherwise
/// ISO-8601-ish, UTC when no zone is given. `None` when it is neither.
pub fn parse_timestamp_micros(s: &str) -> Option<i64> {
    let t = s.trim();
    if !t.is_empty()
        && t.bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (i == 0 && b == b'-'))
    {
        return t.parse::<i64>().ok()?.checked_mul(1000);
    }
    if let Some(us) = utc_zulu_micros(t.as_bytes()) {
        return Some(us);
    }
    deltalake::arrow::compute::kernels::cast_utils::string_to_datetime(&chrono::Utc, t)
        .ok()
        .map(|d| d.timestamp_micros())
}

/// The first microsecond Delta readers accept: 0001-01-01T00:00:00Z.
pub const MIN_MICROS: i64 = -62_135_596_800_000_000;
/// The last microsecond Delta readers accept: 9999-12-31T23:59:59.999999Z.
pub const MAX_MICROS: i64 = 253_402_300_799_999_999;

/// Why a parsed timestamp (`us`, from the text `text`) cannot be written, or `None` when it can.
/// Delta readers (Spark, delta-kernel, Python `deltalake` through pyarrow) accept the years
/// 0001-9999 only: a file or statistic outside them makes the table unreadable for them.
pub fn out_of_range(us: i64, text: &str) -> Option<String> {
    if (MIN_MICROS..=MAX_MICROS).contains(&us) {
        return None;
    }
    use chrono::Datelike as _;
    let year = chrono::DateTime::from_timestamp_micros(us)
        .map(|t| t.year().to_string())
        .unwrap_or_else(|| {
            if us > 0 {
                "beyond 262142".into()
            } else {
                "before -262143".into()
            }
        });
    let epoch = text.trim().trim_start_matches('-');
    let hint = if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) {
        " (numbers are epoch milliseconds: is it an epoch in microseconds or nanoseconds?)"
    } else {
        ""
    };
    // The value itself is not quoted: a reason names the column and the types only.
    Some(format!(
        "the value is in the year {year}, outside the years 0001-9999 that Delta readers \
         accept{hint}; not written"
    ))
}

/// `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z` -> epoch microseconds (fraction truncated to microseconds);
/// `None` for any other shape or an impossible date or time (the general parser decides).
fn utc_zulu_micros(b: &[u8]) -> Option<i64> {
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    if b[16] != b':' || b[b.len() - 1] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        b[r].iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let micros = match &b[19..b.len() - 1] {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            let mut us = num(20..20 + digits.len().min(6))?;
            for _ in digits.len()..6 {
                us *= 10;
            }
            if digits.len() > 6 {
                num(26..20 + digits.len())?; // digits only, ignored beyond microseconds
            }
            us
        }
        _ => return None,
    };
    let secs = lakestream_formats::civil::epoch_seconds(year, month, day, hour, minute, second)?;
    Some(secs * 1_000_000 + micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn general(t: &str) -> Option<i64> {
        deltalake::arrow::compute::kernels::cast_utils::string_to_datetime(&chrono::Utc, t)
            .ok()
            .map(|d| d.timestamp_micros())
    }

    #[test]
    fn fast_path_agrees_with_the_general_parser() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut taken = 0;
        for _ in 0..200_000 {
            let frac = match rng.u8(0..4) {
                0 => String::new(),
                n => format!(".{:09}", rng.u64(0..10u64.pow(9)))
                    [..1 + rng.usize(1..=3 * n as usize)]
                    .to_string(),
            };
            let t = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{frac}Z",
                rng.i64(0..10_000),
                rng.u8(0..14),
                rng.u8(0..33),
                rng.u8(0..26),
                rng.u8(0..62),
                rng.u8(0..62),
            );
            let fast = utc_zulu_micros(t.as_bytes());
            if fast.is_some() {
                taken += 1;
                assert_eq!(fast, general(&t), "{t}");
            }
            assert_eq!(parse_timestamp_micros(&t), general(&t), "{t}");
        }
        assert!(taken > 50_000, "the fast path took {taken}");
    }

    #[test]
    fn shapes() {
        let cases = [
            ("2022-04-04T10:15:30Z", Some(1_649_067_330_000_000)),
            ("2022-04-04T10:15:30.5Z", Some(1_649_067_330_500_000)),
            (
                "2022-04-04T10:15:30.123456789Z",
                Some(1_649_067_330_123_456),
            ),
            ("1969-12-31T23:59:59.999999Z", Some(-1)),
            ("2024-02-29T00:00:00Z", Some(1_709_164_800_000_000)),
            ("2023-02-29T00:00:00Z", None),
            ("2022-04-04T10:15:30+02:00", Some(1_649_060_130_000_000)),
            ("2022-04-04 10:15:30", Some(1_649_067_330_000_000)),
            ("1649067330000", Some(1_649_067_330_000_000)),
            ("2022-04-04T10:15:30.Z", None),
            ("not a time", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_timestamp_micros(text), want, "{text}");
        }
    }
}
