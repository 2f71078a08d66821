//! ARCHITECTURE.md's structural claims as checks, so they cannot drift unnoticed.
//!
//! Each check is a pure function over file text ([`SourceFile`]) returning the [`Violation`]s it
//! finds; `tests/it` runs them over the real tree in `make test`. The claims (ARCHITECTURE.md,
//! "Where things live"):
//! - no production file over [`MAX_FILE_LINES`] lines ([`file_too_long`]);
//! - no production function over [`MAX_FN_LINES`] lines ([`long_functions`]);
//! - no import cycle between `lakestream-core`'s top-level modules, test code
//!   included ([`import_cycles`]);
//! - every `lakestream-core` folder in the module map ([`missing_from_map`]);
//! - no raw `.table()` / `.table_mut()` outside `table/` and `commit/` ([`raw_table_calls`]).
//!
//! Production code is what is under `crates/*/src`, less test modules: files named `tests.rs` or
//! `*_tests.rs`, files under a `tests/` folder, `#[cfg(test)]` items and `#[test]` functions.

mod cycles;
mod map;
mod size;
mod table_calls;
mod tree;

pub use cycles::import_cycles;
pub use map::missing_from_map;
pub use size::{MAX_FILE_LINES, MAX_FN_LINES, file_too_long, long_functions};
pub use table_calls::{TABLE_LAYER, raw_table_calls};
pub use tree::{crate_dirs, folders, is_test_path, rust_files};

use std::fmt;
use std::path::PathBuf;

/// One Rust file: its path relative to the workspace root (`/`-separated) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path relative to the workspace root, e.g. `crates/lakestream-core/src/table/mod.rs`.
    pub path: String,
    /// The file's contents.
    pub text: String,
}

/// The structural claim a [`Violation`] breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A production file over [`MAX_FILE_LINES`] lines.
    FileSize,
    /// A production function over [`MAX_FN_LINES`] lines.
    FunctionSize,
    /// Two or more `lakestream-core` top-level modules importing each other.
    ImportCycle,
    /// A `lakestream-core` folder missing from ARCHITECTURE.md's module map.
    ModuleMap,
    /// A raw `DeltaTable` accessor called outside the table layer.
    RawTable,
}

impl Rule {
    /// The claim, as ARCHITECTURE.md states it.
    pub fn claim(self) -> &'static str {
        match self {
            Rule::FileSize => "no production file over 450 lines",
            Rule::FunctionSize => "no production function over 100 lines",
            Rule::ImportCycle => "no import cycle between lakestream-core's top-level modules",
            Rule::ModuleMap => "every lakestream-core folder is in the module map",
            Rule::RawTable => "no raw .table()/.table_mut() outside core's table/ and commit/",
        }
    }

    /// The ARCHITECTURE.md section that states the claim (and the layout to follow).
    pub fn section(self) -> &'static str {
        "Where things live"
    }
}

/// One place where the tree breaks a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The claim broken.
    pub rule: Rule,
    /// The file, relative to the workspace root.
    pub file: String,
    /// The 1-based line.
    pub line: usize,
    /// What is wrong there and what to do.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {} (read ARCHITECTURE.md, \"{}\")",
            self.file,
            self.line,
            self.rule.claim(),
            self.detail,
            self.rule.section()
        )
    }
}

/// Why a check could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or folder of the tree could not be read.
    #[error("{path}: cannot read it ({source}); run the checks from a full checkout")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A Rust file did not parse.
    #[error("{file}:{line}: not valid Rust ({message}); fix the syntax and rerun")]
    Parse {
        /// The file.
        file: String,
        /// The line of the parse error.
        line: usize,
        /// The parser's message.
        message: String,
    },
}

/// Parses `file` as a Rust source file.
fn parse(file: &SourceFile) -> Result<syn::File, Error> {
    syn::parse_file(&file.text).map_err(|e| Error::Parse {
        file: file.path.clone(),
        line: e.span().start().line,
        message: e.to_string(),
    })
}

/// Whether `attrs` mark test-only code: `#[cfg(test)]` (also inside `all(..)`) or a `#[test]`-like
/// attribute (`#[test]`, `#[tokio::test]`).
fn is_test_code(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        match &attr.meta {
            syn::Meta::List(list) if path.is_ident("cfg") => mentions_test(list.tokens.clone()),
            _ => false,
        }
    })
}

/// Whether a `cfg(..)` predicate names `test` outside a `not(..)`.
fn mentions_test(tokens: proc_macro2::TokenStream) -> bool {
    let mut negated = false;
    for token in tokens {
        match token {
            proc_macro2::TokenTree::Ident(ident) if ident == "test" => return true,
            proc_macro2::TokenTree::Ident(ident) => negated = ident == "not",
            proc_macro2::TokenTree::Group(group) if !negated => {
                if mentions_test(group.stream()) {
                    return true;
                }
            }
            _ => negated = false,
        }
    }
    false
}

/// The attributes of an item, for the kinds that can be test-only.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_violation_names_file_line_rule_and_section() {
        let v = Violation {
            rule: Rule::FileSize,
            file: "crates/x/src/a.rs".into(),
            line: 451,
            detail: "451 lines".into(),
        };
        assert_eq!(
            v.to_string(),
            "crates/x/src/a.rs:451: no production file over 450 lines: 451 lines \
             (read ARCHITECTURE.md, \"Where things live\")"
        );
    }

    #[test]
    fn test_attributes_are_recognised() {
        let text = "#[cfg(test)] mod a {}\n#[cfg(all(test, feature = \"x\"))] mod b {}\n\
                    #[cfg(not(test))] mod c {}\n#[tokio::test] async fn d() {}\n#[inline] fn e() {}";
        let file = syn::parse_file(text).unwrap();
        let test: Vec<bool> = file
            .items
            .iter()
            .map(|i| is_test_code(item_attrs(i)))
            .collect();
        assert_eq!(test, [true, true, false, true, false]);
    }
}
