//! The decoder against real-shaped Debezium envelopes (`tests/fixtures/debezium/`): ops,
//! wrapper, ordering, rejects here; value types in [`types`].

use super::*;
use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::datatypes::{
    Date32Type, Decimal128Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use lakestream_formats::config::CdcColumn;

macro_rules! fx {
    ($name:literal) => {
        include_bytes!(concat!("../../../../../../tests/fixtures/debezium/", $name)).as_slice()
    };
}

fn target(table: &str, declared: &[&str]) -> BronzeTarget {
    BronzeTarget {
        family: "crm".into(),
        table: FamilyTable {
            schema: "public".into(),
            table: table.into(),
        },
        declared: declared
            .iter()
            .map(|c| CdcColumn::parse(c))
            .collect::<std::result::Result<_, _>>()
            .unwrap(),
        declared_keys: None,
        width: (1000, 100),
    }
}

fn rec(topic: &str, offset: i64, key: Option<&[u8]>, value: &[u8]) -> SourceRecord {
    let r = SourceRecord::new(topic, 2, offset, 1_764_412_400_000, value);
    match key {
        Some(k) => r.with_key(k),
        None => r,
    }
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-30T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn bronze_only() -> Schema {
    Schema::new(bronze_fields())
}

fn run(t: &BronzeTarget, recs: &[SourceRecord], table: &Schema) -> DecodedBronze {
    let refs: Vec<&SourceRecord> = recs.iter().collect();
    decode(t, &refs, table, (None, None), now()).unwrap()
}

fn texts(b: &RecordBatch, col: &str) -> Vec<Option<String>> {
    let a = b.column_by_name(col).unwrap().as_string::<i32>();
    (0..a.len())
        .map(|i| a.is_valid(i).then(|| a.value(i).to_string()))
        .collect()
}

fn micros(text: &str) -> i64 {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .timestamp_micros()
}

#[test]
fn postgres_with_schemas_every_op() {
    let topic = "crm.public.customers";
    let recs = [
        rec(
            topic,
            10,
            Some(fx!("pg_customers_1004.key.json")),
            fx!("pg_customers_r.json"),
        ),
        rec(
            topic,
            11,
            Some(fx!("pg_customers_1005.key.json")),
            fx!("pg_customers_c.json"),
        ),
        rec(
            topic,
            12,
            Some(fx!("pg_customers_1004.key.json")),
            fx!("pg_customers_u.json"),
        ),
        rec(
            topic,
            13,
            Some(fx!("pg_customers_1005.key.json")),
            fx!("pg_customers_d.json"),
        ),
        rec(topic, 14, None, fx!("pg_customers_t.json")),
    ];
    let t = target("customers", &[]);
    let d = run(&t, &recs, &bronze_only());
    assert!(d.rejects.is_empty(), "{:?}", d.rejects);
    assert_eq!(d.rows, [0, 1, 2, 3, 4]);
    let b = &d.batch;
    let op: Vec<_> = texts(b, "__op").into_iter().flatten().collect();
    assert_eq!(op, ["r", "c", "u", "d", "t"]);
    assert_eq!(
        texts(b, "__seq"),
        [
            "00000000000024023119",
            "00000000000024023200",
            "00000000000024023344",
            "00000000000024023480",
            "00000000000024023600",
        ]
        .map(|s| Some(s.to_string()))
    );
    assert_eq!(
        texts(b, "__key"),
        [
            Some(r#"{"id":1004}"#.to_string()),
            Some(r#"{"id":1005}"#.to_string()),
            Some(r#"{"id":1004}"#.to_string()),
            Some(r#"{"id":1005}"#.to_string()),
            None
        ]
    );
    assert_eq!(d.keys, ["id"]);
    let src = b
        .column_by_name("__source_ts")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    assert_eq!(src.value(0), 1_764_412_400_000_000);
    assert_eq!(src.value(4), 1_764_416_000_000_000);
    let ingested = b
        .column_by_name("__ingested_at")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    assert_eq!(ingested.value(3), now().timestamp_micros());
    assert_eq!(texts(b, "__topic")[1].as_deref(), Some(topic));
    let part = b
        .column_by_name("__partition")
        .unwrap()
        .as_primitive::<Int32Type>();
    let off = b
        .column_by_name("__offset")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!((part.value(2), off.value(2)), (2, 12));
    assert_eq!(b.column_by_name("__object").unwrap().null_count(), 5);
    // Row columns in the schema's order, all new.
    let names: Vec<&str> = d.new_fields.iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "id",
            "first_name",
            "last_name",
            "email",
            "balance",
            "birth_date",
            "created_at",
            "updated_at"
        ]
    );
    // The delete holds the key-only before image; the truncate no row at all.
    assert_eq!(
        texts(b, "first_name"),
        [
            Some("Ada".into()),
            Some("Bob".into()),
            Some("Augusta".into()),
            None,
            None
        ]
    );
    let id = b.column_by_name("id").unwrap().as_primitive::<Int32Type>();
    assert_eq!((id.value(3), id.is_null(4)), (1005, true));
    let bal = b.column_by_name("balance").unwrap();
    assert_eq!(bal.data_type(), &DataType::Decimal128(10, 2));
    let bal = bal.as_primitive::<Decimal128Type>();
    assert_eq!(
        (bal.value(0), bal.is_null(1), bal.value(2)),
        (123_450, true, -1995)
    );
    let born = b
        .column_by_name("birth_date")
        .unwrap()
        .as_primitive::<Date32Type>();
    assert_eq!(born.value(0), -56_600);
    let created = b
        .column_by_name("created_at")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    assert_eq!(created.value(0), 1_764_412_441_123_456);
    let updated = b
        .column_by_name("updated_at")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    assert_eq!(updated.value(0), micros("2026-11-29T10:34:01.123456Z"));
    assert_eq!(updated.value(2), micros("2026-11-29T11:00:00Z"));
    let props = t.properties((&d.keys, d.keys_from), d.position_kind.as_deref());
    assert!(
        props.contains(&(bronze::KEYS_PROPERTY.into(), "id".into())),
        "{props:?}"
    );
    // The fixture's keys are wrapped with their schema: the key schema named them.
    assert!(
        props.contains(&(bronze::KEYS_FROM_PROPERTY.into(), "key-schema".into())),
        "{props:?}"
    );
    assert!(
        props.contains(&(bronze::POSITIONS_PROPERTY.into(), "lsn".into())),
        "{props:?}"
    );
    assert!(props.contains(&(bronze::TABLE_PROPERTY.into(), "public.customers".into())));
}

#[test]
fn declared_keys_win_over_the_record_key() {
    let mut t = target("customers", &[]);
    t.declared_keys = Some(vec!["email".into(), "id".into()]);
    let p = t.properties((&["id".to_string()], "key-payload"), None);
    assert!(
        p.contains(&(bronze::KEYS_PROPERTY.into(), "email,id".into())),
        "{p:?}"
    );
    assert!(
        p.contains(&(bronze::KEYS_FROM_PROPERTY.into(), "config".into())),
        "{p:?}"
    );
    assert!(
        !target("x", &[])
            .properties((&[], ""), None)
            .iter()
            .any(|(k, _)| k == bronze::KEYS_PROPERTY)
    );
}

/// Each record's `__seq`, each decoded alone (the records may come from sources of different
/// kinds of position, which one table refuses to mix).
fn seqs(recs: &[SourceRecord]) -> Vec<String> {
    recs.iter()
        .flat_map(|r| {
            let d = run(&target("t", &[]), std::slice::from_ref(r), &bronze_only());
            assert!(d.rejects.is_empty(), "{:?}", d.rejects);
            texts(&d.batch, "__seq").into_iter().flatten()
        })
        .collect()
}

#[test]
fn seq_orders_mysql_binlog_across_file_rollover() {
    let topic = "crm.inventory.products";
    let key = Some(fx!("mysql_products_101.key.json"));
    // Offsets deliberately out of change order: the position decides first.
    let s = seqs(&[
        rec(topic, 30, key, fx!("mysql_products_u_rollover.json")),
        rec(topic, 10, key, fx!("mysql_products_c.json")),
        rec(topic, 20, key, fx!("mysql_products_u_row1.json")),
    ]);
    assert_eq!(
        s,
        [
            "0000000004.00000000000000000154.0000000000",
            "0000000003.00000000000000004696.0000000000",
            "0000000003.00000000000000004696.0000000001",
        ]
    );
    assert!(
        s[1] < s[2] && s[2] < s[0],
        "file 4 pos 154 is after file 3 pos 4696"
    );
}

#[test]
fn seq_of_sql_server_oracle_postgres_and_ts_fallback() {
    let s = seqs(&[
        rec(
            "a.dbo.customers",
            3,
            None,
            fx!("sqlserver_customers_u.json"),
        ),
        rec(
            "a.DEBEZIUM.CUSTOMERS",
            4,
            None,
            fx!("oracle_customers_c.json"),
        ),
    ]);
    assert_eq!(
        s,
        [
            "00000027:00000ac0:0007.00000027:00000ac0:0002.00000000000000000002",
            "00000000000002122185|00000000000000000004",
        ]
    );
    let v = |source: &str| {
        format!(r#"{{"before":null,"after":{{"id":1}},"source":{source},"op":"c"}}"#).into_bytes()
    };
    let s = seqs(&[
        rec("a.b.c", 1, None, &v(r#"{"lsn":99,"ts_ms":5}"#)),
        rec("a.b.c", 0, None, &v(r#"{"lsn":100,"ts_ms":4}"#)),
        rec("a.b.c", 2, None, &v(r#"{"ts_ms":1764412400000}"#)),
    ]);
    assert!(s[0] < s[1], "lsn 99 sorts before lsn 100 as text: {s:?}");
    assert_eq!(s[2], "00000001764412400000|00000000000000000002");
}

#[test]
fn bad_records_are_rejects_with_reasons() {
    let t = target("t", &[]);
    let ok = br#"{"before":null,"after":{"id":1},"source":{"lsn":1},"op":"c"}"#;
    let recs = [
        rec("a.b.c", 0, None, b"not json"),
        rec(
            "a.b.c",
            1,
            None,
            br#"{"schema":null,"payload":{"after":{"id":1}}}"#,
        ),
        rec(
            "a.b.c",
            2,
            None,
            br#"{"before":null,"after":{"id":1},"source":{"lsn":1},"op":"x"}"#,
        ),
        rec(
            "a.b.c",
            3,
            None,
            br#"{"before":null,"after":{"id":1},"source":{},"op":"c"}"#,
        ),
        rec("a.b.c", 4, Some(b"id=1"), ok),
        rec(
            "a.b.c",
            5,
            None,
            br#"{"before":null,"after":{"__op":1},"source":{"lsn":1},"op":"c"}"#,
        ),
        rec(
            "a.b.c",
            6,
            None,
            br#"{"before":null,"after":null,"source":{"lsn":1},"op":"c"}"#,
        ),
        rec("a.b.c", 7, None, ok),
    ];
    let d = run(&t, &recs, &bronze_only());
    assert_eq!(d.rows, [7]);
    let reasons: Vec<(usize, &str)> = d.rejects.iter().map(|(i, r)| (*i, r.as_str())).collect();
    let has = |i: usize, needle: &str| {
        assert!(
            reasons.iter().any(|(j, r)| *j == i && r.contains(needle)),
            "record {i} should be refused with {needle:?}: {reasons:?}"
        )
    };
    has(0, "not JSON");
    has(1, "no `op`");
    has(
        2,
        "`op` (a JSON string of 1 characters) is not a Debezium row change",
    );
    has(3, "no position");
    has(4, "key.converter");
    has(5, "bronze column");
    has(6, "`after`");
}

#[test]
fn new_columns_evolve_and_type_conflicts_are_rejects() {
    let topic = "crm.public.customers";
    let first = run(
        &target("customers", &[]),
        &[rec(
            topic,
            0,
            Some(fx!("pg_customers_1005.key.json")),
            fx!("pg_customers_c.json"),
        )],
        &bronze_only(),
    );
    let mut fields = bronze_fields();
    fields.extend(first.new_fields.iter().cloned());
    let table = Schema::new(fields);
    let d = run(
        &target("customers", &[]),
        &[
            rec(
                topic,
                1,
                Some(fx!("pg_customers_1006.key.json")),
                fx!("pg_customers_c_new_column.json"),
            ),
            rec(
                topic,
                2,
                Some(fx!("pg_customers_1007.key.json")),
                fx!("pg_customers_c_conflict.json"),
            ),
        ],
        &table,
    );
    assert_eq!(d.rows, [0]);
    let names: Vec<&str> = d.new_fields.iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["loyalty_tier"]);
    assert_eq!(texts(&d.batch, "loyalty_tier"), [Some("gold".into())]);
    assert_eq!(d.rejects.len(), 1);
    let why = &d.rejects[0].1;
    assert!(
        why.contains("column `email`") && why.contains("Utf8"),
        "{why}"
    );
}

mod life;
mod types;
