//! Name templates and topic patterns: a family table's bronze / silver names from its
//! template (and back), and which Debezium topics a pattern matches.

use super::FamilyTable;
use crate::error::{Error, Result};

/// Whether topic pattern `pattern` matches `topic` (`*` = one or more non-`.` characters).
pub fn topic_matches(pattern: &str, topic: &str) -> bool {
    let (p, t): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), topic.split('.').collect());
    p.len() == t.len()
        && p.iter()
            .zip(&t)
            .all(|(p, t)| !t.is_empty() && segment_matches(p, t))
}

fn segment_matches(pattern: &str, text: &str) -> bool {
    let Some((head, tail)) = pattern.split_once('*') else {
        return pattern == text;
    };
    // `*` matches one or more characters, greedily tried at each position.
    let Some(rest) = text.strip_prefix(head) else {
        return false;
    };
    (1..=rest.len())
        .filter(|&i| rest.is_char_boundary(i))
        .any(|i| segment_matches(tail, &rest[i..]))
}

/// The template's segments before the first placeholder.
pub(super) fn fixed_prefix(template: &str) -> String {
    template
        .split('/')
        .take_while(|s| !s.contains('{'))
        .collect::<Vec<_>>()
        .join("/")
}

pub(super) fn check_template(key: &str, template: &str) -> Result<()> {
    let segs: Vec<&str> = template.split('/').collect();
    let fixed = segs.iter().take_while(|s| !s.contains('{')).count();
    let rest = &segs[fixed..];
    let ok = fixed >= 1
        && rest.contains(&"{table}")
        && rest.iter().all(|s| matches!(*s, "{schema}" | "{table}"))
        && rest.iter().filter(|s| **s == "{table}").count() == 1
        && rest.iter().filter(|s| **s == "{schema}").count() <= 1;
    if !ok {
        return Err(Error::Config(format!(
            "`{key}` = \"{template}\": write fixed segments, then `{{schema}}` and `{{table}}` as whole segments, e.g. \"bronze/crm/{{schema}}/{{table}}\""
        )));
    }
    let fixed_path = segs[..fixed].join("/");
    if let Err(why) = crate::names::check_table_path(&fixed_path) {
        return Err(Error::Config(format!("`{key}` = \"{template}\": {why}")));
    }
    if segs[..fixed].iter().any(|s| s.starts_with('_')) {
        return Err(Error::Config(format!(
            "`{key}` = \"{template}\": a segment starts with `_`"
        )));
    }
    Ok(())
}

pub(super) fn fill(template: &str, t: &FamilyTable) -> Result<String> {
    for (what, v) in [("schema", &t.schema), ("table", &t.table)] {
        let ok = !v.is_empty()
            && !v.starts_with(['_', '.'])
            && v.len() <= 128
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '='));
        if !ok {
            return Err(Error::Config(format!(
                "CDC {what} name \"{}\" cannot name a table: use [A-Za-z0-9_.=-], not starting with `_` or `.`, at most 128 characters",
                v.escape_debug()
            )));
        }
    }
    if t.table.contains('.') {
        // Jobs, keys and side tables name a table `<schema>.<table>`: with a `.` in the table,
        // `a/b.c` and `a.b/c` would be one name.
        return Err(Error::Config(format!(
            "CDC table name \"{}\" contains `.`: `<schema>.<table>` names would be ambiguous \
             (`a/b.c` and `a.b/c` are both `a.b.c`); deliver it under a name without `.`",
            t.table.escape_debug()
        )));
    }
    let name = template
        .replace("{schema}", &t.schema)
        .replace("{table}", &t.table);
    crate::names::check_table_path(&name).map_err(Error::Config)?;
    Ok(name)
}

pub(super) fn unfill(template: &str, name: &str) -> Option<FamilyTable> {
    let (ts, ns): (Vec<&str>, Vec<&str>) =
        (template.split('/').collect(), name.split('/').collect());
    if ts.len() != ns.len() {
        return None;
    }
    let (mut schema, mut table) = (String::new(), None);
    for (t, n) in ts.iter().zip(&ns) {
        match *t {
            "{schema}" => schema = (*n).to_string(),
            "{table}" => table = Some((*n).to_string()),
            fixed if fixed.eq_ignore_ascii_case(n) => {}
            _ => return None,
        }
    }
    let t = FamilyTable {
        schema,
        table: table?,
    };
    fill(template, &t).ok().filter(|n| n == name).map(|_| t)
}
