//! The SCD2 rebuild on batches (issue 37): the running-maximum clock, no version for a change
//! that changes nothing, TOAST placeholders, and a rebuild from stored rows plus a late change
//! equal to one from every change at once.

use super::history::{RunChanges, rebuild};
use super::keys::KeyCodec;
use super::silver_schema;
use crate::error::Result;
use crate::refine::keyed::values::Toast;
use deltalake::arrow::array::{
    ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int64Type};
use std::sync::Arc;

const P: &str = "__debezium_unavailable_value";

/// (id, v, doc, op, seq, source time s).
type Change<'a> = (i64, &'a str, Option<&'a str>, &'a str, &'a str, i64);

fn changes(c: &[Change<'_>]) -> Result<RecordBatch> {
    let ts = |v: Vec<Option<i64>>| -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC"))
    };
    Ok(RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(c.iter().map(|c| c.0))) as ArrayRef,
        ),
        (
            "v",
            Arc::new(StringArray::from_iter_values(c.iter().map(|c| c.1))),
        ),
        (
            "doc",
            Arc::new(StringArray::from_iter(c.iter().map(|c| c.2))),
        ),
        (
            "__op",
            Arc::new(StringArray::from_iter_values(c.iter().map(|c| c.3))),
        ),
        (
            "__seq",
            Arc::new(StringArray::from_iter_values(c.iter().map(|c| c.4))),
        ),
        (
            "__source_ts",
            ts(c.iter().map(|c| Some(c.5 * 1_000_000)).collect()),
        ),
        ("__ingested_at", ts(vec![None; c.len()])),
    ])?)
}

/// A rebuilt row: (id, v, doc, seq, start s, end seq, end s), sorted.
type Row = (
    i64,
    String,
    String,
    String,
    Option<i64>,
    String,
    Option<i64>,
);

fn rows(b: &RecordBatch) -> Result<Vec<Row>> {
    let text = |n: &str| -> Result<Vec<String>> {
        let c = cast(
            b.column_by_name(n).map_or(&b.columns()[0], |c| c),
            &DataType::Utf8,
        )?;
        Ok(c.as_string::<i32>()
            .iter()
            .map(|v| v.unwrap_or("-").to_string())
            .collect())
    };
    let int = |n: &str| -> Result<Vec<Option<i64>>> {
        let c = cast(
            b.column_by_name(n).map_or(&b.columns()[0], |c| c),
            &DataType::Int64,
        )?;
        Ok(c.as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(|v| v / 1_000_000))
            .collect())
    };
    let (v, doc, seq, end) = (text("v")?, text("doc")?, text("__seq")?, text("__END_SEQ")?);
    let (start, end_at) = (int("__START_AT")?, int("__END_AT")?);
    let ids = cast(b.column(0), &DataType::Int64)?;
    let ids = ids.as_primitive::<Int64Type>();
    let mut out: Vec<Row> = (0..b.num_rows())
        .map(|i| {
            let (v, d, s, e) = (v[i].clone(), doc[i].clone(), seq[i].clone(), end[i].clone());
            (ids.value(i), v, d, s, start[i], e, end_at[i])
        })
        .collect();
    out.sort_by(|a, b| (a.0, &a.3).cmp(&(b.0, &b.3)));
    Ok(out)
}

/// Rebuild `new` over the silver rows `old` (none: a new silver).
fn apply(old: Option<&RecordBatch>, new: &[Change<'_>]) -> Result<RecordBatch> {
    let c = changes(new)?;
    let schema = silver_schema(old.map(RecordBatch::schema), &c.schema());
    let codec = KeyCodec::new(&schema, &["id".to_string()])?;
    let empty = RecordBatch::new_empty(schema.clone());
    let old = match old {
        Some(o) => RecordBatch::try_new(schema.clone(), o.columns().to_vec())?,
        None => empty,
    };
    let toast = Toast::new(P);
    let run = RunChanges {
        changes: &c,
        truncates: &[],
        toast: Some(&toast),
    };
    Ok(rebuild(&schema, &codec, &old, run, &[])?.rows)
}

fn row(id: i64, v: &str, doc: &str, seq: &str, start: i64, end: Option<(&str, i64)>) -> Row {
    (
        id,
        v.into(),
        doc.into(),
        seq.into(),
        Some(start),
        end.map_or("-".into(), |e| e.0.into()),
        end.map(|e| e.1),
    )
}

#[test]
fn a_version_starts_no_earlier_than_the_event_before_it() -> Result<()> {
    // DMS: the full-load row at its transfer time (40), then a change committed during the
    // load (35); a delete at 30 and a re-insert at 50.
    let got = rows(&apply(
        None,
        &[
            (1, "loaded", None, "r", "0|40", 40),
            (1, "changed", None, "u", "1|35", 35),
            (1, "changed", None, "d", "1|36", 30),
            (1, "again", None, "c", "1|50", 50),
        ],
    )?)?;
    assert_eq!(
        got,
        [
            row(1, "loaded", "-", "0|40", 40, Some(("1|35", 40))),
            row(1, "changed", "-", "1|35", 40, Some(("1|36", 40))),
            row(1, "again", "-", "1|50", 50, None),
        ]
    );
    Ok(())
}

#[test]
fn a_late_change_over_stored_rows_gives_what_every_change_at_once_gives() -> Result<()> {
    let early: [Change<'_>; 3] = [
        (1, "a", None, "c", "10", 50),
        (1, "b", None, "u", "30", 20),
        (1, "c", None, "u", "40", 60),
    ];
    let late: Change<'_> = (1, "late", None, "u", "20", 70);
    let stored = apply(None, &early)?;
    let two_runs = rows(&apply(Some(&stored), &[late])?)?;
    let mut all = early.to_vec();
    all.insert(1, late);
    let one_run = rows(&apply(None, &all)?)?;
    assert_eq!(two_runs, one_run);
    assert_eq!(
        one_run,
        [
            row(1, "a", "-", "10", 50, Some(("20", 70))),
            row(1, "late", "-", "20", 70, Some(("30", 70))),
            row(1, "b", "-", "30", 70, Some(("40", 70))),
            row(1, "c", "-", "40", 70, None),
        ]
    );
    Ok(())
}

#[test]
fn a_change_equal_to_the_open_version_makes_none() -> Result<()> {
    let got = rows(&apply(
        None,
        &[
            (1, "A", None, "r", "10", 10),
            (1, "A", None, "r", "20", 20),
            (1, "B", None, "u", "30", 30),
            (1, "B", None, "d", "40", 40),
            (1, "B", None, "c", "50", 50),
        ],
    )?)?;
    assert_eq!(
        got,
        [
            row(1, "A", "-", "10", 10, Some(("30", 30))),
            row(1, "B", "-", "30", 30, Some(("40", 40))),
            row(1, "B", "-", "50", 50, None),
        ]
    );
    // Over stored rows: a re-snapshot of the open version adds nothing; a late change
    // that makes a stored version a repeat of it removes that version.
    let stored = apply(
        None,
        &[(2, "x", None, "c", "10", 10), (2, "y", None, "u", "30", 30)],
    )?;
    let again = rows(&apply(Some(&stored), &[(2, "y", None, "r", "40", 40)])?)?;
    assert_eq!(again, rows(&stored)?);
    let late = rows(&apply(Some(&stored), &[(2, "y", None, "u", "20", 20)])?)?;
    assert_eq!(
        late,
        [
            row(2, "x", "-", "10", 10, Some(("20", 20))),
            row(2, "y", "-", "20", 20, None),
        ]
    );
    Ok(())
}

#[test]
fn a_toast_placeholder_takes_the_previous_versions_value() -> Result<()> {
    let got = rows(&apply(
        None,
        &[
            (1, "a", Some("big"), "c", "10", 10),
            (1, "b", Some(P), "u", "20", 20),
            // Equal once resolved: no version.
            (1, "b", Some(P), "u", "25", 25),
            (1, "b", None, "d", "30", 30),
            (1, "c", Some(P), "c", "40", 40),
        ],
    )?)?;
    assert_eq!(
        got,
        [
            row(1, "a", "big", "10", 10, Some(("20", 20))),
            row(1, "b", "big", "20", 20, Some(("30", 30))),
            row(1, "c", "-", "40", 40, None),
        ]
    );
    Ok(())
}
