//! Size claims: no production file over [`MAX_FILE_LINES`] lines, no production function over
//! [`MAX_FN_LINES`] lines.

use syn::visit::{self, Visit};

use crate::{Error, Rule, SourceFile, Violation, is_test_code, item_attrs, parse};

/// The most lines a production file may have.
pub const MAX_FILE_LINES: usize = 450;
/// The most lines a production function may have, from its `fn` line to its closing brace.
pub const MAX_FN_LINES: usize = 100;

/// The violation of `file` is over [`MAX_FILE_LINES`] lines (the caller decides it is production).
pub fn file_too_long(file: &SourceFile) -> Option<Violation> {
    let lines = file.text.lines().count();
    (lines > MAX_FILE_LINES).then(|| Violation {
        rule: Rule::FileSize,
        file: file.path.clone(),
        line: MAX_FILE_LINES + 1,
        detail: format!(
            "the file has {lines} lines (limit {MAX_FILE_LINES}): split it into modules"
        ),
    })
}

/// Every function or method of `file` over [`MAX_FN_LINES`] lines, nested ones included, except
/// in `#[cfg(test)]` items and `#[test]` functions. Lines count from the `fn` keyword (attributes
/// and docs excluded) to the closing brace.
pub fn long_functions(file: &SourceFile) -> Result<Vec<Violation>, Error> {
    let mut lengths = FnLengths {
        file: &file.path,
        found: Vec::new(),
    };
    lengths.visit_file(&parse(file)?);
    Ok(lengths.found)
}

/// Visitor collecting the over-long functions of one file.
struct FnLengths<'a> {
    file: &'a str,
    found: Vec<Violation>,
}

impl FnLengths<'_> {
    /// Records `sig` + `block` when it is over the limit.
    fn measure(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        let lines = end + 1 - start;
        if lines > MAX_FN_LINES {
            self.found.push(Violation {
                rule: Rule::FunctionSize,
                file: self.file.to_owned(),
                line: start,
                detail: format!(
                    "fn `{}` has {lines} lines (limit {MAX_FN_LINES}): split it into named phases",
                    sig.ident
                ),
            });
        }
    }
}

impl<'ast> Visit<'ast> for FnLengths<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_code(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(&f.sig, &f.block);
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_code(&f.attrs) {
            self.measure(&f.sig, &f.block);
            visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.measure(&f.sig, block);
        }
        visit::visit_trait_item_fn(self, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: String) -> SourceFile {
        SourceFile {
            path: "crates/x/src/a.rs".into(),
            text,
        }
    }

    /// A function `name` of `lines` lines in total.
    fn function(name: &str, lines: usize) -> String {
        format!(
            "fn {name}() {{\n{}}}\n",
            "    let _ = 1;\n".repeat(lines - 2)
        )
    }

    #[test]
    fn a_451_line_file_is_reported_and_450_is_not() {
        assert_eq!(file_too_long(&file("\n".repeat(450))), None);
        let v = file_too_long(&file("x\n".repeat(451))).unwrap().to_string();
        assert!(v.starts_with("crates/x/src/a.rs:451: no production file over 450 lines"));
        assert!(
            v.contains("451 lines") && v.contains("\"Where things live\""),
            "{v}"
        );
    }

    #[test]
    fn a_101_line_fn_is_reported_from_its_fn_line() {
        let text = format!(
            "/// doc\n#[inline]\n{}{}",
            function("ok", 100),
            function("long", 101)
        );
        let found = long_functions(&file(text)).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        let v = found[0].to_string();
        assert!(v.starts_with("crates/x/src/a.rs:103: no production function over 100 lines"));
        assert!(
            v.contains("`long` has 101 lines") && v.contains("Where things live"),
            "{v}"
        );
    }

    #[test]
    fn methods_and_nested_fns_count_but_test_code_does_not() {
        let long = function("inner", 101);
        let text = format!(
            "impl A {{\n    fn outer() {{\n{long}}}\n}}\n\
             #[cfg(test)]\nmod tests {{\n{long}}}\n#[test]\n{long}"
        );
        let found = long_functions(&file(text)).unwrap();
        let names: Vec<&str> = found.iter().map(|v| v.detail.as_str()).collect();
        assert_eq!(found.len(), 2, "{names:?}");
        assert!(names[0].contains("`outer` has 103 lines"), "{names:?}");
        assert!(names[1].contains("`inner` has 101 lines"), "{names:?}");
    }
}
