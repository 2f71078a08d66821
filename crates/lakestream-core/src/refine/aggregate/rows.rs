//! A gold table's rows and the state they hold: the output schema (group columns, measures,
//! then the state columns `__rows`, `__<m>_n`, `__<m>_sum`), groups' states as output rows, and
//! stored output rows back as states.

use super::groups::{Acc, Evaluator, Num, Slot, sum_kind};
use crate::error::{Error, Result};
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, new_null_array,
};
use deltalake::arrow::compute::{cast, is_null};
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
            if let Some(s) = m.sum_column() {
                let t = if sum_kind(&spec.input_type) == Some(true) {
                    DataType::Int64
                } else {
                    DataType::Float64
                };
                state.push(Field::new(s, t, true));
            }
        }
        fields.extend(state);
        Arc::new(Schema::new(fields))
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
        let too_big = |m: &Measure| {
            self.refused(format!(
                "measure `{}` overflows a 64-bit integer; sum a smaller column",
                m.name
            ))
        };
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
                    let (mut ns, mut ints, mut floats) = (vec![], vec![], vec![]);
                    for a in accs {
                        let Slot::Sum { n, sum } = slot(a) else {
                            return Err(Error::Internal("sum slot".into()));
                        };
                        ns.push(n);
                        match sum {
                            Num::Int(x) => {
                                ints.push(i64::try_from(x).map_err(|_| too_big(m))?);
                                floats.push(x as f64);
                            }
                            Num::Float(x) => floats.push(x),
                        }
                    }
                    let is_int = sum_kind(&spec.input_type) == Some(true);
                    let valid = |i: usize| ns[i] > 0;
                    if m.func == MeasureFn::Sum {
                        cols.push(if is_int {
                            Arc::new(Int64Array::from_iter(
                                (0..ns.len()).map(|i| valid(i).then(|| ints[i])),
                            ))
                        } else {
                            Arc::new(Float64Array::from_iter(
                                (0..ns.len()).map(|i| valid(i).then(|| floats[i])),
                            ))
                        });
                    } else {
                        cols.push(Arc::new(Float64Array::from_iter(
                            (0..ns.len()).map(|i| valid(i).then(|| floats[i] / ns[i] as f64)),
                        )));
                    }
                    state.push(Arc::new(Int64Array::from(ns.clone())));
                    if m.func == MeasureFn::Avg {
                        state.push(if is_int {
                            Arc::new(Int64Array::from(ints))
                        } else {
                            Arc::new(Float64Array::from(floats))
                        });
                    }
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
                    let sum_col = m.sum_column().unwrap_or_else(|| m.name.clone());
                    let is_int = sum_kind(&spec.input_type) == Some(true);
                    let t = if is_int {
                        DataType::Int64
                    } else {
                        DataType::Float64
                    };
                    let s = col(&sum_col, &t)?;
                    let nulls = is_null(&s)?;
                    for (i, a) in accs.iter_mut().enumerate() {
                        let zero = nulls.value(i);
                        let sum = if is_int {
                            let v = s.as_primitive::<Int64Type>().value(i);
                            Num::Int(if zero { 0 } else { i128::from(v) })
                        } else {
                            let v = s.as_primitive::<Float64Type>().value(i);
                            Num::Float(if zero { 0.0 } else { v })
                        };
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
}
