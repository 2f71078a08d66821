//! The row filter of an aggregate (`filter = "..."`): its conditions with their literals cast
//! once to the columns' types, evaluated per batch with SQL `WHERE` semantics (a comparison with
//! null does not keep the row). Retracted rows pass the same filter as added ones.

use crate::error::{Error, Result};
use deltalake::arrow::array::{Array, ArrayRef, RecordBatch, Scalar, StringArray};
use deltalake::arrow::compute::kernels::cmp;
use deltalake::arrow::compute::{cast, is_not_null, is_null};
use deltalake::arrow::datatypes::SchemaRef;
use lakestream_formats::refine::aggregate::{AggregateConfig, Comparison, Test};
use std::sync::Arc;

/// A filter condition, ready to evaluate.
enum RowTest {
    IsNull,
    IsNotNull,
    Compare(Comparison, ArrayRef),
}

/// The filter: per condition, the column's index among the columns read and the test.
#[derive(Default)]
pub(super) struct RowFilter(Vec<(usize, RowTest)>);

impl RowFilter {
    /// The filter of `cfg` over `columns` (the source columns read); a literal that is not a
    /// value of its column is refused through `bad`.
    pub(super) fn new(
        cfg: &AggregateConfig,
        columns: &SchemaRef,
        bad: &dyn Fn(String) -> Error,
    ) -> Result<Self> {
        let mut out = Vec::new();
        for c in cfg.filter.iter().flat_map(|f| &f.conditions) {
            let i = columns
                .index_of(&c.column)
                .map_err(|_| bad(format!("the source has no column `{}`", c.column)))?;
            let t = columns.field(i).data_type();
            let test = match &c.test {
                Test::IsNull => RowTest::IsNull,
                Test::IsNotNull => RowTest::IsNotNull,
                Test::Compare(op, text) => {
                    let lit: ArrayRef = Arc::new(StringArray::from(vec![text.as_str()]));
                    let lit = cast(&lit, t)
                        .ok()
                        .filter(|l| l.is_valid(0))
                        .ok_or_else(|| {
                            bad(format!(
                                "filter: \"{text}\" is not a value of column `{}` ({t})",
                                c.column
                            ))
                        })?;
                    RowTest::Compare(*op, lit)
                }
            };
            out.push((i, test));
        }
        Ok(Self(out))
    }

    /// The rows of `batch` the filter keeps (`None`: no filter); null counts as not kept.
    pub(super) fn kept(&self, batch: &RecordBatch) -> Result<Option<Vec<bool>>> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let mut keep = vec![true; batch.num_rows()];
        for (i, test) in &self.0 {
            let col = batch.column(*i);
            let m = match test {
                RowTest::IsNull => is_null(col)?,
                RowTest::IsNotNull => is_not_null(col)?,
                RowTest::Compare(op, lit) => {
                    let s = Scalar::new(lit.clone());
                    match op {
                        Comparison::Eq => cmp::eq(col, &s)?,
                        Comparison::Ne => cmp::neq(col, &s)?,
                        Comparison::Lt => cmp::lt(col, &s)?,
                        Comparison::Le => cmp::lt_eq(col, &s)?,
                        Comparison::Gt => cmp::gt(col, &s)?,
                        Comparison::Ge => cmp::gt_eq(col, &s)?,
                    }
                }
            };
            for (k, slot) in keep.iter_mut().enumerate() {
                *slot &= m.is_valid(k) && m.value(k);
            }
        }
        Ok(Some(keep))
    }
}
