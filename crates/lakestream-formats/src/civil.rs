//! Calendar arithmetic for the hand-written time parsers (no allocation, no time-zone data).

/// Days in `month` (1-12) of `year`, proleptic Gregorian.
pub fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a valid proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Epoch seconds of a date and time, `None` when the date or time does not exist (no leap
/// seconds).
pub fn epoch_seconds(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> Option<i64> {
    let valid = (1..=12).contains(&mo)
        && (1..=days_in_month(y, mo)).contains(&d)
        && (0..24).contains(&h)
        && (0..60).contains(&mi)
        && (0..60).contains(&s);
    valid.then(|| days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, NaiveDateTime};

    #[test]
    fn agrees_with_chrono_over_every_day_of_many_years() {
        let mut day = NaiveDate::from_ymd_opt(1583, 1, 1).unwrap_or_default();
        let end = NaiveDate::from_ymd_opt(2500, 1, 1).unwrap_or_default();
        while day < end {
            let t: NaiveDateTime = day.and_hms_opt(13, 14, 15).unwrap_or_default();
            let (y, m, d) = (
                i64::from(chrono::Datelike::year(&day)),
                i64::from(chrono::Datelike::month(&day)),
                i64::from(chrono::Datelike::day(&day)),
            );
            assert_eq!(
                epoch_seconds(y, m, d, 13, 14, 15),
                Some(t.and_utc().timestamp())
            );
            day = day.succ_opt().unwrap_or(end);
        }
        assert_eq!(epoch_seconds(2023, 2, 29, 0, 0, 0), None);
        assert_eq!(epoch_seconds(2024, 2, 29, 0, 0, 0), Some(1_709_164_800));
        assert_eq!(epoch_seconds(2024, 4, 31, 0, 0, 0), None);
        assert_eq!(epoch_seconds(2024, 13, 1, 0, 0, 0), None);
        assert_eq!(epoch_seconds(2024, 1, 1, 24, 0, 0), None);
    }
}
