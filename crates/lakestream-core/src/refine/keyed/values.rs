//! What a CDC change's row values mean beside the values themselves (ARCHITECTURE.md "Apply"):
//! - the TOAST placeholder ([`Toast`]): PostgreSQL's Debezium connector sends
//!   `unavailable.value.placeholder` in a column an UPDATE did not touch; a cell holding it
//!   takes the key's previous value of that column ([`resolve`]), and null when there is none:
//!   it is never stored as data;
//! - a change whose row columns (every column but the `__*` metadata) equal the key's open
//!   version changes nothing ([`RowValues`]): it makes no version and no change feed row.
//!
//! Shared by the SCD1 apply (keyed rewrite and `refine/cdc/scd1.rs`) and the SCD2 rebuild.

use crate::error::Result;
use base64::Engine as _;
use deltalake::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array};
use deltalake::arrow::compute::{cast, nullif, take};
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::row::{RowConverter, Rows, SortField};
/// Lakestream's metadata columns start with this (`__seq`, `__START_AT`, ...): they are not
/// the row's values.
const METADATA_PREFIX: &str = "__";

/// The TOAST placeholder of a Debezium source, in the forms a bronze cell can hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toast {
    /// The placeholder text (a text or JSON column).
    text: String,
    /// Its UTF-8 bytes in base64 (a `bytea` column without schemas: base64 text).
    base64: String,
}

impl Toast {
    /// The placeholder `text` (`unavailable.value.placeholder`).
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_string(),
            base64: base64::engine::general_purpose::STANDARD.encode(text.as_bytes()),
        }
    }

    /// Which cells of `column` hold the placeholder; `None` when none does (or the column's
    /// type cannot hold it).
    pub fn marks(&self, column: &ArrayRef) -> Result<Option<BooleanArray>> {
        let marks: BooleanArray = match column.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let text = cast(column, &DataType::Utf8)?;
                text.as_string::<i32>()
                    .iter()
                    .map(|v| Some(v.is_some_and(|v| v == self.text || v == self.base64)))
                    .collect()
            }
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
                let bytes = cast(column, &DataType::Binary)?;
                bytes
                    .as_binary::<i32>()
                    .iter()
                    .map(|v| Some(v.is_some_and(|v| v == self.text.as_bytes())))
                    .collect()
            }
            _ => return Ok(None),
        };
        Ok((marks.true_count() > 0).then_some(marks))
    }
}

/// Where a change's placeholder cells take their value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// The previous version of the key is this row (of the same batch).
    Row(usize),
    /// The key has no open version (first change, or after a delete): null.
    Nothing,
    /// Not known here (SCD1: the silver row, resolved later): the placeholder stays.
    Unknown,
}

/// `batch` with the placeholder cells of the `steps` rows resolved: step `(i, before)` takes
/// row `i`'s placeholder cells from `before` (already resolved: a `Row` must be an earlier
/// step or a row without placeholders). Key columns (`keys`) and metadata columns are left
/// as they are. Returns `batch` itself when no cell holds the placeholder.
pub fn resolve(
    batch: &RecordBatch,
    toast: &Toast,
    keys: &[String],
    steps: &[(usize, Before)],
) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    let mut changed = false;
    for (c, field) in batch.schema().fields().iter().enumerate() {
        if field.name().starts_with(METADATA_PREFIX) || keys.contains(field.name()) {
            continue;
        }
        let Some(marks) = toast.marks(&columns[c])? else {
            continue;
        };
        // The row each cell is taken from (`None`: null).
        let mut from: Vec<Option<u32>> = (0..batch.num_rows() as u32).map(Some).collect();
        for &(i, before) in steps {
            if !marks.value(i) {
                continue;
            }
            from[i] = match before {
                Before::Row(p) => from[p],
                Before::Nothing => None,
                Before::Unknown => Some(i as u32),
            };
        }
        columns[c] = take(columns[c].as_ref(), &UInt32Array::from(from), None)?;
        changed = true;
    }
    if !changed {
        return Ok(batch.clone());
    }
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// `batch` with every cell still holding the placeholder set to null (never stored as data).
pub fn null_placeholders(
    batch: &RecordBatch,
    toast: &Toast,
    keys: &[String],
) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    let mut changed = false;
    for (c, field) in batch.schema().fields().iter().enumerate() {
        if field.name().starts_with(METADATA_PREFIX) || keys.contains(field.name()) {
            continue;
        }
        if let Some(marks) = toast.marks(&columns[c])? {
            columns[c] = nullif(columns[c].as_ref(), &marks)?;
            changed = true;
        }
    }
    if !changed {
        return Ok(batch.clone());
    }
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// The row values of batches in one schema (every column but the `__*` ones), encoded so that
/// equal bytes are equal values (nulls equal, NaN equal to NaN).
pub struct RowValues {
    converter: RowConverter,
    columns: Vec<String>,
}

impl RowValues {
    /// For batches of `batch`'s schema.
    pub fn new(batch: &RecordBatch) -> Result<Self> {
        let schema = batch.schema();
        let fields: Vec<_> = schema
            .fields()
            .iter()
            .filter(|f| !f.name().starts_with(METADATA_PREFIX))
            .collect();
        let converter = RowConverter::new(
            fields
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        Ok(Self {
            converter,
            columns: fields.iter().map(|f| f.name().clone()).collect(),
        })
    }

    /// The encoded row values of `batch` (same schema as the one given to [`new`](Self::new)).
    pub fn encode(&self, batch: &RecordBatch) -> Result<Rows> {
        let columns: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|c| {
                batch.column_by_name(c).cloned().ok_or_else(|| {
                    crate::error::Error::Internal(format!("no column `{c}` to compare"))
                })
            })
            .collect::<Result<_>>()?;
        Ok(self.converter.convert_columns(&columns)?)
    }
}

/// Whether row `i` of `a` and row `j` of `b` (encoded by one [`RowValues`]) are equal.
pub fn same(a: &Rows, i: usize, b: &Rows, j: usize) -> bool {
    a.row(i) == b.row(j)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{BinaryArray, Int64Array, StringArray};
    use std::sync::Arc;

    const P: &str = "__debezium_unavailable_value";

    fn batch(ids: &[i64], v: &[Option<&str>], blob: &[Option<&[u8]>]) -> Result<RecordBatch> {
        Ok(RecordBatch::try_from_iter_with_nullable([
            (
                "id",
                Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
                false,
            ),
            (
                "v",
                Arc::new(StringArray::from(v.to_vec())) as ArrayRef,
                true,
            ),
            (
                "blob",
                Arc::new(BinaryArray::from(blob.to_vec())) as ArrayRef,
                true,
            ),
            (
                "__seq",
                Arc::new(StringArray::from(
                    (0..ids.len()).map(|i| i.to_string()).collect::<Vec<_>>(),
                )) as ArrayRef,
                false,
            ),
        ])?)
    }

    #[test]
    fn placeholders_in_text_base64_and_bytes_take_the_previous_value_or_null() -> Result<()> {
        let t = Toast::new(P);
        let b64 = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";
        let b = batch(
            &[1, 1, 1, 2],
            &[Some("big"), Some(P), Some(b64), Some(P)],
            &[
                Some(b"x"),
                Some(P.as_bytes()),
                Some(b"y"),
                Some(P.as_bytes()),
            ],
        )?;
        let steps = [
            (1, Before::Row(0)),
            (2, Before::Row(1)),
            (3, Before::Nothing),
        ];
        let r = resolve(&b, &t, &["id".into()], &steps)?;
        let v: Vec<Option<&str>> = r.column(1).as_string::<i32>().iter().collect();
        assert_eq!(v, [Some("big"), Some("big"), Some("big"), None]);
        let blob: Vec<Option<&[u8]>> = r.column(2).as_binary::<i32>().iter().collect();
        assert_eq!(blob, [Some(&b"x"[..]), Some(b"x"), Some(b"y"), None]);
        // Unknown keeps the placeholder for later; null_placeholders never lets it be stored.
        let r = resolve(&b, &t, &["id".into()], &[(1, Before::Unknown)])?;
        assert_eq!(r.column(1).as_string::<i32>().value(1), P);
        let n = null_placeholders(&r, &t, &["id".into()])?;
        assert_eq!(n.column(1).null_count(), 3);
        assert_eq!(n.column(2).null_count(), 2);
        Ok(())
    }

    #[test]
    fn row_values_ignore_metadata_columns() -> Result<()> {
        let b = batch(
            &[1, 1, 1],
            &[Some("a"), Some("a"), None],
            &[None, None, None],
        )?;
        let rv = RowValues::new(&b)?;
        let rows = rv.encode(&b)?;
        assert!(same(&rows, 0, &rows, 1), "only `__seq` differs");
        assert!(!same(&rows, 1, &rows, 2));
        Ok(())
    }
}
