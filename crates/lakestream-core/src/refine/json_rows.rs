//! Rows as JSON objects: the raw text a late row's dead letter keeps, the identity the join's
//! late set compares, and the upsert's tie-break text all come from this one conversion, so
//! the three always agree on what a row is.

use crate::error::{Error, Result};
use deltalake::arrow::array::RecordBatch;

/// Each row of `batch` as a JSON object (nulls omitted), in row order.
pub(crate) fn row_json(
    batch: &RecordBatch,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>> {
    let mut w = arrow_json::LineDelimitedWriter::new(Vec::new());
    w.write(batch)?;
    w.finish()?;
    let bytes = w.into_inner();
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice(l).map_err(|e| Error::Internal(format!("row to JSON: {e}")))
        })
        .collect()
}
