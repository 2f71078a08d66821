//! The aggregate kind of refine job (`[refine.aggregate]`, a gold table): one output row per
//! group of a source, with `count`/`sum`/`min`/`max`/`avg` measures kept exact as the source
//! gains, loses and changes rows. Group columns are source columns or `date(col)` / `hour(col)`
//! of a timestamp (UTC); each is written `expr [as name]`, each measure `fn(arg) as name`.
//! The internal state (`__rows`, and per `sum`/`avg` the count of non-null values, per `avg` its
//! sum) is kept as columns of the output, named after the measure.

mod filter;

pub use filter::{Comparison, Condition, Filter, Test};

use crate::error::{Error, Result};
use serde::Deserialize;

/// Count of source rows per group, always kept (a group whose count reaches zero goes).
pub const ROWS_COLUMN: &str = "__rows";

/// A group-by column.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct GroupColumn {
    /// How its value is computed from a source row.
    pub expr: GroupExpr,
    /// The output column.
    pub name: String,
}

/// How a group column's value is computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupExpr {
    /// A source column as is.
    Column(String),
    /// `date(col)`: the UTC calendar date of a timestamp (or a date) column.
    Date(String),
    /// `hour(col)`: the UTC hour of day (0-23) of a timestamp column.
    Hour(String),
}

impl GroupExpr {
    /// The source column read.
    pub fn column(&self) -> &str {
        match self {
            GroupExpr::Column(c) | GroupExpr::Date(c) | GroupExpr::Hour(c) => c,
        }
    }
}

/// A measure.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Measure {
    /// The function.
    pub func: MeasureFn,
    /// Its source column (`None` for `count(*)`).
    pub column: Option<String>,
    /// The output column.
    pub name: String,
}

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasureFn {
    /// `count(*)`: rows.
    CountRows,
    /// `count(col)`: non-null values.
    Count,
    /// `sum(col)`: null when the group has no non-null value.
    Sum,
    /// `min(col)`.
    Min,
    /// `max(col)`.
    Max,
    /// `avg(col)`: kept as its sum and count.
    Avg,
}

impl Measure {
    /// Internal column: the count of non-null values of a `sum`/`avg`.
    pub fn count_column(&self) -> Option<String> {
        matches!(self.func, MeasureFn::Sum | MeasureFn::Avg).then(|| format!("__{}_n", self.name))
    }

    /// Internal column: the sum of an `avg`.
    pub fn sum_column(&self) -> Option<String> {
        (self.func == MeasureFn::Avg).then(|| format!("__{}_sum", self.name))
    }
}

/// A gold table: `source` grouped by `group_by`, with `measures`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregateConfig {
    /// The source table.
    pub source: String,
    /// Group columns (at least one), e.g. `["order_owner", "date(timestamp) as day"]`.
    pub group_by: Vec<GroupColumn>,
    /// Measures (at least one), e.g. `["count(*) as orders", "sum(order_value) as total"]`.
    pub measures: Vec<Measure>,
    /// Only source rows matching this, e.g. `"order_value > 0 AND order_owner != 'test'"`.
    #[serde(default)]
    pub filter: Option<Filter>,
}

/// `text` split at a case-insensitive ` as `: the expression and its optional name.
fn split_as(text: &str) -> (String, Option<String>) {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    match lower.rfind(" as ") {
        Some(i) => (
            t[..i].trim().to_string(),
            Some(t[i + 4..].trim().to_string()),
        ),
        None => (t.to_string(), None),
    }
}

/// `fn(arg)` as `("fn" lower-cased, "arg")`.
fn call(expr: &str) -> Option<(String, String)> {
    let open = expr.find('(')?;
    let inner = expr.strip_suffix(')')?.get(open + 1..)?;
    Some((
        expr[..open].trim().to_ascii_lowercase(),
        inner.trim().to_string(),
    ))
}

pub(crate) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl TryFrom<String> for GroupColumn {
    type Error = String;

    fn try_from(text: String) -> std::result::Result<Self, String> {
        let (expr, name) = split_as(&text);
        let hint = "write a source column or `date(col) as name` / `hour(col) as name`";
        let expr = match call(&expr) {
            Some((f, arg)) if f == "date" && is_name(&arg) => GroupExpr::Date(arg),
            Some((f, arg)) if f == "hour" && is_name(&arg) => GroupExpr::Hour(arg),
            Some(_) => return Err(format!("group column \"{text}\": {hint}")),
            None if is_name(&expr) => GroupExpr::Column(expr),
            None => return Err(format!("group column \"{text}\": {hint}")),
        };
        let name = match (name, &expr) {
            (Some(n), _) => n,
            (None, GroupExpr::Column(c)) => c.clone(),
            (None, _) => {
                return Err(format!(
                    "group column \"{text}\" needs a name: `... as day`"
                ));
            }
        };
        if !is_name(&name) {
            return Err(format!("group column \"{text}\": bad name \"{name}\""));
        }
        Ok(Self { expr, name })
    }
}

impl TryFrom<String> for Measure {
    type Error = String;

    fn try_from(text: String) -> std::result::Result<Self, String> {
        let (expr, name) = split_as(&text);
        let hint = "write e.g. `count(*) as orders`, `sum(order_value) as total` (count, sum, min, max, avg)";
        let Some((f, arg)) = call(&expr) else {
            return Err(format!("measure \"{text}\": {hint}"));
        };
        let func = match (f.as_str(), arg.as_str()) {
            ("count", "*") => MeasureFn::CountRows,
            ("count", _) => MeasureFn::Count,
            ("sum", _) => MeasureFn::Sum,
            ("min", _) => MeasureFn::Min,
            ("max", _) => MeasureFn::Max,
            ("avg", _) => MeasureFn::Avg,
            _ => return Err(format!("measure \"{text}\": {hint}")),
        };
        let column = match func {
            MeasureFn::CountRows => None,
            _ if is_name(&arg) => Some(arg),
            _ => return Err(format!("measure \"{text}\": the argument must be a column")),
        };
        let Some(name) = name else {
            return Err(format!("measure \"{text}\" needs a name: `... as total`"));
        };
        if !is_name(&name) {
            return Err(format!("measure \"{text}\": bad name \"{name}\""));
        }
        Ok(Self { func, column, name })
    }
}

impl AggregateConfig {
    /// The source columns read (group columns first, then measure and filter columns, each
    /// once).
    pub fn source_columns(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let all = self
            .group_by
            .iter()
            .map(|g| g.expr.column().to_string())
            .chain(self.measures.iter().filter_map(|m| m.column.clone()))
            .chain(
                self.filter
                    .iter()
                    .flat_map(|f| f.conditions.iter().map(|c| c.column.clone())),
            );
        for c in all {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    /// Every output column name: group columns, measures, then the internal state.
    pub fn output_columns(&self) -> Vec<String> {
        let mut out: Vec<String> = self.group_by.iter().map(|g| g.name.clone()).collect();
        out.extend(self.measures.iter().map(|m| m.name.clone()));
        out.push(ROWS_COLUMN.to_string());
        for m in &self.measures {
            out.extend(m.count_column());
            out.extend(m.sum_column());
        }
        out
    }

    /// Check the kind's rules for a job writing `output` partitioned by `partition_by`.
    pub(crate) fn validate(&self, key: &str, output: &str, partition_by: &[String]) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.source == output {
            return bad(format!("`{key}.aggregate.source` is the job's output"));
        }
        if self.group_by.is_empty() || self.measures.is_empty() {
            return bad(format!(
                "`{key}.aggregate` needs at least one `group_by` column and one measure"
            ));
        }
        let names: Vec<String> = self.output_columns();
        for (i, n) in names.iter().enumerate() {
            if names[..i].iter().any(|o| o.eq_ignore_ascii_case(n)) {
                return bad(format!(
                    "`{key}.aggregate`: output column \"{n}\" is named twice (names are case-insensitive in Delta)"
                ));
            }
        }
        let user = self
            .group_by
            .iter()
            .map(|g| &g.name)
            .chain(self.measures.iter().map(|m| &m.name));
        if let Some(n) = user.into_iter().find(|n| n.starts_with("__")) {
            return bad(format!(
                "`{key}.aggregate`: \"{n}\" starts with `__`, which is kept for the aggregate's state"
            ));
        }
        if let Some(p) = partition_by
            .iter()
            .find(|p| !self.group_by.iter().any(|g| &g.name == *p))
        {
            return bad(format!(
                "`{key}.partition_by`: \"{p}\" is not a group column (an aggregate is partitioned by group columns, so a group never moves)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_block_parses() -> std::result::Result<(), String> {
        let g = GroupColumn::try_from("date(timestamp) as day".to_string())?;
        assert_eq!(g.expr, GroupExpr::Date("timestamp".into()));
        assert_eq!(g.name, "day");
        let g = GroupColumn::try_from("HOUR(timestamp) AS hour".to_string())?;
        assert_eq!(g.expr, GroupExpr::Hour("timestamp".into()));
        let g = GroupColumn::try_from("order_owner".to_string())?;
        assert_eq!(g.name, "order_owner");
        let m = Measure::try_from("count(*) as orders".to_string())?;
        assert_eq!((m.func, m.column), (MeasureFn::CountRows, None));
        let m = Measure::try_from("avg(order_value) as mean".to_string())?;
        assert_eq!(m.func, MeasureFn::Avg);
        assert_eq!(m.sum_column().as_deref(), Some("__mean_sum"));
        assert_eq!(m.count_column().as_deref(), Some("__mean_n"));
        Ok(())
    }

    #[test]
    fn bad_spellings_say_how_to_write_one() {
        for (text, want) in [
            ("date(timestamp)", "needs a name"),
            ("week(timestamp) as w", "date(col)"),
            ("a b", "source column"),
        ] {
            let e = GroupColumn::try_from(text.to_string())
                .err()
                .unwrap_or_default();
            assert!(e.contains(want), "{text}: {e}");
        }
        for (text, want) in [
            ("sum(order_value)", "needs a name"),
            ("median(x) as m", "count, sum"),
            ("sum(*) as s", "must be a column"),
            ("order_value as v", "count(*)"),
        ] {
            let e = Measure::try_from(text.to_string())
                .err()
                .unwrap_or_default();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
