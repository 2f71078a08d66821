//! Cells -> Arrow columns of a given type: [`convert`] says whether a cell fits a column (and
//! normalises it: integers widened, decimals rescaled), [`array`] builds the column.

use super::types::Cell;
use crate::error::Result;
use deltalake::arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array,
    Int64Array, StringArray, TimestampMicrosecondArray, new_null_array,
};
use deltalake::arrow::datatypes::{DataType, TimeUnit};
use std::sync::Arc;

pub(super) fn kind(c: &Cell) -> &'static str {
    match c {
        Cell::Null => "null",
        Cell::Bool(_) => "a boolean",
        Cell::Int(_) => "an integer",
        Cell::Float(_) => "a floating-point number",
        Cell::Text(_) => "text",
        Cell::Bytes(_) => "bytes",
        Cell::Date(_) => "a date",
        Cell::Micros(_) => "a timestamp",
        Cell::Decimal(_, _) => "a decimal",
    }
}

/// `cell` as a value of a column of type `to`; `Err` says why it does not fit.
pub(super) fn convert(cell: Cell, to: &DataType) -> std::result::Result<Cell, String> {
    let out = match (cell, to) {
        (Cell::Null, _) => Cell::Null,
        (c @ Cell::Bool(_), DataType::Boolean) => c,
        (Cell::Int(v), DataType::Int32) => {
            i32::try_from(v)
                .map_err(|_| "the value does not fit the column's int32".to_string())?;
            Cell::Int(v)
        }
        (c @ Cell::Int(_), DataType::Int64) => c,
        (Cell::Int(v), DataType::Float64) => Cell::Float(v as f64),
        (c @ Cell::Float(_), DataType::Float64) => c,
        (c @ Cell::Text(_), DataType::Utf8) => c,
        (c @ Cell::Bytes(_), DataType::Binary) => c,
        (c @ Cell::Date(_), DataType::Date32) => c,
        (c @ Cell::Micros(_), DataType::Timestamp(TimeUnit::Microsecond, _)) => c,
        (Cell::Decimal(v, s), DataType::Decimal128(p, ts)) if *ts >= s => {
            let v = 10i128
                .checked_pow((*ts - s) as u32)
                .and_then(|m| v.checked_mul(m))
                .filter(|v| v.unsigned_abs() < 10u128.pow(u32::from(*p)))
                .ok_or_else(|| format!("the value does not fit the column's decimal({p},{ts})"))?;
            Cell::Decimal(v, *ts)
        }
        (c, to) => {
            return Err(format!(
                "the column is {to} in the table, this record has {}",
                kind(&c)
            ));
        }
    };
    Ok(out)
}

/// A column of type `dt` from cells already [`convert`]ed to it.
pub(super) fn array(dt: &DataType, cells: Vec<Cell>) -> Result<ArrayRef> {
    let n = cells.len();
    let a: ArrayRef = match dt {
        DataType::Boolean => Arc::new(BooleanArray::from_iter(cells.into_iter().map(
            |c| match c {
                Cell::Bool(b) => Some(b),
                _ => None,
            },
        ))),
        DataType::Int32 => Arc::new(Int32Array::from_iter(cells.into_iter().map(|c| match c {
            Cell::Int(v) => i32::try_from(v).ok(),
            _ => None,
        }))),
        DataType::Int64 => Arc::new(Int64Array::from_iter(cells.into_iter().map(|c| match c {
            Cell::Int(v) => Some(v),
            _ => None,
        }))),
        DataType::Float64 => Arc::new(Float64Array::from_iter(cells.into_iter().map(
            |c| match c {
                Cell::Float(v) => Some(v),
                _ => None,
            },
        ))),
        DataType::Utf8 => Arc::new(StringArray::from_iter(cells.into_iter().map(|c| match c {
            Cell::Text(s) => Some(s),
            _ => None,
        }))),
        DataType::Binary => Arc::new(BinaryArray::from_iter(cells.into_iter().map(|c| match c {
            Cell::Bytes(b) => Some(b),
            _ => None,
        }))),
        DataType::Date32 => Arc::new(Date32Array::from_iter(cells.into_iter().map(|c| match c {
            Cell::Date(d) => Some(d),
            _ => None,
        }))),
        DataType::Timestamp(TimeUnit::Microsecond, tz) => Arc::new(
            TimestampMicrosecondArray::from_iter(cells.into_iter().map(|c| match c {
                Cell::Micros(v) => Some(v),
                _ => None,
            }))
            .with_timezone_opt(tz.clone()),
        ),
        DataType::Decimal128(p, s) => Arc::new(
            Decimal128Array::from_iter(cells.into_iter().map(|c| match c {
                Cell::Decimal(v, _) => Some(v),
                _ => None,
            }))
            .with_precision_and_scale(*p, *s)?,
        ),
        // Only nulls reach a column of another type (`convert` refuses the rest).
        other => new_null_array(other, n),
    };
    Ok(a)
}
