//! Signed folding and merging of groups: the rows of a batch folded, each with its sign (`+1`
//! added, `-1` retracted), into per-group accumulators, and a run's delta merged with a group's
//! stored state (counts and sums add up, a group with no rows left goes, a retracted `min` /
//! `max` at or beyond the group's extreme, or a float sum that cannot be trusted
//! ([`FloatSum::merged`](super::float::FloatSum::merged)), makes it be recomputed from the
//! source).

use super::groups::{Acc, Evaluator, Groups, Num, Outcome, Slot, sum_kind};
use crate::error::{Error, Result};
use deltalake::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Float64Type, Int64Type};
use lakestream_formats::refine::aggregate::MeasureFn;

impl Evaluator {
    /// Fold the rows of `batch` (source columns read) into `groups`, each with its sign;
    /// with `only`, rows of other groups are skipped.
    pub fn fold(
        &self,
        batch: &RecordBatch,
        signs: &[i8],
        groups: &mut Groups,
        only: Option<&Groups>,
    ) -> Result<()> {
        let keys = self.keys.convert_columns(&self.group_arrays(batch)?)?;
        // Per measure: its input as needed (counts: validity; sums: i64/f64; extremes: rows).
        enum Input {
            None,
            Valid(ArrayRef),
            Ints(Int64Array),
            Floats(Float64Array),
            Rows(ArrayRef, deltalake::arrow::row::Rows),
        }
        let mut inputs = Vec::with_capacity(self.measures.len());
        for m in &self.measures {
            let Some(i) = m.input else {
                inputs.push(Input::None);
                continue;
            };
            let col = batch.column(i);
            inputs.push(match m.func {
                MeasureFn::CountRows => Input::None,
                MeasureFn::Count => Input::Valid(col.clone()),
                MeasureFn::Sum | MeasureFn::Avg if sum_kind(&m.input_type) == Some(true) => {
                    Input::Ints(
                        cast(col, &DataType::Int64)?
                            .as_primitive::<Int64Type>()
                            .clone(),
                    )
                }
                MeasureFn::Sum | MeasureFn::Avg => Input::Floats(
                    cast(col, &DataType::Float64)?
                        .as_primitive::<Float64Type>()
                        .clone(),
                ),
                MeasureFn::Min | MeasureFn::Max => {
                    let (conv, _) = m
                        .values
                        .as_ref()
                        .ok_or_else(|| Error::Internal("extreme".into()))?;
                    Input::Rows(
                        col.clone(),
                        conv.convert_columns(std::slice::from_ref(col))?,
                    )
                }
            });
        }
        let kept = self.filter.kept(batch)?;
        for (r, &sign) in signs.iter().enumerate().take(batch.num_rows()) {
            if kept.as_ref().is_some_and(|k| !k[r]) {
                continue;
            }
            let key = keys.row(r);
            if only.is_some_and(|o| o.get(key.data()).is_none()) {
                continue;
            }
            let s = i64::from(sign);
            let acc = groups.slot(key.data(), || self.fresh());
            acc.rows += s;
            for ((slot, input), m) in acc.slots.iter_mut().zip(&inputs).zip(&self.measures) {
                match (slot, input) {
                    (Slot::Count(c), Input::None) => *c += s,
                    (Slot::Count(c), Input::Valid(a)) if a.is_valid(r) => *c += s,
                    (Slot::Sum { n, sum }, Input::Ints(a)) if a.is_valid(r) => {
                        *n += s;
                        if let Num::Int(x) = sum {
                            *x += i128::from(a.value(r)) * i128::from(s);
                        }
                    }
                    (Slot::Sum { n, sum }, Input::Floats(a)) if a.is_valid(r) => {
                        *n += s;
                        if let Num::Float(x) = sum {
                            x.fold(a.value(r), s);
                        }
                    }
                    (Slot::Extreme { best, retracted }, Input::Rows(a, rows)) if a.is_valid(r) => {
                        let v = rows.row(r).data();
                        let max = m.func == MeasureFn::Max;
                        let target = if sign > 0 { best } else { retracted };
                        if target.as_deref().is_none_or(|t| beyond(v, t, max)) {
                            *target = Some(v.to_vec());
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// What a group with stored state `old` (none: new) becomes with the run's `delta`.
    pub fn merge(&self, old: Option<&Acc>, delta: &Acc) -> Result<Outcome> {
        let fresh = self.fresh();
        let old = old.unwrap_or(&fresh);
        let rows = old.rows + delta.rows;
        if rows < 0 {
            return Err(self.refused(format!(
                "a group would have {rows} rows: the output does not match its source (written by \
                 another job or config?); rebuild it (delete the output table and run the job again)"
            )));
        }
        if rows == 0 {
            return Ok(Outcome::Gone);
        }
        let mut slots = Vec::with_capacity(old.slots.len());
        for ((o, d), m) in old.slots.iter().zip(&delta.slots).zip(&self.measures) {
            slots.push(match (o, d) {
                (Slot::Count(a), Slot::Count(b)) => Slot::Count(a + b),
                (Slot::Sum { n: n1, sum: s1 }, Slot::Sum { n: n2, sum: s2 }) => {
                    let n = n1 + n2;
                    let sum = match (s1, s2) {
                        (Num::Int(a), Num::Int(b)) => Num::Int(a + b),
                        // NaN/Inf counts add; the compensated finite sums add unless the
                        // result cannot be trusted (recomputed from the source).
                        (Num::Float(a), Num::Float(b)) => match a.merged(b, n) {
                            Some(f) => Num::Float(f),
                            None => return Ok(Outcome::Recompute),
                        },
                        _ => return Err(Error::Internal("sum kinds differ".into())),
                    };
                    Slot::Sum { n, sum }
                }
                (
                    Slot::Extreme { best: b1, .. },
                    Slot::Extreme {
                        best: b2,
                        retracted,
                    },
                ) => {
                    let max = m.func == MeasureFn::Max;
                    let best = match (b1, b2) {
                        (Some(a), Some(b)) => Some(if beyond(b, a, max) { b } else { a }.clone()),
                        (a, b) => a.clone().or_else(|| b.clone()),
                    };
                    if let Some(g) = retracted
                        && best.as_deref().is_none_or(|b| !beyond(b, g, max))
                    {
                        return Ok(Outcome::Recompute);
                    }
                    Slot::Extreme {
                        best,
                        retracted: None,
                    }
                }
                _ => return Err(Error::Internal("slot kinds differ".into())),
            });
        }
        Ok(Outcome::Keep(Acc { rows, slots }))
    }
}

/// Is encoded value `v` beyond `t` (greater for a max, smaller for a min)?
fn beyond(v: &[u8], t: &[u8], max: bool) -> bool {
    if max { v > t } else { v < t }
}
