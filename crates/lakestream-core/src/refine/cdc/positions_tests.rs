//! Unit tests of [`super`]: which pairs of changes prove a reset, and the reset ranks.
use super::*;

/// Later than 100 by more than the MySQL margin.
const LATER: i64 = 100 + MYSQL_MARGIN_US + 1;

fn s<'a>(key: &'a [u8], seq: &'a str, at: i64, checked: bool) -> Seen<'a> {
    Seen {
        key,
        seq,
        at: Some(at),
        checked,
    }
}

#[test]
fn a_lower_position_committed_later_went_back() {
    let (high, low) = (
        "0000000005.00000000000000000100.0000000000",
        "0000000001.00000000000000000004.0000000000",
    );
    let found = went_back(vec![s(b"a", high, 100, false), s(b"a", low, LATER, true)]);
    assert!(found.is_some_and(|(l, e)| l.at == Some(LATER) && e.at == Some(100)));
    // Within the MySQL margin: not proof (a long transaction's statement time).
    assert!(went_back(vec![s(b"a", high, 100, false), s(b"a", low, 200, true)]).is_none());
    // PostgreSQL / SQL Server commit times: any later time proves it.
    let (high, low) = ("00000000000000000900", "00000000000000000100");
    assert!(went_back(vec![s(b"a", high, 100, false), s(b"a", low, 101, true)]).is_some());
}

#[test]
fn other_keys_snapshot_rows_offsets_and_equal_times_do_not() {
    // Another key's later change, a snapshot row (read time), a DMS/offset seq, equal times.
    for seen in [
        vec![
            s(
                b"a",
                "0000000005.00000000000000000100.0000000000",
                100,
                false,
            ),
            s(
                b"b",
                "0000000001.00000000000000000004.0000000000",
                200,
                true,
            ),
        ],
        vec![
            s(
                b"a",
                "0000000005.00000000000000000100.0000000000",
                100,
                true,
            ),
            s(
                b"a",
                "0000000001.00000000000000000004.0000000000",
                200,
                false,
            ),
        ],
        vec![
            s(b"a", "2|00000000000000000009|1|k|000000000001", 100, true),
            s(b"a", "2|00000000000000000001|1|k|000000000001", 200, true),
        ],
        vec![
            s(b"a", "00000000000000000200", 100, true),
            s(b"a", "00000000000000000100", 100, true),
        ],
    ] {
        assert!(went_back(seen).is_none());
    }
}

#[test]
fn mysql_times_inverted_within_a_binlog_file_are_not_a_restart() {
    // Statement start times: a long transaction's event can carry an earlier time than a
    // short one committed before it, in the same file (or the next).
    let same_file = vec![
        s(
            b"a",
            "0000000005.00000000000000000900.0000000000",
            100,
            false,
        ),
        s(
            b"a",
            "0000000005.00000000000000000100.0000000000",
            200,
            true,
        ),
    ];
    assert!(went_back(same_file).is_none());
    assert!(!pair_went_back(
        ("0000000005.00000000000000000100.0000000000", Some(200), "u"),
        ("0000000005.00000000000000000900.0000000000", Some(100)),
    ));
    // A lower file, later by more than the margin: the restart.
    assert!(pair_went_back(
        (
            "0000000001.00000000000000000100.0000000000",
            Some(LATER),
            "u"
        ),
        ("0000000005.00000000000000000900.0000000000", Some(100)),
    ));
    assert!(!pair_went_back(
        ("0000000001.00000000000000000100.0000000000", Some(200), "u"),
        ("0000000005.00000000000000000900.0000000000", Some(100)),
    ));
    // An earlier-timed change in a higher file counts even past same-file ones.
    let (f6, f5_high, f5_low) = (
        "0000000006.00000000000000000001.0000000000",
        "0000000005.00000000000000000900.0000000000",
        "0000000005.00000000000000000100.0000000000",
    );
    let mixed = vec![
        s(b"a", f6, 50, false),
        s(b"a", f5_high, LATER + 300, false),
        s(b"a", f5_low, LATER + 200, true),
    ];
    let found = went_back(mixed);
    assert!(found.is_some_and(|(l, e)| l.at == Some(LATER + 200) && e.at == Some(50)));
}

#[test]
fn a_reset_rank_puts_a_change_after_every_earlier_one() {
    let old = "0000000005.00000000000000000100.0000000000";
    let new = format!(
        "{}0000000001.00000000000000000004.0000000000",
        rank_prefix(1)
    );
    assert!(new.as_str() > old);
    assert!(went_back(vec![s(b"a", old, 100, false), s(b"a", &new, 200, true)]).is_none());
    assert!(bare_position(&new));
}
