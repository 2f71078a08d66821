//! Value types: Debezium semantic types with schemas, declared and inferred types without.

use super::super::types::parse_decimal;
use super::*;

#[test]
fn semantic_types_with_schemas() {
    let recs = [rec(
        "crm.public.measurements",
        0,
        Some(fx!("pg_measurements_1.key.json")),
        fx!("pg_measurements_c.json"),
    )];
    let d = run(&target("measurements", &[]), &recs, &bronze_only());
    assert!(d.rejects.is_empty(), "{:?}", d.rejects);
    let b = &d.batch;
    let ty = |c: &str| b.column_by_name(c).unwrap().data_type().clone();
    let ts = |c: &str| {
        b.column_by_name(c)
            .unwrap()
            .as_primitive::<TimestampMicrosecondType>()
            .value(0)
    };
    let i64_ = |c: &str| {
        b.column_by_name(c)
            .unwrap()
            .as_primitive::<Int64Type>()
            .value(0)
    };
    assert_eq!(ty("d"), DataType::Date32);
    assert_eq!(
        b.column_by_name("d")
            .unwrap()
            .as_primitive::<Date32Type>()
            .value(0),
        20_786
    );
    for c in ["ts_ms", "ts_us", "ts_ns", "ts_connect", "ts_zoned"] {
        assert_eq!(ty(c), crate::schema::timestamp_type(), "{c}");
    }
    assert_eq!(ts("ts_ms"), 1_795_948_441_123_000);
    assert_eq!(ts("ts_us"), 1_795_948_441_123_456);
    assert_eq!(ts("ts_ns"), 1_795_948_441_123_456);
    assert_eq!(ts("ts_connect"), 1_795_948_441_123_000);
    assert_eq!(ts("ts_zoned"), micros("2026-11-29T15:34:01.123456Z"));
    // Times: int64 microseconds since midnight (10:24:01.123456).
    assert_eq!(
        (ty("t_us"), i64_("t_ms")),
        (DataType::Int64, 37_441_123_000)
    );
    assert_eq!(
        (i64_("t_us"), i64_("t_ns")),
        (37_441_123_456, 37_441_123_456)
    );
    let dec = |c: &str| {
        b.column_by_name(c)
            .unwrap()
            .as_primitive::<Decimal128Type>()
            .value(0)
    };
    assert_eq!(ty("price"), DataType::Decimal128(12, 3));
    assert_eq!(dec("price"), -1_234_567);
    assert_eq!(ty("big"), DataType::Decimal128(38, 0));
    assert_eq!(dec("big"), 123_456_789_012_345_678_901_234_567_890);
    assert_eq!(texts(b, "doc")[0].as_deref(), Some(r#"{"a": [1, 2]}"#));
    assert_eq!(texts(b, "tags")[0].as_deref(), Some(r#"["x","y"]"#));
    assert_eq!(
        texts(b, "location")[0].as_deref(),
        Some(r#"{"x":1.5,"y":-2.0}"#)
    );
    assert_eq!(
        b.column_by_name("raw").unwrap().as_binary::<i32>().value(0),
        b"\x00\xffhi"
    );
    assert_eq!(ty("small"), DataType::Int32);
    assert_eq!(
        b.column_by_name("small")
            .unwrap()
            .as_primitive::<Int32Type>()
            .value(0),
        -7
    );
    assert_eq!(i64_("count"), 9_007_199_254_740_993);
    assert_eq!(
        b.column_by_name("ratio")
            .unwrap()
            .as_primitive::<Float64Type>()
            .value(0),
        0.25
    );
    assert!(b.column_by_name("active").unwrap().as_boolean().value(0));
}

#[test]
fn variable_scale_decimal_is_refused_naming_the_setting() {
    let recs = [rec(
        "crm.public.measurements",
        1,
        Some(fx!("pg_measurements_2.key.json")),
        fx!("pg_measurements_variable_scale.json"),
    )];
    let d = run(&target("measurements", &[]), &recs, &bronze_only());
    assert_eq!(d.batch.num_rows(), 0);
    assert_eq!(d.rejects.len(), 1);
    let why = &d.rejects[0].1;
    assert!(
        why.contains("column `amount`") && why.contains("decimal.handling.mode=string"),
        "{why}"
    );
}

#[test]
fn without_schemas_types_come_from_declarations_or_values() {
    let topic = "crm.public.orders";
    let key = fx!("plain_orders_2001.key.json");
    let recs = [
        rec(topic, 5, Some(key), fx!("plain_orders_c.json")),
        rec(topic, 6, Some(key), fx!("plain_orders_u.json")),
    ];
    let t = target(
        "orders",
        &[
            "amount decimal(10,2)",
            "created_at timestamp",
            "ship_by date",
        ],
    );
    let d = run(&t, &recs, &bronze_only());
    assert!(d.rejects.is_empty(), "{:?}", d.rejects);
    let b = &d.batch;
    assert_eq!(texts(b, "__key")[0].as_deref(), Some(r#"{"id":2001}"#));
    assert_eq!(d.keys, ["id"]);
    let amount = b.column_by_name("amount").unwrap();
    assert_eq!(amount.data_type(), &DataType::Decimal128(10, 2));
    let amount = amount.as_primitive::<Decimal128Type>();
    assert_eq!((amount.value(0), amount.value(1)), (123_450, 9_990));
    let created = b
        .column_by_name("created_at")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    assert_eq!(created.value(0), micros("2026-11-29T10:34:01.123456Z"));
    // Epoch milliseconds (time.precision.mode=connect).
    assert_eq!(created.value(1), 1_764_412_441_123_000);
    let ship = b
        .column_by_name("ship_by")
        .unwrap()
        .as_primitive::<Date32Type>();
    assert_eq!((ship.value(0), ship.value(1)), (20_790, 20_791));
    let qty = b.column_by_name("quantity").unwrap();
    assert_eq!(qty.data_type(), &DataType::Int64);
    let weight = b
        .column_by_name("weight")
        .unwrap()
        .as_primitive::<Float64Type>();
    assert_eq!((weight.value(0), weight.value(1)), (1.25, 2.0));
    assert_eq!(
        texts(b, "meta"),
        [Some(r#"{"channel":"web","tags":["a"]}"#.into()), None]
    );
    let gift = b.column_by_name("gift").unwrap().as_boolean();
    assert_eq!((gift.value(0), gift.value(1)), (false, true));
}

#[test]
fn base64_decimal_without_schemas_is_refused_naming_the_setting() {
    let t = target("orders", &["amount decimal(10,2)"]);
    let recs = [rec(
        "crm.public.orders",
        7,
        Some(fx!("plain_orders_2001.key.json")),
        fx!("plain_orders_u_base64_decimal.json"),
    )];
    let d = run(&t, &recs, &bronze_only());
    assert_eq!(d.rejects.len(), 1, "{:?}", d.rejects);
    assert!(
        d.rejects[0].1.contains("decimal.handling.mode=string"),
        "{:?}",
        d.rejects
    );
    // Without the declaration the same text is just a string.
    let d = run(&target("orders", &[]), &recs, &bronze_only());
    assert!(d.rejects.is_empty());
    assert_eq!(texts(&d.batch, "amount")[0].as_deref(), Some("AeI6"));
}

#[test]
fn decimal_text() {
    assert_eq!(parse_decimal("1234.50", 10, 2), Ok(123_450));
    assert_eq!(parse_decimal("-0.5", 10, 2), Ok(-50));
    assert_eq!(parse_decimal("7", 3, 2), Ok(700));
    assert!(parse_decimal("1.234", 10, 2).is_err());
    assert!(parse_decimal("100000000.00", 10, 2).is_err());
    assert!(parse_decimal("", 10, 2).is_err());
    assert!(parse_decimal("1e3", 10, 2).is_err());
}
