//! Issue 37: what a Debezium table meets over its life, at the decoder: a connector restart's
//! re-emissions, case-only twin columns, unsigned 64-bit values.

use super::*;
use deltalake::arrow::array::AsArray;
use deltalake::arrow::datatypes::Decimal128Type;

/// A connector restart re-emits changes since its last committed offset at new Kafka offsets:
/// where the source position names one change (LSN, binlog file/pos/row, SQL Server LSNs) the
/// re-emission has the same `__seq` (the apply keeps the change already applied); where it
/// does not (Oracle SCN, `ts_ms`), the offset still tells two changes apart.
#[test]
fn re_emitted_change_has_the_same_seq() {
    let topic = "crm.inventory.products";
    let key = Some(fx!("mysql_products_101.key.json"));
    let s = seqs(&[
        rec(topic, 10, key, fx!("mysql_products_c.json")),
        rec(topic, 7_000, key, fx!("mysql_products_c.json")),
    ]);
    assert_eq!(s[0], s[1], "re-emitted binlog change: {s:?}");
    let v = |source: &str| {
        format!(r#"{{"before":null,"after":{{"id":1}},"source":{source},"op":"c"}}"#).into_bytes()
    };
    let s = seqs(&[
        rec("a.b.c", 1, None, &v(r#"{"lsn":99,"ts_ms":5}"#)),
        rec("a.b.c", 900, None, &v(r#"{"lsn":99,"ts_ms":5}"#)),
        rec("a.b.c", 2, None, &v(r#"{"scn":"7","ts_ms":5}"#)),
        rec("a.b.c", 3, None, &v(r#"{"scn":"7","ts_ms":5}"#)),
    ]);
    assert_eq!(s[0], s[1], "re-emitted PostgreSQL change: {s:?}");
    assert_ne!(s[2], s[3], "two changes of one SCN stay apart: {s:?}");
}

/// Issue 37 (8): a row with two columns that differ only in case (`Name`, `name`) is a reject
/// naming both (Delta column names are case-insensitive: one would overwrite the other).
#[test]
fn case_only_twins_are_rejects() {
    let v = br#"{"before":null,"after":{"id":1,"Name":"Ann","name":"ann"},"source":{"lsn":1},"op":"c"}"#;
    let d = run(
        &target("t", &[]),
        &[rec("a.b.c", 0, None, v)],
        &bronze_only(),
    );
    assert_eq!(d.rows, Vec::<usize>::new());
    assert!(
        d.rejects[0].1.contains("`Name` and `name`"),
        "{:?}",
        d.rejects
    );
}

/// Issue 37 (8): without schemas an unsigned 64-bit value past int64 (`BIGINT UNSIGNED`) is kept
/// exactly (decimal(20,0)), not as a float64 that merges neighbouring keys.
#[test]
fn unsigned_64_bit_values_stay_exact() {
    let v = |id: &str| {
        format!(r#"{{"before":null,"after":{{"id":{id}}},"source":{{"lsn":1}},"op":"c"}}"#)
            .into_bytes()
    };
    let d = run(
        &target("t", &[]),
        &[
            rec("a.b.c", 0, None, &v("18446744073709551615")),
            rec("a.b.c", 1, None, &v("18446744073709551614")),
        ],
        &bronze_only(),
    );
    assert!(d.rejects.is_empty(), "{:?}", d.rejects);
    let ids = d.batch.column_by_name("id").unwrap();
    assert_eq!(ids.data_type(), &DataType::Decimal128(20, 0));
    let ids = ids.as_primitive::<Decimal128Type>();
    assert_eq!(ids.value(0), 18_446_744_073_709_551_615);
    assert_eq!(ids.value(1), 18_446_744_073_709_551_614);
}

/// Issue 38 (5): ordering values come from the record. A truncate (or any change) whose SQL
/// Server `commit_lsn` is not an LSN (`~` sorts above every hex digit: every later change of the
/// table would rank below it and be voided) is a reject; real LSNs still order the changes.
#[test]
fn a_forged_sql_server_lsn_is_a_reject() {
    let v = |op: &str, source: &str| {
        format!(r#"{{"before":null,"after":{{"id":1}},"source":{source},"op":"{op}"}}"#)
            .into_bytes()
    };
    let d = run(
        &target("t", &[]),
        &[
            rec(
                "a.b.c",
                0,
                None,
                br#"{"before":null,"after":null,"source":{"commit_lsn":"~","ts_ms":5},"op":"t"}"#,
            ),
            rec(
                "a.b.c",
                1,
                None,
                &v(
                    "c",
                    r#"{"commit_lsn":"00000027:00000ac0:0007","change_lsn":"~~","ts_ms":5}"#,
                ),
            ),
            rec(
                "a.b.c",
                2,
                None,
                &v(
                    "c",
                    r#"{"commit_lsn":"00000027:00000AC0:0007","change_lsn":"00000027:00000ac0:0002","ts_ms":5}"#,
                ),
            ),
        ],
        &bronze_only(),
    );
    assert_eq!(d.rows, vec![2], "{:?}", d.rejects);
    let reasons: Vec<&str> = d.rejects.iter().map(|r| r.1.as_str()).collect();
    assert!(
        reasons[0].contains("source.commit_lsn is not a SQL Server LSN"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("source.change_lsn is not a SQL Server LSN"),
        "{reasons:?}"
    );
}

/// Issue 38 (5): Debezium's source positions are `int64`: a PostgreSQL truncate at `lsn`
/// 18446744073709551615 (above every real LSN: it voided every later change of the table), a
/// MySQL `row` past `int32` (it broke the position's fixed width) are rejects, named by field
/// without their value; `i64::MAX` itself is a position.
#[test]
fn positions_past_int64_are_rejects() {
    let t = |source: &str| {
        format!(r#"{{"before":null,"after":null,"source":{source},"op":"t"}}"#).into_bytes()
    };
    let d = run(
        &target("t", &[]),
        &[
            rec(
                "a.b.c",
                0,
                None,
                &t(r#"{"lsn":18446744073709551615,"ts_ms":5}"#),
            ),
            rec(
                "a.b.c",
                1,
                None,
                &t(r#"{"lsn":"9223372036854775808","ts_ms":5}"#),
            ),
            rec(
                "a.b.c",
                2,
                None,
                &t(r#"{"lsn":9223372036854775807,"ts_ms":5}"#),
            ),
        ],
        &bronze_only(),
    );
    assert_eq!(d.rows, vec![2], "{:?}", d.rejects);
    for (_, reason) in &d.rejects {
        assert!(
            reason.contains("source.lsn is not a non-negative 64-bit"),
            "{reason}"
        );
        assert!(
            !reason.contains("922337") && !reason.contains("1844"),
            "{reason}"
        );
    }
    let d = run(
        &target("t", &[]),
        &[rec(
            "a.b.c",
            0,
            None,
            &t(r#"{"file":"mysql-bin.000003","pos":4,"row":99999999999,"ts_ms":5}"#),
        )],
        &bronze_only(),
    );
    assert!(
        d.rejects[0].1.contains("source.row is not a row number"),
        "{:?}",
        d.rejects
    );
}

/// Issue 38 (2): a record adding more than `max_new_columns`, or taking its table past
/// `max_table_columns`, is a reject; one at the bound is kept; 40,000 new columns are refused
/// (the lookup of new names is a hash, not a scan per column).
#[test]
fn records_past_the_width_bounds_are_rejects() {
    let v = |n: usize, prefix: &str| {
        let cols: Vec<String> = (0..n).map(|i| format!(r#""{prefix}{i}":{i}"#)).collect();
        format!(
            r#"{{"before":null,"after":{{"id":1,{}}},"source":{{"lsn":1}},"op":"c"}}"#,
            cols.join(",")
        )
        .into_bytes()
    };
    let mut t = target("t", &[]);
    t.width = (150, 100);
    let d = run(
        &t,
        &[
            rec("a.b.c", 0, None, &v(99, "a")),
            rec("a.b.c", 1, None, &v(101, "b")),
            rec("a.b.c", 2, None, &v(40_000, "c")),
            rec("a.b.c", 3, None, &v(60, "d")),
            rec("a.b.c", 4, None, &v(49, "e")),
        ],
        &bronze_only(),
    );
    // 1 + 99 new; 101 and 40,000 past the record bound; 60 more past the table's 150; 49 fit.
    assert_eq!(d.rows, vec![0, 4], "{:?}", d.rejects);
    assert_eq!(d.new_fields.len(), 149);
    assert!(
        d.rejects.iter().all(|r| r.1.contains("max_new_columns")),
        "{:?}",
        d.rejects
    );
}

/// Issue 38 (5): a source time far in the future (9999) is a reject, not a version's start for
/// good; a week of clock skew is tolerated.
#[test]
fn a_source_time_from_the_future_is_a_reject() {
    let v = |ts_ms: i64| {
        format!(
            r#"{{"before":null,"after":{{"id":1}},"source":{{"lsn":1,"ts_ms":{ts_ms}}},"op":"c"}}"#
        )
        .into_bytes()
    };
    let now_ms = now().timestamp_millis();
    let d = run(
        &target("t", &[]),
        &[
            rec("a.b.c", 0, None, &v(253_402_300_000_000)),
            rec("a.b.c", 1, None, &v(now_ms + 6 * 24 * 3600 * 1000)),
            rec("a.b.c", 2, None, &v(now_ms + 8 * 24 * 3600 * 1000)),
        ],
        &bronze_only(),
    );
    assert_eq!(d.rows, vec![1], "{:?}", d.rejects);
    assert!(
        d.rejects[0].1.contains("more than 7 days"),
        "{:?}",
        d.rejects
    );
}

/// Issue 38 (6): a table's keys are fixed when it is created. A record whose key names other
/// fields than the table's (or, in a new table's first batch, than its first key) is a reject,
/// never a re-keying: a forged key `{"country"}` must not merge people into one row.
#[test]
fn a_record_keyed_by_other_fields_is_a_reject() {
    let v = br#"{"before":null,"after":{"id":1,"country":"NL"},"source":{"lsn":1},"op":"c"}"#;
    let by_id = Some(&br#"{"id":1}"#[..]);
    let by_country = Some(&br#"{"country":"NL"}"#[..]);
    let t = target("t", &[]);
    let refs = [
        rec("a.b.c", 0, by_id, v),
        rec("a.b.c", 1, by_country, v),
        rec("a.b.c", 2, by_id, v),
    ];
    let recs: Vec<&SourceRecord> = refs.iter().collect();
    // A new table: the first key wins, the other is refused.
    let d = decode(&t, &recs, &bronze_only(), (None, None), now()).unwrap();
    assert_eq!(d.rows, vec![0, 2], "{:?}", d.rejects);
    assert!(
        d.rejects[0].1.contains("the table's keys are [id]"),
        "{:?}",
        d.rejects
    );
    // An existing table keyed by `id`: a batch starting with the forged key keeps `id`.
    let later: Vec<&SourceRecord> = refs[1..].iter().collect();
    let d = decode(
        &t,
        &later,
        &bronze_only(),
        (Some(&["id".to_string()]), None),
        now(),
    )
    .unwrap();
    assert_eq!(d.rows, vec![1], "{:?}", d.rejects);
    // Declared keys (a table without a primary key): the record key is not compared.
    let mut declared = target("t", &[]);
    declared.declared_keys = Some(vec!["id".into()]);
    let d = decode(&declared, &recs, &bronze_only(), (None, None), now()).unwrap();
    assert_eq!(d.rows, vec![0, 1, 2]);
}

/// Issue 38 (5): a topic's position kind cannot change: a change ordered by `ts_ms` in a table
/// ordered by `lsn` (another connector, or a forged record) is a reject, not a `__seq` that
/// compares with the others by accident.
#[test]
fn a_change_of_position_kind_is_a_reject() {
    let v = |source: &str| {
        format!(r#"{{"before":null,"after":{{"id":1}},"source":{source},"op":"c"}}"#).into_bytes()
    };
    let refs = [
        rec("a.b.c", 0, None, &v(r#"{"lsn":5}"#)),
        rec("a.b.c", 1, None, &v(r#"{"ts_ms":1764547200000}"#)),
        rec("a.b.c", 2, None, &v(r#"{"lsn":6}"#)),
    ];
    let recs: Vec<&SourceRecord> = refs.iter().collect();
    let d = decode(
        &target("t", &[]),
        &recs,
        &bronze_only(),
        (None, None),
        now(),
    )
    .unwrap();
    assert_eq!(d.rows, vec![0, 2], "{:?}", d.rejects);
    assert!(
        d.rejects[0]
            .1
            .contains("ordered by source.ts_ms, the table's changes by source.lsn")
    );
    assert_eq!(d.position_kind.as_deref(), Some("lsn"));
    // A table created ordered by `file` (MySQL) refuses `lsn` from its first record on.
    let d = decode(
        &target("t", &[]),
        &recs[..1],
        &bronze_only(),
        (None, Some("file")),
        now(),
    )
    .unwrap();
    assert_eq!(d.rows, Vec::<usize>::new());
}

/// Review of issue 38: a new table's first record brings all its columns (a 300-column source
/// table is not refused by `max_new_columns`), and a record that is refused fixes nothing (a
/// refused first record keyed by `country` does not make the real `id`-keyed records rejects).
#[test]
fn a_wide_first_record_lands_and_a_refused_record_fixes_nothing() {
    let cols: Vec<String> = (0..300).map(|i| format!(r#""c{i}":{i}"#)).collect();
    let wide = format!(
        r#"{{"before":null,"after":{{"id":1,{}}},"source":{{"lsn":1}},"op":"c"}}"#,
        cols.join(",")
    );
    let d = run(
        &target("t", &[]),
        &[rec("a.b.c", 0, None, wide.as_bytes())],
        &bronze_only(),
    );
    assert_eq!(
        (d.rows.len(), d.new_fields.len()),
        (1, 301),
        "{:?}",
        d.rejects
    );
    let future = br#"{"before":null,"after":{"id":1,"country":"NL"},"source":{"lsn":1,"ts_ms":253402300000000},"op":"c"}"#;
    let ok = br#"{"before":null,"after":{"id":2,"country":"NL"},"source":{"lsn":2},"op":"c"}"#;
    let d = run(
        &target("t", &[]),
        &[
            rec("a.b.c", 0, Some(&br#"{"country":"NL"}"#[..]), future),
            rec("a.b.c", 1, Some(&br#"{"id":2}"#[..]), ok),
        ],
        &bronze_only(),
    );
    assert_eq!(d.rows, vec![1], "{:?}", d.rejects);
}
