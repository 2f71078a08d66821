//! A gold table's rows and the state they hold: the output schema (group columns, measures,
//! then the state columns `__rows`, `__<m>_n`, `__<m>_sum` and, for a float sum, `__<m>_err`,
//! `__<m>_nan`, `__<m>_pinf`, `__<m>_ninf`), groups' states as output rows, and stored output
//! rows back as states (an output written before the float state columns reads them as zero).

use super::float::state_columns;
use super::groups::{Acc, Evaluator, FloatSum, MeasureSpec, Num, Slot, sum_kind};
use crate::error::{Error, Result};
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, new_null_array,
};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef};
use lakestream_formats::refine::aggregate::{Measure, MeasureFn, ROWS_COLUMN};
use std::sync::Arc;

impl Evaluator {
    /// The output schema: group columns, measures, then the state columns.
    pub fn output_schema(&self) -> SchemaRef {
        let mut fields = self.group_fields.clone();
        let mut state = vec![Field::new(ROWS_COLUMN, DataType::Int64, true)];
        for (m, spec) in self.names.iter().zip(&self.measures) {
            let t = match m.func {
                MeasureFn::CountRows | MeasureFn::Count => DataType::Int64,
                MeasureFn::Sum if sum_kind(&spec.input_type) == Some(true) => DataType::Int64,
                MeasureFn::Sum | MeasureFn::Avg => DataType::Float64,
                MeasureFn::Min | MeasureFn::Max => spec.input_type.clone(),
            };
            fields.push(Field::new(&m.name, t, true));
            if let Some(n) = m.count_column() {
                state.push(Field::new(n, DataType::Int64, true));
            }
            match float_state(m, &spec.input_type) {
                Some([sum, err, nan, pinf, ninf]) => {
                    state.extend([sum, err].map(|c| Field::new(c, DataType::Float64, true)));
                    state.extend([nan, pinf, ninf].map(|c| Field::new(c, DataType::Int64, true)));
                }
                None => state.extend(m.sum_column().map(|s| Field::new(s, DataType::Int64, true))),
            }
        }
        fields.extend(state);
        Arc::new(Schema::new(fields))
    }

    /// `have` (an existing output's schema) with the state columns it lacks appended: an output
    /// written before the float state columns existed (they read as zero).
    pub fn with_state_columns(&self, have: &SchemaRef) -> SchemaRef {
        let missing: Vec<Field> = self
            .output_schema()
            .fields()
            .iter()
            .filter(|f| have.field_with_name(f.name()).is_err() && self.optional_column(f.name()))
            .map(|f| f.as_ref().clone())
            .collect();
        if missing.is_empty() {
            return have.clone();
        }
        let mut fields: Vec<Field> = have.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(missing);
        Arc::new(Schema::new_with_metadata(fields, have.metadata().clone()))
    }

    /// Output rows of `keys` with states `accs`, in [`Self::output_schema`].
    pub fn to_batch(&self, keys: &[&[u8]], accs: &[&Acc]) -> Result<RecordBatch> {
        let schema = self.output_schema();
        let parser = self.keys.parser();
        let mut cols = self
            .keys
            .convert_rows(keys.iter().map(|k| parser.parse(k)))?;
        if keys.is_empty() {
            cols = self
                .group_fields
                .iter()
                .map(|f| new_null_array(f.data_type(), 0))
                .collect();
        }
        let mut state: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(
            accs.iter().map(|a| a.rows),
        ))];
        for (j, (m, spec)) in self.names.iter().zip(&self.measures).enumerate() {
            let slot = |a: &&Acc| a.slots[j].clone();
            match m.func {
                MeasureFn::CountRows | MeasureFn::Count => {
                    cols.push(Arc::new(Int64Array::from_iter_values(accs.iter().map(
                        |a| match slot(a) {
                            Slot::Count(c) => c,
                            _ => 0,
                        },
                    ))));
                }
                MeasureFn::Sum | MeasureFn::Avg => {
                    let slots: Vec<Slot> = accs.iter().map(slot).collect();
                    let (value, more) = self.sum_arrays(m, spec, &slots)?;
                    cols.push(value);
                    state.extend(more);
                }
                MeasureFn::Min | MeasureFn::Max => {
                    let (conv, null) = spec
                        .values
                        .as_ref()
                        .ok_or_else(|| Error::Internal("extreme".into()))?;
                    let bytes: Vec<Vec<u8>> = accs
                        .iter()
                        .map(|a| match slot(a) {
                            Slot::Extreme { best: Some(b), .. } => b,
                            _ => null.clone(),
                        })
                        .collect();
                    let p = conv.parser();
                    let mut v = conv.convert_rows(bytes.iter().map(|b| p.parse(b)))?;
                    cols.push(match v.pop() {
                        Some(a) if !bytes.is_empty() => a,
                        _ => new_null_array(&spec.input_type, 0),
                    });
                }
            }
        }
        cols.extend(state);
        Ok(RecordBatch::try_new(schema, cols)?)
    }

    /// A `sum`/`avg` measure's column and its state columns (`__m_n`, then the integer sum of
    /// an `avg`, or a float sum's state) from the measure's `slots`.
    fn sum_arrays(
        &self,
        m: &Measure,
        spec: &MeasureSpec,
        slots: &[Slot],
    ) -> Result<(ArrayRef, Vec<ArrayRef>)> {
        let mut ns = Vec::with_capacity(slots.len());
        let (mut ints, mut floats) = (Vec::new(), Vec::new());
        for s in slots {
            match s {
                Slot::Sum {
                    n,
                    sum: Num::Int(x),
                } => {
                    ns.push(*n);
                    ints.push(i64::try_from(*x).map_err(|_| {
                        self.refused(format!(
                            "measure `{}` overflows a 64-bit integer; sum a smaller column",
                            m.name
                        ))
                    })?);
                }
                Slot::Sum {
                    n,
                    sum: Num::Float(f),
                } => {
                    ns.push(*n);
                    floats.push(*f);
                }
                _ => return Err(Error::Internal("sum slot".into())),
            }
        }
        let valid = |i: usize| ns[i] > 0;
        let rows = 0..ns.len();
        let avg = m.func == MeasureFn::Avg;
        let value: ArrayRef = match float_state(m, &spec.input_type) {
            None if avg => Arc::new(Float64Array::from_iter(
                rows.map(|i| valid(i).then(|| ints[i] as f64 / ns[i] as f64)),
            )),
            None => Arc::new(Int64Array::from_iter(
                rows.map(|i| valid(i).then(|| ints[i])),
            )),
            Some(_) => Arc::new(Float64Array::from_iter(rows.map(|i| {
                valid(i).then(|| {
                    if avg {
                        floats[i].mean(ns[i])
                    } else {
                        floats[i].value()
                    }
                })
            }))),
        };
        let mut state: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ns.clone()))];
        if float_state(m, &spec.input_type).is_some() {
            let f = |get: fn(&FloatSum) -> f64| -> ArrayRef {
                Arc::new(Float64Array::from_iter_values(floats.iter().map(get)))
            };
            let i = |get: fn(&FloatSum) -> i64| -> ArrayRef {
                Arc::new(Int64Array::from_iter_values(floats.iter().map(get)))
            };
            state.extend([f(|s| s.sum), f(|s| s.err)]);
            state.extend([i(|s| s.nan), i(|s| s.pos_inf), i(|s| s.neg_inf)]);
        } else if avg {
            state.push(Arc::new(Int64Array::from(ints)));
        }
        Ok((value, state))
    }

    /// The groups' keys and stored states of output rows (`batch` in any schema with the
    /// output's column names): `(key, state)` per row.
    pub fn stored(&self, batch: &RecordBatch) -> Result<(deltalake::arrow::row::Rows, Vec<Acc>)> {
        let col = |name: &str, t: &DataType| -> Result<ArrayRef> {
            let c = batch.column_by_name(name).ok_or_else(|| {
                self.refused(format!(
                    "the aggregate's output has no column `{name}`: it was not written by this \
                     job's config; rebuild it (delete the output table and run the job again)"
                ))
            })?;
            Ok(if c.data_type() == t {
                c.clone()
            } else {
                cast(c, t)?
            })
        };
        let groups: Vec<ArrayRef> = self
            .group_fields
            .iter()
            .map(|f| col(f.name(), f.data_type()))
            .collect::<Result<_>>()?;
        let keys = self.keys.convert_columns(&self.fill_empty(groups)?)?;
        let int = |name: &str| -> Result<Int64Array> {
            Ok(col(name, &DataType::Int64)?
                .as_primitive::<Int64Type>()
                .clone())
        };
        let rows = int(ROWS_COLUMN)?;
        let n = batch.num_rows();
        let mut accs: Vec<Acc> = (0..n)
            .map(|i| Acc {
                rows: rows.value(i),
                slots: vec![],
            })
            .collect();
        for (m, spec) in self.names.iter().zip(&self.measures) {
            match m.func {
                MeasureFn::CountRows | MeasureFn::Count => {
                    let c = int(&m.name)?;
                    for (i, a) in accs.iter_mut().enumerate() {
                        a.slots.push(Slot::Count(c.value(i)));
                    }
                }
                MeasureFn::Sum | MeasureFn::Avg => {
                    let ns = int(&m.count_column().unwrap_or_default())?;
                    let sums = self.stored_sums(batch, m, spec)?;
                    for ((i, a), sum) in accs.iter_mut().enumerate().zip(sums) {
                        a.slots.push(Slot::Sum {
                            n: ns.value(i),
                            sum,
                        });
                    }
                }
                MeasureFn::Min | MeasureFn::Max => {
                    let (conv, _) = spec
                        .values
                        .as_ref()
                        .ok_or_else(|| Error::Internal("extreme".into()))?;
                    let c = col(&m.name, &spec.input_type)?;
                    let encoded = conv.convert_columns(std::slice::from_ref(&c))?;
                    for (i, a) in accs.iter_mut().enumerate() {
                        a.slots.push(Slot::Extreme {
                            best: c.is_valid(i).then(|| encoded.row(i).data().to_vec()),
                            retracted: None,
                        });
                    }
                }
            }
        }
        Ok((keys, accs))
    }

    /// The stored sums of measure `m` in output rows `batch`. A float sum's state columns that
    /// an output written before them lacks (or holds null, in rows kept since) read as zero; its
    /// finite sum then is the measure column (null: zero), as that version wrote it.
    fn stored_sums(
        &self,
        batch: &RecordBatch,
        m: &Measure,
        spec: &MeasureSpec,
    ) -> Result<Vec<Num>> {
        let n = batch.num_rows();
        let column = |name: &str, t: &DataType| -> Result<Option<ArrayRef>> {
            match batch.column_by_name(name) {
                Some(c) if c.data_type() == t => Ok(Some(c.clone())),
                Some(c) => Ok(Some(cast(c, t)?)),
                None => Ok(None),
            }
        };
        let missing = || {
            self.refused(format!(
                "the aggregate's output has no column `{}` (or its state): it was not written by \
                 this job's config; rebuild it (delete the output table and run the job again)",
                m.name
            ))
        };
        let Some([sum, err, nan, pinf, ninf]) = float_state(m, &spec.input_type) else {
            let name = m.sum_column().unwrap_or_else(|| m.name.clone());
            let c = column(&name, &DataType::Int64)?.ok_or_else(missing)?;
            let c = c.as_primitive::<Int64Type>();
            return Ok((0..n)
                .map(|i| {
                    Num::Int(if c.is_valid(i) {
                        i128::from(c.value(i))
                    } else {
                        0
                    })
                })
                .collect());
        };
        let floats = |name: &str| -> Result<Option<Float64Array>> {
            Ok(column(name, &DataType::Float64)?.map(|c| c.as_primitive::<Float64Type>().clone()))
        };
        let counts = |name: &str| -> Result<Option<Int64Array>> {
            Ok(column(name, &DataType::Int64)?.map(|c| c.as_primitive::<Int64Type>().clone()))
        };
        let (high, measure, err) = (floats(&sum)?, floats(&m.name)?, floats(&err)?);
        if high.is_none() && measure.is_none() {
            return Err(missing());
        }
        let (nan, pinf, ninf) = (counts(&nan)?, counts(&pinf)?, counts(&ninf)?);
        let at = |a: &Option<Float64Array>, i: usize| {
            a.as_ref().filter(|a| a.is_valid(i)).map(|a| a.value(i))
        };
        let count = |a: &Option<Int64Array>, i: usize| {
            a.as_ref()
                .filter(|a| a.is_valid(i))
                .map_or(0, |a| a.value(i))
        };
        Ok((0..n)
            .map(|i| {
                Num::Float(FloatSum {
                    sum: at(&high, i).or_else(|| at(&measure, i)).unwrap_or(0.0),
                    err: at(&err, i).unwrap_or(0.0),
                    nan: count(&nan, i),
                    pos_inf: count(&pinf, i),
                    neg_inf: count(&ninf, i),
                    retracted: 0.0,
                })
            })
            .collect())
    }
}

/// The float state columns of `m` over an input of type `input` (`None`: not a float sum).
fn float_state(m: &Measure, input: &DataType) -> Option<[String; 5]> {
    (sum_kind(input) == Some(false))
        .then(|| state_columns(m))
        .flatten()
}
