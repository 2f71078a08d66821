//! The `filter` of an aggregate: conditions on source columns joined by `AND`
//! (`col = 'text'`, `col > 10`, `col IS NOT NULL`; operators `= != <> < <= > >=`), parsed when
//! the config is read. Literals are kept as text and cast to the column's type when the job runs
//! (the source's schema is known only then).

use super::is_name;
use serde::Deserialize;

/// A row filter: conditions on source columns, all of which must hold (SQL `WHERE` semantics:
/// a comparison with null is not true).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Filter {
    /// The conditions (joined by `AND`).
    pub conditions: Vec<Condition>,
}

/// One condition of a [`Filter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// The source column.
    pub column: String,
    /// The test.
    pub test: Test,
}

/// What a [`Condition`] tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Test {
    /// `IS NULL`.
    IsNull,
    /// `IS NOT NULL`.
    IsNotNull,
    /// A comparison with a literal (its text: a number, `true`/`false`, or a quoted string
    /// unquoted), cast to the column's type when the job runs.
    Compare(Comparison, String),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `=`
    Eq,
    /// `!=` or `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl TryFrom<String> for Filter {
    type Error = String;

    fn try_from(text: String) -> std::result::Result<Self, String> {
        let hint = "write conditions joined by AND: `col = 'text'`, `col > 10`, `col IS NOT NULL` \
                    (operators = != <> < <= > >=)";
        let mut conditions = Vec::new();
        let lower = text.to_ascii_lowercase();
        let mut rest = (text.as_str(), lower.as_str());
        loop {
            // Split at the next ` and ` outside a quoted string.
            let mut quoted = false;
            let mut cut = None;
            for (i, c) in rest.1.char_indices() {
                if c == '\'' {
                    quoted = !quoted;
                } else if !quoted && rest.1[i..].starts_with(" and ") {
                    cut = Some(i);
                    break;
                }
            }
            let (part, next) = match cut {
                Some(i) => (&rest.0[..i], Some((&rest.0[i + 5..], &rest.1[i + 5..]))),
                None => (rest.0, None),
            };
            conditions
                .push(condition(part.trim()).ok_or_else(|| format!("filter \"{text}\": {hint}"))?);
            match next {
                Some(n) => rest = n,
                None => break,
            }
        }
        Ok(Self { conditions })
    }
}

fn condition(text: &str) -> Option<Condition> {
    let lower = text.to_ascii_lowercase();
    for (suffix, test) in [
        (" is not null", Test::IsNotNull),
        (" is null", Test::IsNull),
    ] {
        if let Some(col) = lower.strip_suffix(suffix) {
            let column = text[..col.len()].trim().to_string();
            return is_name(&column).then_some(Condition { column, test });
        }
    }
    let ops = [
        ("<>", Comparison::Ne),
        ("!=", Comparison::Ne),
        ("<=", Comparison::Le),
        (">=", Comparison::Ge),
        ("=", Comparison::Eq),
        ("<", Comparison::Lt),
        (">", Comparison::Gt),
    ];
    let (i, len, op) = ops
        .iter()
        .filter_map(|(s, op)| text.find(s).map(|i| (i, s.len(), *op)))
        .min_by_key(|(i, len, _)| (*i, usize::MAX - len))?;
    let column = text[..i].trim().to_string();
    let literal = text[i + len..].trim();
    let value = match literal
        .strip_prefix('\'')
        .and_then(|l| l.strip_suffix('\''))
    {
        Some(quoted) => quoted.replace("''", "'"),
        None if !literal.is_empty() && !literal.contains(char::is_whitespace) => {
            literal.to_string()
        }
        None => return None,
    };
    is_name(&column).then_some(Condition {
        column,
        test: Test::Compare(op, value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse() -> std::result::Result<(), String> {
        let f = Filter::try_from(
            "order_value > 0 AND order_owner != 'it''s and more' and x IS NOT NULL".to_string(),
        )?;
        assert_eq!(
            f.conditions,
            [
                Condition {
                    column: "order_value".into(),
                    test: Test::Compare(Comparison::Gt, "0".into())
                },
                Condition {
                    column: "order_owner".into(),
                    test: Test::Compare(Comparison::Ne, "it's and more".into())
                },
                Condition {
                    column: "x".into(),
                    test: Test::IsNotNull
                },
            ]
        );
        let f = Filter::try_from("v <= -3".to_string())?;
        assert_eq!(
            f.conditions[0].test,
            Test::Compare(Comparison::Le, "-3".into())
        );
        for bad in ["v >", "a b = 1", "v = 1 or w = 2", ""] {
            assert!(Filter::try_from(bad.to_string()).is_err(), "{bad}");
        }
        Ok(())
    }
}
