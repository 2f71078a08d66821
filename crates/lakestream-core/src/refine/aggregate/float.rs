//! A float `sum`/`avg` accumulator that stays SQL's `SUM`/`AVG` (DuckDB's) over a group's
//! current values whatever was added and retracted: NaN, +Inf and -Inf are counted apart from
//! the finite values, whose sum is compensated (Neumaier: a high part and the rounding error it
//! lost); a merge that cannot be trusted (a retraction far larger than what remains, a finite
//! part that overflowed or was stored poisoned by an older version) asks for a recompute.

use lakestream_formats::refine::aggregate::{Measure, MeasureFn};

/// A retracted finite value more than this many times what remains makes the group be
/// recomputed: the cancellation would leave mostly rounding error of the large values.
const LARGE_RETRACTION: f64 = (1u64 << 20) as f64;

/// A float sum, by kind of value.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct FloatSum {
    /// The finite values' sum (high part).
    pub sum: f64,
    /// What `sum` lost to rounding (Neumaier's compensation).
    pub err: f64,
    /// NaN values.
    pub nan: i64,
    /// +Inf values.
    pub pos_inf: i64,
    /// -Inf values.
    pub neg_inf: i64,
    /// In a run's delta: the largest magnitude of a finite value retracted (0: none).
    pub retracted: f64,
}

impl FloatSum {
    /// Fold `v` with `sign` (+1 added, -1 retracted).
    pub fn fold(&mut self, v: f64, sign: i64) {
        if v.is_nan() {
            self.nan += sign;
        } else if v == f64::INFINITY {
            self.pos_inf += sign;
        } else if v == f64::NEG_INFINITY {
            self.neg_inf += sign;
        } else {
            self.add(if sign < 0 { -v } else { v });
            if sign < 0 {
                self.retracted = self.retracted.max(v.abs());
            }
        }
    }

    /// Add the finite `x` to the compensated sum.
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        self.err += if self.sum.abs() >= x.abs() {
            (self.sum - t) + x
        } else {
            (x - t) + self.sum
        };
        self.sum = t;
    }

    /// The finite values' sum (an overflowed sum is its infinite high part).
    pub fn finite(&self) -> f64 {
        if self.sum.is_finite() {
            self.sum + self.err
        } else {
            self.sum
        }
    }

    /// SQL's `SUM`: NaN with a NaN or both infinities, else the infinity, else the finite sum.
    pub fn value(&self) -> f64 {
        if self.nan > 0 || (self.pos_inf > 0 && self.neg_inf > 0) {
            f64::NAN
        } else if self.pos_inf > 0 {
            f64::INFINITY
        } else if self.neg_inf > 0 {
            f64::NEG_INFINITY
        } else {
            self.finite()
        }
    }

    /// SQL's `AVG` over `n` non-null values (NaN and infinities included).
    pub fn mean(&self, n: i64) -> f64 {
        let v = self.value();
        if v.is_finite() { v / n as f64 } else { v }
    }

    /// A group's stored state `self` with a run's `delta`, for `n` non-null values left; `None`
    /// when the result cannot be trusted (recompute the group from the source).
    pub fn merged(&self, delta: &FloatSum, n: i64) -> Option<FloatSum> {
        if n == 0 {
            // No value left: exactly zero (no residue of the retractions).
            return Some(FloatSum::default());
        }
        if n < 0 || !(self.sum.is_finite() && self.err.is_finite()) {
            return None;
        }
        let mut out = FloatSum {
            nan: self.nan + delta.nan,
            pos_inf: self.pos_inf + delta.pos_inf,
            neg_inf: self.neg_inf + delta.neg_inf,
            ..*self
        };
        out.add(delta.sum);
        out.err += delta.err;
        let counts_ok = out.nan >= 0 && out.pos_inf >= 0 && out.neg_inf >= 0;
        let finite_ok = out.sum.is_finite() && out.err.is_finite();
        let kept = delta.retracted <= out.finite().abs() * LARGE_RETRACTION;
        (counts_ok && finite_ok && kept).then_some(out)
    }
}

/// The state columns of a float `sum`/`avg` `m` besides `__m_n`: the finite sum's high part,
/// its compensation, then the NaN, +Inf and -Inf counts.
pub(super) fn state_columns(m: &Measure) -> Option<[String; 5]> {
    matches!(m.func, MeasureFn::Sum | MeasureFn::Avg).then(|| {
        let n = &m.name;
        [
            format!("__{n}_sum"),
            format!("__{n}_err"),
            format!("__{n}_nan"),
            format!("__{n}_pinf"),
            format!("__{n}_ninf"),
        ]
    })
}

/// Whether output column `name` is float state an output written before it existed may lack
/// (read as zero; the run adds it): all of a float measure's but an `avg`'s `__m_sum`.
pub(super) fn optional_column(m: &Measure, name: &str) -> bool {
    state_columns(m).is_some_and(|cols| {
        cols.iter()
            .enumerate()
            .any(|(i, c)| c == name && !(i == 0 && m.func == MeasureFn::Avg))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(values: &[(f64, i64)]) -> FloatSum {
        let mut s = FloatSum::default();
        for (v, sign) in values {
            s.fold(*v, *sign);
        }
        s
    }

    #[test]
    fn specials_are_counted_apart_and_decide_the_value() {
        let s = of(&[(1.0, 1), (f64::NAN, 1)]);
        assert!(s.value().is_nan() && s.mean(2).is_nan());
        assert_eq!(s.finite(), 1.0);
        let s = of(&[(f64::INFINITY, 1), (f64::NEG_INFINITY, 1), (2.0, 1)]);
        assert!(s.value().is_nan());
        let s = of(&[
            (f64::INFINITY, 1),
            (f64::NEG_INFINITY, 1),
            (f64::NEG_INFINITY, -1),
        ]);
        assert_eq!(s.value(), f64::INFINITY);
        assert_eq!(of(&[(f64::NEG_INFINITY, 1)]).mean(1), f64::NEG_INFINITY);
    }

    #[test]
    fn the_compensated_sum_keeps_small_values_under_large_ones() {
        let s = of(&[(1e20, 1), (1.0, 1), (1e20, -1)]);
        assert_eq!((s.finite(), s.retracted), (1.0, 1e20));
        let mut many = of(&[(1e16, 1)]);
        for _ in 0..1000 {
            many.fold(0.5, 1);
        }
        many.fold(1e16, -1);
        assert_eq!(many.finite(), 500.0);
    }

    #[test]
    fn a_merge_asks_for_a_recompute_when_it_cannot_be_trusted() {
        let stored = of(&[(1e20, 1), (1.0, 1)]);
        // Retracting 1e20 leaves 1: far more than 2^20 times what remains.
        assert_eq!(stored.merged(&of(&[(1e20, -1)]), 1), None);
        // A retraction small against what remains merges.
        let kept = stored.merged(&of(&[(1.0, -1), (3.0, 1)]), 2);
        assert_eq!(kept.map(|k| k.finite()), Some(1e20 + 3.0));
        // A stored finite part that is not finite (poisoned, or an overflow) is recomputed.
        let poisoned = FloatSum {
            sum: f64::NAN,
            ..FloatSum::default()
        };
        assert_eq!(poisoned.merged(&of(&[(1.0, 1)]), 3), None);
        // Nothing left: exactly zero; counts that go negative are not trusted.
        assert_eq!(
            stored.merged(&of(&[(1.0, -1)]), 0),
            Some(FloatSum::default())
        );
        assert_eq!(stored.merged(&of(&[(f64::NAN, -1)]), 1), None);
    }

    #[test]
    fn optional_columns_are_the_new_float_state() {
        let m = |text: &str| Measure::try_from(text.to_string()).expect("measure");
        let (sum, avg) = (m("sum(v) as t"), m("avg(v) as a"));
        assert!(optional_column(&sum, "__t_sum") && optional_column(&sum, "__t_ninf"));
        assert!(!optional_column(&avg, "__a_sum") && optional_column(&avg, "__a_err"));
        assert!(!optional_column(&sum, "__t_n") && state_columns(&m("count(v) as c")).is_none());
    }
}
