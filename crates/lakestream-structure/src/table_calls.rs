//! No raw `DeltaTable` outside the table layer: `TableHandle::table()` / `table_mut()` are called
//! only under `lakestream-core`'s `table/` and `commit/`; everything else reads through the
//! seams of `table/`.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::visit::{self, Visit};

use crate::{Error, Rule, SourceFile, Violation, parse};

/// The folders that may call the raw accessors.
pub const TABLE_LAYER: &[&str] = &[
    "crates/lakestream-core/src/table/",
    "crates/lakestream-core/src/commit/",
];

/// The names of the raw accessors.
const ACCESSORS: [&str; 2] = ["table", "table_mut"];

/// Every call `.table()` / `.table_mut()` (no arguments) in `file`, test code included, also
/// inside macro arguments (`assert_eq!(h.table().version(), ..)`); none under [`TABLE_LAYER`].
pub fn raw_table_calls(file: &SourceFile) -> Result<Vec<Violation>, Error> {
    if TABLE_LAYER.iter().any(|dir| file.path.starts_with(dir)) {
        return Ok(Vec::new());
    }
    let mut calls = Calls {
        file: &file.path,
        found: Vec::new(),
    };
    calls.visit_file(&parse(file)?);
    calls.found.sort_by_key(|v| v.line);
    Ok(calls.found)
}

/// Visitor collecting the raw accessor calls of one file.
struct Calls<'a> {
    file: &'a str,
    found: Vec<Violation>,
}

impl Calls<'_> {
    /// Records a call of `method` at `line`.
    fn record(&mut self, method: &str, line: usize) {
        self.found.push(Violation {
            rule: Rule::RawTable,
            file: self.file.to_owned(),
            line,
            detail: format!(
                "`.{method}()` hands out delta-rs's DeltaTable: read through a seam of table/"
            ),
        });
    }

    /// `. table ( )` sequences in a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, token) in tokens.iter().enumerate() {
            if let TokenTree::Group(group) = token {
                self.tokens(group.stream());
            }
            let (TokenTree::Punct(dot), Some(TokenTree::Ident(name)), Some(TokenTree::Group(args))) =
                (token, tokens.get(i + 1), tokens.get(i + 2))
            else {
                continue;
            };
            let name = name.to_string();
            if dot.as_char() == '.'
                && ACCESSORS.contains(&name.as_str())
                && args.delimiter() == Delimiter::Parenthesis
                && args.stream().is_empty()
            {
                self.record(&name, dot.span().start().line);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Calls<'_> {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let name = call.method.to_string();
        if call.args.is_empty() && ACCESSORS.contains(&name.as_str()) {
            self.record(&name, call.method.span().start().line);
        }
        visit::visit_expr_method_call(self, call);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(path: &str, text: &str) -> Vec<String> {
        let file = SourceFile {
            path: path.into(),
            text: text.into(),
        };
        let found = raw_table_calls(&file).unwrap();
        found.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_raw_table_call_is_reported() {
        let text = "fn f(h: &mut H) {\n    let v = h.table().version();\n    \
                    assert_eq!(h\n        .table_mut().x, 1);\n    catalog.table(\"db\", \"t\");\n}\n";
        let found = calls("crates/refine/src/a.rs", text);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            found[0],
            "crates/refine/src/a.rs:2: no raw .table()/.table_mut() outside core's table/ and \
             commit/: `.table()` hands out delta-rs's DeltaTable: read through a seam of table/ \
             (read ARCHITECTURE.md, \"Where things live\")"
        );
        assert!(
            found[1].starts_with("crates/refine/src/a.rs:4: "),
            "{found:?}"
        );
    }

    #[test]
    fn the_table_layer_may_call_them() {
        let text = "fn f(h: &H) { h.table(); }";
        assert!(calls("crates/lakestream-core/src/table/handle.rs", text).is_empty());
        assert!(calls("crates/lakestream-core/src/commit/run.rs", text).is_empty());
        assert_eq!(calls("crates/lakestream-core/src/tables.rs", text).len(), 1);
    }
}
