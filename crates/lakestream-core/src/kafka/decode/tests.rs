//! The decoder's behaviour on the values producers send: timestamps in every accepted form,
//! bad records isolated with their reasons, unknown fields, case-insensitive names.

use super::*;
use crate::schema::timestamp_type;
use deltalake::arrow::array::Int32Array;
use deltalake::arrow::array::{Array, TimestampMicrosecondArray};
use deltalake::arrow::datatypes::{DataType, Schema};
use std::sync::Arc;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("ts", timestamp_type(), false),
    ]))
}

fn run(values: &[&str], mode: SchemaMode) -> Decoded {
    let v: Vec<Option<&[u8]>> = values.iter().map(|s| Some(s.as_bytes())).collect();
    match decode_values(&v, &schema(), mode) {
        Ok(d) => d,
        Err(e) => panic!("decode failed: {e}"),
    }
}

fn ts_col(d: &Decoded) -> Vec<Option<i64>> {
    let Some(c) = d
        .batch
        .column(2)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
    else {
        panic!("ts is not a timestamp column");
    };
    c.iter().collect()
}

#[test]
fn timestamps_in_every_accepted_form() {
    let d = run(
        &[
            r#"{"id":1,"ts":"2022-04-04T10:15:30.123Z"}"#,
            r#"{"id":2,"ts":"2022-04-04T10:15:30Z"}"#,
            r#"{"id":3,"ts":"2022-04-04T12:15:30.123+02:00"}"#,
            r#"{"id":4,"ts":"2022-04-04 10:15:30"}"#,
            r#"{"id":5,"ts":1649067330123}"#,
            r#"{"id":6,"ts":"2022-04-04T10:15:30.123456"}"#,
        ],
        SchemaMode::Enforce,
    );
    assert!(d.rejects.is_empty(), "{:?}", d.rejects);
    let base = 1_649_067_330_000_000i64;
    assert_eq!(
        ts_col(&d),
        [
            Some(base + 123_000),
            Some(base),
            Some(base + 123_000),
            Some(base),
            Some(base + 123_000),
            Some(base + 123_456)
        ]
    );
}

#[test]
fn bad_records_are_isolated_with_reasons() {
    let d = run(
        &[
            r#"{"id":1,"name":"ok","ts":"2022-04-04T10:15:30Z"}"#,
            r#"[1,2]"#,
            r#"{"id":"abc","ts":"2022-04-04T10:15:30Z"}"#,
            r#"{"id":3000000000,"ts":"2022-04-04T10:15:30Z"}"#,
            r#"{"name":"no id","ts":"2022-04-04T10:15:30Z"}"#,
            r#"{"id":6,"ts":"yesterday"}"#,
            r#"{"id":7,"ts":"2022-04-04T10:15:30Z""#,
            r#"{"id":8,"name":"also ok","ts":"2022-04-04T10:15:30Z"}"#,
        ],
        SchemaMode::Enforce,
    );
    assert_eq!(d.rows, [0, 7]);
    let ids = d
        .batch
        .column(0)
        .as_any()
        .downcast_ref::<Int32Array>()
        .map(|a| a.values().to_vec());
    assert_eq!(ids, Some(vec![1, 8]));
    let reasons: Vec<(usize, &str)> = d.rejects.iter().map(|(i, r)| (*i, r.as_str())).collect();
    assert_eq!(reasons.len(), 6, "{reasons:?}");
    assert!(reasons[0].1.contains("not a JSON object"));
    assert!(reasons[4].1.contains("yesterday"), "{reasons:?}");
    assert!(reasons[5].1.contains("invalid JSON"), "{reasons:?}");
}

#[test]
fn invalid_utf8_is_rejected() {
    let bad: &[u8] = b"{\"id\":1,\"name\":\"\xff\xfe\",\"ts\":1}";
    let d = match decode_values(&[Some(bad), None], &schema(), SchemaMode::Enforce) {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(d.rejects.len(), 1);
    assert!(d.rejects[0].1.contains("UTF-8"));
    assert_eq!(d.batch.num_rows(), 0);
}

#[test]
fn enforce_counts_unknown_fields_merge_adds_columns() {
    let values = [
        r#"{"id":1,"ts":1,"extra":5}"#,
        r#"{"id":2,"ts":2,"extra":5.5,"flag":true,"nested":{"a":1}}"#,
        r#"{"id":3,"ts":3}"#,
    ];
    let d = run(&values, SchemaMode::Enforce);
    assert_eq!(d.unknown_fields_ignored, 4);
    assert_eq!(d.batch.num_columns(), 3);
    assert_eq!(d.rows, [0, 1, 2]);

    let d = run(&values, SchemaMode::Merge);
    let added: Vec<(String, DataType)> = d
        .new_fields
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    assert_eq!(
        added,
        [
            ("extra".to_string(), DataType::Float64),
            ("flag".to_string(), DataType::Boolean)
        ]
    );
    assert_eq!(
        d.unknown_fields_ignored, 1,
        "nested objects are not inferred"
    );
    assert_eq!(d.batch.num_columns(), 5);
    assert_eq!(d.batch.column(4).null_count(), 2);
}

#[test]
fn keys_differing_from_columns_only_in_case_are_those_columns() {
    let values = [
        r#"{"ID":1,"Name":"a","TS":1}"#,
        r#"{"id":2,"name":"b","NAME":"c","ts":2}"#,
        r#"{"id":3,"ts":3,"Extra":1}"#,
        r#"{"id":4,"ts":4,"extra":2.5,"EXTRA":null}"#,
        r#"{"id":5,"ts":5,"a b":1}"#,
        r#"{"id":6,"ts":6,"a b":null,"c=d":{"x":1}}"#,
    ];
    let d = run(&values, SchemaMode::Merge);
    assert_eq!(d.rows, [0, 2, 3, 5]);
    let reasons: Vec<(usize, &str)> = d.rejects.iter().map(|(i, r)| (*i, r.as_str())).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_eq!(reasons[0].0, 1);
    assert!(reasons[0].1.contains("differ only in case"), "{reasons:?}");
    assert_eq!(reasons[1].0, 4);
    assert!(reasons[1].1.contains("column mapping"), "{reasons:?}");
    let added: Vec<(&str, &DataType)> = d
        .new_fields
        .iter()
        .map(|f| (f.name().as_str(), f.data_type()))
        .collect();
    assert_eq!(added, [("Extra", &DataType::Float64)]);
    let ids = d
        .batch
        .column(0)
        .as_any()
        .downcast_ref::<Int32Array>()
        .map(|a| a.values().to_vec());
    assert_eq!(ids, Some(vec![1, 3, 4, 6]));
    assert_eq!(ts_col(&d), [Some(1000), Some(3000), Some(4000), Some(6000)]);
    assert_eq!(d.batch.column(1).null_count(), 3, "Name -> name");
    assert_eq!(
        d.unknown_fields_ignored, 1,
        "the nested `c=d` is not a column"
    );

    // Enforce mode: the column in another case is still the column.
    let d = run(
        &[r#"{"Id":7,"TS":"2022-04-04T10:15:30Z"}"#],
        SchemaMode::Enforce,
    );
    assert_eq!((d.rows.len(), d.unknown_fields_ignored), (1, 0));
}

#[test]
fn reserved_columns_are_never_inferred() {
    let v: Vec<Option<&[u8]>> = vec![Some(br#"{"id":1,"ts":1,"Kafka_Offset":9}"#)];
    let reserved: HashSet<String> = ["kafka_offset".to_string()].into();
    let d = match decode_values_reserving(&v, &schema(), SchemaMode::Merge, &reserved) {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    assert!(d.new_fields.is_empty());
    assert_eq!((d.rows.len(), d.unknown_fields_ignored), (1, 1));
}

#[test]
fn timestamps_outside_years_1_to_9999_are_rejected() {
    let d = run(
        &[
            r#"{"id":1,"ts":1764537184835000}"#,
            r#"{"id":2,"ts":"9999-12-31T23:59:59.999999Z"}"#,
            r#"{"id":3,"ts":"0001-01-01T00:00:00Z"}"#,
            r#"{"id":4,"ts":-62135596800001}"#,
        ],
        SchemaMode::Enforce,
    );
    assert_eq!(d.rows, [1, 2]);
    let reasons: Vec<&str> = d.rejects.iter().map(|r| r.1.as_str()).collect();
    assert!(reasons[0].contains("year 57885"), "{reasons:?}");
    assert!(reasons[0].contains("microseconds"), "{reasons:?}");
    assert!(reasons[1].contains("year 0,"), "{reasons:?}");
}

#[test]
fn epoch_ms_overflow_is_rejected() {
    let d = run(
        &[r#"{"id":1,"ts":9223372036854775807}"#],
        SchemaMode::Enforce,
    );
    assert_eq!(d.rejects.len(), 1);
}
