//! Groups and their measures: a source row's group key (the group columns, row-encoded so a
//! key is bytes), signed folding of rows into per-group accumulators, the merge of a run's
//! delta with a group's stored state, and the conversion of both to and from output rows.
//!
//! `min`/`max` values are kept row-encoded too (arrow's row format orders like the values), so
//! any orderable type works; a retracted value at or beyond a group's extreme makes the group
//! be recomputed from the source.

use crate::error::{Error, Result};
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, new_null_array,
};
use deltalake::arrow::compute::kernels::temporal::{DatePart, date_part};
use deltalake::arrow::compute::{cast, is_null};
use deltalake::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef};
use deltalake::arrow::row::{RowConverter, SortField};
use lakestream_formats::refine::aggregate::{
    AggregateConfig, Comparison, GroupExpr, Measure, MeasureFn, ROWS_COLUMN, Test,
};
use std::sync::Arc;

/// A sum: exact for integers, floating for floats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    /// Integer columns.
    Int(i128),
    /// Float columns.
    Float(f64),
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

    fn slot(&mut self, key: &[u8], fresh: impl FnOnce() -> Acc) -> &mut Acc {
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
struct MeasureSpec {
    func: MeasureFn,
    /// Index of its column among the source columns read.
    input: Option<usize>,
    /// The input's type.
    input_type: DataType,
    /// `min`/`max`: the value encoding, and the encoding of null.
    values: Option<(RowConverter, Vec<u8>)>,
}

/// Evaluates a job's groups and measures over rows of its source columns.
pub(crate) struct Evaluator {
    /// The job and its source (named in errors).
    job: String,
    source: String,
    /// The group columns as output fields.
    group_fields: Vec<Field>,
    /// Group column index -> index among the source columns read.
    group_inputs: Vec<usize>,
    exprs: Vec<GroupExpr>,
    keys: RowConverter,
    measures: Vec<MeasureSpec>,
    names: Vec<Measure>,
    /// Group columns that are string partition columns of the output: null and "" are one
    /// Delta partition value, so one group ("").
    empty_is_null: Vec<bool>,
    /// The filter: per condition, the column's index and the test (literals cast once).
    filter: Vec<(usize, RowTest)>,
}

/// A filter condition, ready to evaluate.
enum RowTest {
    IsNull,
    IsNotNull,
    Compare(Comparison, ArrayRef),
}

fn sum_kind(t: &DataType) -> Option<bool> {
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
        let mut filter = Vec::new();
        for c in cfg.filter.iter().flat_map(|f| &f.conditions) {
            let i = index(&c.column)?;
            let t = columns.field(i).data_type();
            filter.push((
                i,
                match &c.test {
                    Test::IsNull => RowTest::IsNull,
                    Test::IsNotNull => RowTest::IsNotNull,
                    Test::Compare(op, text) => {
                        let lit: ArrayRef =
                            Arc::new(deltalake::arrow::array::StringArray::from(vec![
                                text.as_str(),
                            ]));
                        let lit =
                            cast(&lit, t)
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
                },
            ));
        }
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
    fn refused(&self, reason: String) -> Error {
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
                            Num::Float(0.0)
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

    fn fill_empty(&self, mut arrays: Vec<ArrayRef>) -> Result<Vec<ArrayRef>> {
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

    /// The rows of `batch` the filter keeps (`None`: no filter); null counts as not kept.
    fn kept(&self, batch: &RecordBatch) -> Result<Option<Vec<bool>>> {
        use deltalake::arrow::array::Scalar;
        use deltalake::arrow::compute::kernels::cmp;
        if self.filter.is_empty() {
            return Ok(None);
        }
        let mut keep = vec![true; batch.num_rows()];
        for (i, test) in &self.filter {
            let col = batch.column(*i);
            let m = match test {
                RowTest::IsNull => is_null(col)?,
                RowTest::IsNotNull => deltalake::arrow::compute::is_not_null(col)?,
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
        let kept = self.kept(batch)?;
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
                            *x += a.value(r) * s as f64;
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
                        // No value left: exactly zero (no float residue of retractions).
                        _ if n == 0 => Num::Float(0.0),
                        (Num::Float(a), Num::Float(b)) => Num::Float(a + b),
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
}

/// Is encoded value `v` beyond `t` (greater for a max, smaller for a min)?
fn beyond(v: &[u8], t: &[u8], max: bool) -> bool {
    if max { v > t } else { v < t }
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
