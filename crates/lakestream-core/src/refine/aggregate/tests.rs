//! Float `sum`/`avg` of a gold group over histories of inserts and retractions, each run's state
//! written to output rows and read back (as a run does): the result is SQL's `SUM`/`AVG` over the
//! group's current values (NaN and infinities as DuckDB has them), and equals a recompute.

use super::groups::{Acc, Evaluator, Groups, Outcome};
use crate::error::Result;
use deltalake::arrow::array::{Array, ArrayRef, AsArray, Float64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef};
use lakestream_formats::refine::aggregate::AggregateConfig;
use std::sync::Arc;

fn columns() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("g", DataType::Utf8, true),
        Field::new("v", DataType::Float64, true),
    ]))
}

fn evaluator() -> Evaluator {
    let cfg: AggregateConfig = serde_json::from_value(serde_json::json!({
        "source": "raw/f",
        "group_by": ["g"],
        "measures": ["count(*) as n", "sum(v) as total", "avg(v) as mean", "count(v) as valued"],
    }))
    .expect("config");
    Evaluator::new("gold_f", &cfg, &columns(), &[]).expect("evaluator")
}

fn batch(values: &[Option<f64>]) -> RecordBatch {
    let g: ArrayRef = Arc::new(StringArray::from(vec!["a"; values.len()]));
    let v: ArrayRef = Arc::new(Float64Array::from(values.to_vec()));
    RecordBatch::try_new(columns(), vec![g, v]).expect("batch")
}

/// One group `a` of a gold table, run by run: its stored output row and its current values.
struct Group {
    ev: Evaluator,
    live: Vec<Option<f64>>,
    stored: Option<RecordBatch>,
    recomputed: usize,
}

impl Group {
    fn new() -> Self {
        Self {
            ev: evaluator(),
            live: Vec::new(),
            stored: None,
            recomputed: 0,
        }
    }

    /// The group folded from its current values (what a recompute from the source finds).
    fn fresh(&self) -> Result<Option<Acc>> {
        let mut g = Groups::default();
        self.ev
            .fold(&batch(&self.live), &vec![1; self.live.len()], &mut g, None)?;
        Ok(g.accs.into_iter().next())
    }

    /// One run: `changes` (value, sign) folded into a delta and merged with the stored row.
    fn run(&mut self, changes: &[(Option<f64>, i8)]) -> Result<()> {
        for (v, s) in changes {
            if *s > 0 {
                self.live.push(*v);
            } else {
                let bits = v.map(f64::to_bits);
                let at = self.live.iter().position(|l| l.map(f64::to_bits) == bits);
                self.live.remove(at.expect("a retracted value is live"));
            }
        }
        let values: Vec<Option<f64>> = changes.iter().map(|c| c.0).collect();
        let signs: Vec<i8> = changes.iter().map(|c| c.1).collect();
        let mut delta = Groups::default();
        self.ev.fold(&batch(&values), &signs, &mut delta, None)?;
        let old = match &self.stored {
            Some(b) => self.ev.stored(b)?.1.into_iter().next(),
            None => None,
        };
        let new = match self.ev.merge(old.as_ref(), &delta.accs[0])? {
            Outcome::Keep(acc) => Some(acc),
            Outcome::Gone => None,
            Outcome::Recompute => {
                self.recomputed += 1;
                self.fresh()?
            }
        };
        let key = delta.keys[0].clone();
        self.stored = new
            .map(|acc| self.ev.to_batch(&[&key], &[&acc]))
            .transpose()?;
        Ok(())
    }

    /// `total` and `mean` of the stored row (`None`: no row, or null).
    fn measures(&self) -> (Option<f64>, Option<f64>) {
        let Some(b) = &self.stored else {
            return (None, None);
        };
        let get = |name: &str| {
            let c = b
                .column_by_name(name)
                .expect(name)
                .as_primitive::<Float64Type>();
            c.is_valid(0).then(|| c.value(0))
        };
        (get("total"), get("mean"))
    }
}

/// SQL's `SUM` of `values`, exactly (every finite test value is a multiple of 1/4 below 2^80).
fn sql_sum(values: &[Option<f64>]) -> Option<f64> {
    let some: Vec<f64> = values.iter().flatten().copied().collect();
    if some.is_empty() {
        return None;
    }
    let (pos, neg) = (
        some.contains(&f64::INFINITY),
        some.contains(&f64::NEG_INFINITY),
    );
    if some.iter().any(|v| v.is_nan()) || (pos && neg) {
        return Some(f64::NAN);
    }
    if pos || neg {
        return Some(if pos {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        });
    }
    let quarters: i128 = some.iter().map(|v| (v * 4.0) as i128).sum();
    Some(quarters as f64 / 4.0)
}

fn same(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) if x.is_nan() || y.is_nan() => x.is_nan() && y.is_nan(),
        (Some(x), Some(y)) if x.is_infinite() || y.is_infinite() => x == y,
        (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0),
        (x, y) => x == y,
    }
}

#[test]
fn a_nan_retracted_gives_the_finite_sum_back() -> Result<()> {
    let mut g = Group::new();
    g.run(&[(Some(1.0), 1), (Some(f64::NAN), 1), (Some(2.5), 1)])?;
    let (total, mean) = g.measures();
    assert!(total.is_some_and(f64::is_nan) && mean.is_some_and(f64::is_nan));
    g.run(&[(Some(f64::NAN), -1)])?;
    assert_eq!(g.measures(), (Some(3.5), Some(1.75)));
    Ok(())
}

#[test]
fn both_infinities_are_nan_and_each_is_itself() -> Result<()> {
    let mut g = Group::new();
    g.run(&[(Some(f64::INFINITY), 1), (Some(2.0), 1)])?;
    assert_eq!(g.measures(), (Some(f64::INFINITY), Some(f64::INFINITY)));
    g.run(&[(Some(f64::NEG_INFINITY), 1)])?;
    assert!(g.measures().0.is_some_and(f64::is_nan));
    g.run(&[(Some(f64::INFINITY), -1)])?;
    assert_eq!(
        g.measures(),
        (Some(f64::NEG_INFINITY), Some(f64::NEG_INFINITY))
    );
    g.run(&[(Some(f64::NEG_INFINITY), -1)])?;
    assert_eq!(g.measures(), (Some(2.0), Some(2.0)));
    Ok(())
}

#[test]
fn retracting_a_large_value_keeps_the_small_ones() -> Result<()> {
    let mut g = Group::new();
    g.run(&[(Some(1e20), 1)])?;
    g.run(&[(Some(1.0), 1)])?;
    g.run(&[(Some(1e20), -1)])?;
    assert_eq!(g.measures(), (Some(1.0), Some(1.0)));
    // Many small values under a large one, the large one retracted in the same run as others.
    let mut g = Group::new();
    g.run(&[(Some(7e18), 1), (Some(0.25), 1)])?;
    for _ in 0..10 {
        g.run(&[(Some(0.5), 1), (Some(-0.25), 1)])?;
    }
    g.run(&[(Some(7e18), -1), (Some(0.25), -1), (Some(3.0), 1)])?;
    assert_eq!(g.measures(), (Some(5.5), Some(5.5 / 21.0)));
    Ok(())
}

/// Random histories: after every run the stored group is SQL's sum and mean of its current
/// values and equals a recompute; the schedules did retract NaN, infinities and large values.
#[test]
fn every_history_equals_sql_over_the_current_values_and_a_recompute() -> Result<()> {
    let pool = [
        Some(0.25),
        Some(1.0),
        Some(-3.5),
        Some(2.75),
        Some(1e15),
        Some(-1e15),
        Some(1e20),
        Some(7e18),
        Some(f64::NAN),
        Some(f64::INFINITY),
        Some(f64::NEG_INFINITY),
        None,
    ];
    let mut rng = fastrand::Rng::with_seed(37);
    let mut specials_retracted = 0;
    for history in 0..200 {
        let mut g = Group::new();
        for step in 0..12 {
            let mut changes = Vec::new();
            let mut live = g.live.clone();
            for _ in 0..rng.usize(1..5) {
                if !live.is_empty() && rng.u8(0..3) == 0 {
                    let v = live.swap_remove(rng.usize(0..live.len()));
                    specials_retracted += usize::from(v.is_some_and(|v| !v.is_finite()));
                    changes.push((v, -1));
                } else {
                    let v = pool[rng.usize(0..pool.len())];
                    live.push(v);
                    changes.push((v, 1));
                }
            }
            g.run(&changes)?;
            let (total, mean) = g.measures();
            let want = sql_sum(&g.live);
            let n = g.live.iter().flatten().count();
            let want_mean = want.map(|s| s / n as f64);
            assert!(
                same(total, want) && same(mean, want_mean),
                "history {history} step {step}: {:?} gives {total:?} / {mean:?}, SQL {want:?} / \
                 {want_mean:?}",
                g.live
            );
            let fresh = g.fresh()?;
            let recomputed = fresh
                .map(|acc| g.ev.to_batch(&[&key_a()], &[&acc]))
                .transpose()?;
            let again = Group {
                stored: recomputed,
                ..Group::new()
            };
            assert!(same(total, again.measures().0) && same(mean, again.measures().1));
        }
    }
    assert!(specials_retracted > 100, "{specials_retracted}");
    Ok(())
}

/// The encoded key of group `a`.
fn key_a() -> Vec<u8> {
    let mut g = Groups::default();
    evaluator()
        .fold(&batch(&[None]), &[1], &mut g, None)
        .expect("fold");
    g.keys[0].clone()
}

/// A gold table written before the float state columns: its rows read as before (the sum of a
/// `sum` is its measure column), and a group whose stored float sum is NaN (poisoned then) is
/// recomputed when touched.
#[test]
fn an_output_without_the_float_state_is_read_and_a_poisoned_group_recomputed() -> Result<()> {
    let ev = evaluator();
    let key = key_a();
    let legacy = |total: f64, mean_sum: f64| -> Result<RecordBatch> {
        let fields = vec![
            Field::new("g", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
            Field::new("total", DataType::Float64, true),
            Field::new("mean", DataType::Float64, true),
            Field::new("valued", DataType::Int64, true),
            Field::new("__rows", DataType::Int64, true),
            Field::new("__total_n", DataType::Int64, true),
            Field::new("__mean_n", DataType::Int64, true),
            Field::new("__mean_sum", DataType::Float64, true),
        ];
        let i =
            |v: i64| -> ArrayRef { Arc::new(deltalake::arrow::array::Int64Array::from(vec![v])) };
        let f = |v: f64| -> ArrayRef { Arc::new(Float64Array::from(vec![v])) };
        let cols = vec![
            Arc::new(StringArray::from(vec!["a"])) as ArrayRef,
            i(2),
            f(total),
            f(mean_sum / 2.0),
            i(2),
            i(2),
            i(2),
            i(2),
            f(mean_sum),
        ];
        Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?)
    };
    let mut delta = Groups::default();
    ev.fold(&batch(&[Some(4.0)]), &[1], &mut delta, None)?;
    let (_, old) = ev.stored(&legacy(3.0, 3.0)?)?;
    let Outcome::Keep(acc) = ev.merge(old.first(), &delta.accs[0])? else {
        panic!("a finite legacy group merges");
    };
    let g = Group {
        stored: Some(ev.to_batch(&[&key], &[&acc])?),
        ..Group::new()
    };
    assert_eq!(g.measures(), (Some(7.0), Some(7.0 / 3.0)));
    let (_, old) = ev.stored(&legacy(f64::NAN, f64::NAN)?)?;
    assert_eq!(ev.merge(old.first(), &delta.accs[0])?, Outcome::Recompute);
    Ok(())
}
