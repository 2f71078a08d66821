//! Groups and their measures: a source row's group key (the group columns, row-encoded so a
//! key is bytes), the per-group accumulators and the [`Evaluator`] of a job's groups and
//! measures. Signed folding of rows into accumulators and the merge of a run's delta with a
//! group's stored state: [`fold`](super::fold); output rows to and from state:
//! [`rows`](super::rows); the row filter: [`filter`](super::filter).
//!
//! `min`/`max` values are kept row-encoded too (arrow's row format orders like the values), so
//! any orderable type works; a retracted value at or beyond a group's extreme makes the group
//! be recomputed from the source.

use super::filter::RowFilter;
pub(crate) use super::float::FloatSum;
use crate::error::{Error, Result};
use deltalake::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, new_null_array};
use deltalake::arrow::compute::cast;
use deltalake::arrow::compute::kernels::temporal::{DatePart, date_part};
use deltalake::arrow::datatypes::{DataType, Field, SchemaRef};
use deltalake::arrow::row::{RowConverter, SortField};
use lakestream_formats::refine::aggregate::{AggregateConfig, GroupExpr, Measure, MeasureFn};
use std::sync::Arc;

/// A sum: exact for integers; for floats NaN and infinities counted apart and the finite
/// values compensated ([`FloatSum`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    /// Integer columns.
    Int(i128),
    /// Float columns.
    Float(FloatSum),
}

/// One measure's accumulator.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Slot {
    /// `count(*)` (the group's rows) or `count(col)`.
    Count(i64),
    /// `sum` / `avg`: non-null values and their sum.
    Sum { n: i64, sum: Num },
    /// `min` / `max`: the extreme of the values added, and (in a delta) of those retracted.
    Extreme {
        best: Option<Vec<u8>>,
        retracted: Option<Vec<u8>>,
    },
}

/// A group's accumulators.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Acc {
    /// Rows.
    pub rows: i64,
    /// One slot per measure.
    pub slots: Vec<Slot>,
}

/// Groups by encoded key, in first-seen order.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    index: foldhash::HashMap<Vec<u8>, usize>,
    /// Keys, in order.
    pub keys: Vec<Vec<u8>>,
    /// Accumulators, one per key.
    pub accs: Vec<Acc>,
}

impl Groups {
    /// The accumulator of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<&Acc> {
        self.index.get(key).map(|&i| &self.accs[i])
    }

    /// Groups held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The accumulator of `key`, a `fresh` one when the key is new.
    pub(super) fn slot(&mut self, key: &[u8], fresh: impl FnOnce() -> Acc) -> &mut Acc {
        let i = match self.index.get(key) {
            Some(&i) => i,
            None => {
                self.keys.push(key.to_vec());
                self.accs.push(fresh());
                self.index.insert(key.to_vec(), self.keys.len() - 1);
                self.keys.len() - 1
            }
        };
        &mut self.accs[i]
    }

    /// Insert a whole accumulator (stored state of a group).
    pub fn put(&mut self, key: Vec<u8>, acc: Acc) {
        match self.index.get(&key) {
            Some(&i) => self.accs[i] = acc,
            None => {
                self.index.insert(key.clone(), self.keys.len());
                self.keys.push(key);
                self.accs.push(acc);
            }
        }
    }
}

/// What a group becomes after a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Its new state.
    Keep(Acc),
    /// It has no rows any more.
    Gone,
    /// An extreme was retracted: recompute it from the source.
    Recompute,
}

/// A measure's input and encodings.
pub(super) struct MeasureSpec {
    pub(super) func: MeasureFn,
    /// Index of its column among the source columns read.
    pub(super) input: Option<usize>,
    /// The input's type.
    pub(super) input_type: DataType,
    /// `min`/`max`: the value encoding, and the encoding of null.
    pub(super) values: Option<(RowConverter, Vec<u8>)>,
}

/// Evaluates a job's groups and measures over rows of its source columns.
pub(crate) struct Evaluator {
    /// The job and its source (named in errors).
    pub(super) job: String,
    pub(super) source: String,
    /// The group columns as output fields.
    pub(super) group_fields: Vec<Field>,
    /// Group column index -> index among the source columns read.
    pub(super) group_inputs: Vec<usize>,
    pub(super) exprs: Vec<GroupExpr>,
    pub(super) keys: RowConverter,
    pub(super) measures: Vec<MeasureSpec>,
    pub(super) names: Vec<Measure>,
    /// Group columns that are string partition columns of the output: null and "" are one
    /// Delta partition value, so one group ("").
    pub(super) empty_is_null: Vec<bool>,
    /// The filter.
    pub(super) filter: RowFilter,
}

/// Integer (`Some(true)`) or float (`Some(false)`) sums; `None`: not summable.
pub(super) fn sum_kind(t: &DataType) -> Option<bool> {
    match t {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => Some(true),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(false),
        _ => None,
    }
}

impl Evaluator {
    /// The evaluator of `cfg` over `columns` (the source columns read, as `cfg.source_columns()`
    /// names them, in the source's types), for an output partitioned by `partition_by`.
    pub fn new(
        job: &str,
        cfg: &AggregateConfig,
        columns: &SchemaRef,
        partition_by: &[String],
    ) -> Result<Self> {
        let bad = |reason: String| Error::Source {
            job: job.to_string(),
            table: cfg.source.clone(),
            reason,
        };
        let index = |c: &str| {
            columns
                .index_of(c)
                .map_err(|_| bad(format!("the source has no column `{c}`")))
        };
        let mut group_fields = Vec::new();
        let mut group_inputs = Vec::new();
        let mut empty_is_null = Vec::new();
        for g in &cfg.group_by {
            let i = index(g.expr.column())?;
            let t = columns.field(i).data_type();
            let out = match (&g.expr, t) {
                (GroupExpr::Column(_), t) => t.clone(),
                (GroupExpr::Date(_), DataType::Timestamp(..) | DataType::Date32) => {
                    DataType::Date32
                }
                (GroupExpr::Hour(_), DataType::Timestamp(..)) => DataType::Int32,
                (e, t) => {
                    return Err(bad(format!(
                        "group column `{}`: {e:?} needs a timestamp column, `{}` is {t}",
                        g.name,
                        g.expr.column()
                    )));
                }
            };
            empty_is_null.push(partition_by.contains(&g.name) && out == DataType::Utf8);
            group_fields.push(Field::new(&g.name, out, true));
            group_inputs.push(i);
        }
        let keys = RowConverter::new(
            group_fields
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        let mut measures = Vec::new();
        for m in &cfg.measures {
            let input = m.column.as_deref().map(index).transpose()?;
            let input_type = input
                .map(|i| columns.field(i).data_type().clone())
                .unwrap_or(DataType::Null);
            if matches!(m.func, MeasureFn::Sum | MeasureFn::Avg) && sum_kind(&input_type).is_none()
            {
                return Err(bad(format!(
                    "measure `{}`: sum/avg need an integer or float column, `{}` is {input_type}",
                    m.name,
                    m.column.as_deref().unwrap_or_default()
                )));
            }
            let values = match m.func {
                MeasureFn::Min | MeasureFn::Max => {
                    let conv = RowConverter::new(vec![SortField::new(input_type.clone())])?;
                    let null = conv
                        .convert_columns(&[new_null_array(&input_type, 1)])?
                        .row(0)
                        .data()
                        .to_vec();
                    Some((conv, null))
                }
                _ => None,
            };
            measures.push(MeasureSpec {
                func: m.func,
                input,
                input_type,
                values,
            });
        }
        let filter = RowFilter::new(cfg, columns, &bad)?;
        Ok(Self {
            filter,
            job: job.to_string(),
            source: cfg.source.clone(),
            group_fields,
            group_inputs,
            exprs: cfg.group_by.iter().map(|g| g.expr.clone()).collect(),
            keys,
            measures,
            names: cfg.measures.clone(),
            empty_is_null,
        })
    }

    /// A run refused for what the data says (not retryable: the same data says it again).
    pub(super) fn refused(&self, reason: String) -> Error {
        Error::Source {
            job: self.job.clone(),
            table: self.source.clone(),
            reason,
        }
    }

    /// An empty accumulator.
    pub fn fresh(&self) -> Acc {
        Acc {
            rows: 0,
            slots: self
                .measures
                .iter()
                .map(|m| match m.func {
                    MeasureFn::CountRows | MeasureFn::Count => Slot::Count(0),
                    MeasureFn::Sum | MeasureFn::Avg => Slot::Sum {
                        n: 0,
                        sum: if sum_kind(&m.input_type) == Some(true) {
                            Num::Int(0)
                        } else {
                            Num::Float(FloatSum::default())
                        },
                    },
                    MeasureFn::Min | MeasureFn::Max => Slot::Extreme {
                        best: None,
                        retracted: None,
                    },
                })
                .collect(),
        }
    }

    /// The group columns of `batch` (source columns read), as output arrays.
    pub fn group_arrays(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        let mut out = Vec::with_capacity(self.exprs.len());
        for ((e, &i), f) in self
            .exprs
            .iter()
            .zip(&self.group_inputs)
            .zip(&self.group_fields)
        {
            let col = batch.column(i);
            let v: ArrayRef = match e {
                GroupExpr::Column(_) => col.clone(),
                // The UTC date / hour: timestamps carry UTC or no zone (read as UTC).
                GroupExpr::Date(_) => cast(&utc(col)?, &DataType::Date32)?,
                GroupExpr::Hour(_) => date_part(&utc(col)?, DatePart::Hour)?,
            };
            out.push(if v.data_type() == f.data_type() {
                v
            } else {
                cast(&v, f.data_type())?
            });
        }
        self.fill_empty(out)
    }

    pub(super) fn fill_empty(&self, mut arrays: Vec<ArrayRef>) -> Result<Vec<ArrayRef>> {
        for (a, fill) in arrays.iter_mut().zip(&self.empty_is_null) {
            if *fill && a.null_count() > 0 {
                let s = a.as_string::<i32>();
                let filled: deltalake::arrow::array::StringArray =
                    s.iter().map(|v| Some(v.unwrap_or_default())).collect();
                *a = Arc::new(filled);
            }
        }
        Ok(arrays)
    }

    /// The group columns' values of `keys`, as arrays (for pruning).
    pub fn key_arrays(&self, keys: &[Vec<u8>]) -> Result<Vec<ArrayRef>> {
        let parser = self.keys.parser();
        Ok(self
            .keys
            .convert_rows(keys.iter().map(|k| parser.parse(k)))?)
    }

    /// The group expressions.
    pub fn exprs(&self) -> &[GroupExpr] {
        &self.exprs
    }

    /// Whether output column `name` is float state an output written before it existed may
    /// lack (read as zero, added by the next run).
    pub fn optional_column(&self, name: &str) -> bool {
        self.names.iter().zip(&self.measures).any(|(m, spec)| {
            sum_kind(&spec.input_type) == Some(false) && super::float::optional_column(m, name)
        })
    }
}

/// A timestamp column as UTC (a zone-less timestamp is read as UTC).
fn utc(col: &ArrayRef) -> Result<ArrayRef> {
    match col.data_type() {
        DataType::Timestamp(unit, None) => {
            Ok(cast(col, &DataType::Timestamp(*unit, Some("UTC".into())))?)
        }
        _ => Ok(col.clone()),
    }
}
