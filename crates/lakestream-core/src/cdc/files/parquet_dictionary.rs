//! Dictionary-encoded text bounded when it is expanded. A Parquet column whose dictionary holds
//! one large value that many rows reference decodes to rows x value bytes (a 2 KB file held
//! 450 MB). Top-level text and binary columns are therefore read as Arrow dictionaries (as
//! stored: nothing expanded), each batch's expanded size is computed from the keys, and only a
//! prefix of rows that expands within the decoded bound is expanded at a time; the rest waits
//! for the next chunk.

use deltalake::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;
use std::sync::Arc;

/// `schema` with its top-level text and binary columns read as `Dictionary(Int32, _)`, or
/// `None` when it has none.
pub fn dictionary_schema(schema: &Schema) -> Option<SchemaRef> {
    let mut any = false;
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 | DataType::Binary => {
                any = true;
                let t = DataType::Dictionary(
                    Box::new(DataType::Int32),
                    Box::new(f.data_type().clone()),
                );
                f.as_ref().clone().with_data_type(t)
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    any.then(|| Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())))
}

/// The bytes each row of `column` expands to (0 for a column that is not such a dictionary).
fn expanded_row_bytes(column: &ArrayRef, out: &mut [u64]) {
    let Some(dict) = column.as_dictionary_opt::<Int32Type>() else {
        return;
    };
    let values = dict.values();
    let len = |i: usize| -> u64 {
        match values.data_type() {
            DataType::Utf8 => values.as_string::<i32>().value_length(i) as u64,
            DataType::Binary => values.as_binary::<i32>().value_length(i) as u64,
            _ => 0,
        }
    };
    for (row, key) in dict.keys().iter().enumerate() {
        if let Some(k) = key
            .and_then(|k| usize::try_from(k).ok())
            .filter(|k| *k < values.len())
        {
            out[row] += len(k);
        }
    }
}

/// Split `batch` after the longest prefix (at least one row) whose dictionary columns expand
/// to at most `budget` bytes; returns the prefix, expanded, and the rest.
pub fn take_within(
    batch: RecordBatch,
    budget: u64,
) -> Result<(RecordBatch, Option<RecordBatch>), ArrowError> {
    let mut sizes = vec![0u64; batch.num_rows()];
    for c in batch.columns() {
        expanded_row_bytes(c, &mut sizes);
    }
    let mut total = 0u64;
    let mut take = 0;
    for s in &sizes {
        if take > 0 && total + s > budget {
            break;
        }
        total += s;
        take += 1;
    }
    let rest = (take < batch.num_rows()).then(|| batch.slice(take, batch.num_rows() - take));
    Ok((expand(&batch.slice(0, take))?, rest))
}

/// Every dictionary column of `batch` cast to its value type.
fn expand(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        match c.data_type() {
            DataType::Dictionary(_, value) => {
                columns.push(cast(c, value)?);
                fields.push(f.as_ref().clone().with_data_type(value.as_ref().clone()));
            }
            _ => {
                columns.push(c.clone());
                fields.push(f.as_ref().clone());
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{DictionaryArray, Int64Array, StringArray};

    #[test]
    fn a_batch_is_expanded_a_prefix_at_a_time() {
        let keys = deltalake::arrow::array::Int32Array::from(vec![0, 1, 0, 0, 1]);
        let values = StringArray::from(vec!["x".repeat(40), "y".into()]);
        let dict = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values)).unwrap();
        let ids = Int64Array::from(vec![1, 2, 3, 4, 5]);
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(ids) as ArrayRef),
            ("note", Arc::new(dict) as ArrayRef),
        ])
        .unwrap();
        let (first, rest) = take_within(batch, 81).unwrap();
        // 40 + 1 + 40 = 81 fits; the fourth row's 40 would not.
        assert_eq!(first.num_rows(), 3);
        assert_eq!(first.column(1).data_type(), &DataType::Utf8);
        assert_eq!(first.column(1).as_string::<i32>().value(1), "y");
        let rest = rest.unwrap();
        assert_eq!(rest.num_rows(), 2);
        // A single row over the budget still comes out alone.
        let (one, rest) = take_within(rest, 10).unwrap();
        assert_eq!((one.num_rows(), rest.map(|r| r.num_rows())), (1, Some(1)));
        let schema = Schema::new(vec![Field::new("a", DataType::Utf8, true)]);
        assert!(matches!(
            dictionary_schema(&schema).unwrap().field(0).data_type(),
            DataType::Dictionary(_, _)
        ));
    }
}
