//! Latest-wins ordering for the upsert, on Arrow batches: keys and ordering values encoded with
//! arrow's row format (byte-comparable for any column type; nulls sort first), the winner per
//! key, and the tie-break: equal ordering values are decided by the greater row as canonical
//! JSON text (its output columns, nulls omitted), so the result never depends on batching.

use crate::error::{Error, Result};
use crate::refine::json_rows::row_json;
use deltalake::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use deltalake::arrow::compute::{cast, take_record_batch};
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::row::{RowConverter, Rows, SortField};
use std::collections::HashMap;

/// Encodes columns of any batch into comparable bytes, in the types of the source table.
pub struct Encoder {
    names: Vec<String>,
    types: Vec<DataType>,
    converter: RowConverter,
}

impl Encoder {
    /// An encoder of `names` with `types` (the source's types; other batches are cast).
    pub fn new(names: &[String], types: Vec<DataType>) -> Result<Self> {
        let converter = RowConverter::new(types.iter().cloned().map(SortField::new).collect())?;
        Ok(Self {
            names: names.to_vec(),
            types,
            converter,
        })
    }

    /// Each row's bytes; a missing column reads as null.
    pub fn encode(&self, batch: &RecordBatch, table: &str) -> Result<Vec<Vec<u8>>> {
        let rows = self.rows(batch, table)?;
        Ok((0..rows.num_rows())
            .map(|i| rows.row(i).as_ref().to_vec())
            .collect())
    }

    /// The rows in arrow's row format (no per-row allocation: for scanning the target).
    pub fn rows(&self, batch: &RecordBatch, table: &str) -> Result<Rows> {
        let cols: Vec<ArrayRef> = self
            .names
            .iter()
            .zip(&self.types)
            .map(|(n, t)| match batch.column_by_name(n) {
                Some(c) if c.data_type() == t => Ok(c.clone()),
                Some(c) => cast(c, t).map_err(|e| Error::Schema {
                    table: table.to_string(),
                    reason: format!("column `{n}` cannot be compared with the source's: {e}"),
                }),
                None => Ok(deltalake::arrow::array::new_null_array(t, batch.num_rows())),
            })
            .collect::<Result<_>>()?;
        Ok(self.converter.convert_columns(&cols)?)
    }
}

/// The canonical text of rows `idx` of `batch` (the tie-break).
pub fn tie_texts(batch: &RecordBatch, idx: &[usize]) -> Result<Vec<String>> {
    let picked = take_record_batch(
        batch,
        &UInt32Array::from(idx.iter().map(|i| *i as u32).collect::<Vec<_>>()),
    )?;
    Ok(row_json(&picked)?
        .into_iter()
        .map(|m| serde_json::Value::Object(m).to_string())
        .collect())
}

/// Key bytes -> a position (in the winners of [`latest_per_key`]).
pub type KeyIndex<'k> = foldhash::HashMap<&'k [u8], usize>;

/// The winning row index per key (`keys` and `orders` row by row), in first-seen key order,
/// and each key's position in that list; `tie` gives the canonical text of rows when ordering
/// values are equal.
pub fn latest_per_key<'k>(
    keys: &'k Rows,
    orders: &Rows,
    is_delete: impl Fn(usize) -> bool,
    tie: impl Fn(&[usize]) -> Result<Vec<String>>,
) -> Result<(Vec<usize>, KeyIndex<'k>)> {
    // Key -> slot in `best`; `tied` holds, per slot, the other rows equal to the best so far.
    let mut slot = KeyIndex::with_capacity_and_hasher(keys.num_rows(), Default::default());
    let mut best: Vec<usize> = Vec::new();
    let mut tied: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..keys.num_rows() {
        let k = keys.row(i).data();
        let Some(&s) = slot.get(k) else {
            slot.insert(k, best.len());
            best.push(i);
            continue;
        };
        match orders.row(i).cmp(&orders.row(best[s])) {
            std::cmp::Ordering::Greater => {
                best[s] = i;
                tied.remove(&s);
            }
            std::cmp::Ordering::Equal => tied.entry(s).or_default().push(i),
            std::cmp::Ordering::Less => {}
        }
    }
    if tied.is_empty() {
        return Ok((best, slot));
    }
    let rows: Vec<usize> = tied
        .iter()
        .flat_map(|(s, r)| std::iter::once(best[*s]).chain(r.iter().copied()))
        .collect();
    let texts: HashMap<usize, String> = rows.iter().copied().zip(tie(&rows)?).collect();
    for (s, r) in tied {
        // A delete wins (it carries the row's last image, often with the same ordering
        // values); then the greater text; equal texts (identical rows): the first one.
        best[s] = std::iter::once(best[s])
            .chain(r)
            .max_by(|x, y| {
                is_delete(*x)
                    .cmp(&is_delete(*y))
                    .then(texts[x].cmp(&texts[y]))
                    .then(y.cmp(x))
            })
            .unwrap_or(best[s]);
    }
    Ok((best, slot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn latest_wins_ties_go_to_the_greater_text() -> Result<()> {
        let batch = RecordBatch::try_from_iter([
            (
                "k",
                Arc::new(Int64Array::from(vec![1, 1, 2, 1, 2])) as ArrayRef,
            ),
            (
                "t",
                Arc::new(Int64Array::from(vec![5, 9, 3, 9, 3])) as ArrayRef,
            ),
            (
                "v",
                Arc::new(StringArray::from(vec!["a", "b", "c", "z", "d"])) as ArrayRef,
            ),
        ])?;
        let key = Encoder::new(&["k".into()], vec![DataType::Int64])?;
        let order = Encoder::new(&["t".into()], vec![DataType::Int64])?;
        let (winners, _) = latest_per_key(
            &key.rows(&batch, "t")?,
            &order.rows(&batch, "t")?,
            |_| false,
            |idx| tie_texts(&batch, idx),
        )?;
        // key 1: rows 1 and 3 tie at t=9, "z" > "b"; key 2: rows 2 and 4 tie, "d" > "c".
        assert_eq!(winners, [3, 4]);
        Ok(())
    }

    #[test]
    fn nulls_sort_first_and_types_are_cast() -> Result<()> {
        let order = Encoder::new(&["t".into()], vec![DataType::Int64])?;
        let batch = RecordBatch::try_from_iter([(
            "t",
            Arc::new(StringArray::from(vec![None, Some("7")])) as ArrayRef,
        )])?;
        let e = order.encode(&batch, "t")?;
        assert!(e[0] < e[1]);
        Ok(())
    }
}
