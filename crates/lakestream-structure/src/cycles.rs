//! No import cycle between a crate's top-level modules.
//!
//! Module `a` depends on module `b` when a file under `a` (`src/a.rs`, `src/a/**`, its tests
//! included: they compile into `a`) names a path into `b`: `crate::b::..`, or `super::..` /
//! `self::..` resolving into `b`, in a `use`, an expression, a type, or a macro's tokens
//! (`crate::b` only). Paths through the crate root's re-exports (`crate::Error`) name no module,
//! and doc links are no imports: neither is an edge.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

use crate::{Error, Rule, SourceFile, Violation, parse};

/// The first place an edge `from -> to` was seen: (file, line).
type Witness = (String, usize);
/// `from -> to -> witness`, over top-level module names.
type Graph = BTreeMap<String, BTreeMap<String, Witness>>;

/// Every shortest import cycle between the top-level modules of the crate whose sources are
/// `files` under the folder `src` (e.g. `crates/lakestream-core/src`), one violation per cycle,
/// reported at the witness of its first edge.
pub fn import_cycles(files: &[SourceFile], src: &str) -> Result<Vec<Violation>, Error> {
    let modules: Vec<(Vec<String>, &SourceFile)> = files
        .iter()
        .filter_map(|f| Some((module_path(f.path.strip_prefix(src)?)?, f)))
        .collect();
    let tops: BTreeSet<&str> = modules.iter().map(|(m, _)| m[0].as_str()).collect();
    let mut graph = Graph::new();
    for (module, file) in &modules {
        let mut paths = Paths {
            module: module.clone(),
            found: Vec::new(),
        };
        paths.visit_file(&parse(file)?);
        for (target, line) in paths.found {
            if target != module[0] && tops.contains(target.as_str()) {
                let edges = graph.entry(module[0].clone()).or_default();
                let witness = edges.entry(target).or_insert((file.path.clone(), line));
                if witness.0 == file.path && line < witness.1 {
                    witness.1 = line;
                }
            }
        }
    }
    Ok(cycles(&graph))
}

/// The module path of a file relative to `src` (`/table/mod.rs` -> `[table]`); `None` for the
/// crate root and non-Rust files.
fn module_path(relative: &str) -> Option<Vec<String>> {
    let mut parts: Vec<String> = relative
        .trim_start_matches('/')
        .strip_suffix(".rs")?
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    let root = parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main");
    (!parts.is_empty() && !root).then_some(parts)
}

/// One cycle per node that is on one: the shortest way back to it, deduplicated by rotation.
fn cycles(graph: &Graph) -> Vec<Violation> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for start in graph.keys() {
        let Some(mut cycle) = shortest_cycle(graph, start) else {
            continue;
        };
        let min = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap_or(0);
        cycle.rotate_left(min);
        if !seen.insert(cycle.clone()) {
            continue;
        }
        let edge = |i: usize| {
            let (from, to) = (&cycle[i], &cycle[(i + 1) % cycle.len()]);
            (from, to, &graph[from][to])
        };
        let chain: Vec<&str> = cycle
            .iter()
            .chain(&cycle[..1])
            .map(String::as_str)
            .collect();
        let witnesses: Vec<String> = (0..cycle.len())
            .map(edge)
            .map(|(from, to, (file, line))| format!("{from} -> {to} at {file}:{line}"))
            .collect();
        let (_, _, (file, line)) = edge(0);
        found.push(Violation {
            rule: Rule::ImportCycle,
            file: file.clone(),
            line: *line,
            detail: format!(
                "{} ({}): move the shared piece down into a module both can import",
                chain.join(" -> "),
                witnesses.join(", ")
            ),
        });
    }
    found
}

/// The shortest cycle through `start` (breadth-first), as its nodes from `start` on.
fn shortest_cycle(graph: &Graph, start: &String) -> Option<Vec<String>> {
    let mut parent: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                let mut cycle = vec![node.clone()];
                while let Some(&p) = parent.get(cycle.last()?) {
                    cycle.push(p.clone());
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !parent.contains_key(next) && next != start {
                parent.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}

/// Visitor collecting the top-level module each path of one file resolves to.
struct Paths {
    /// The module being visited (the file's, plus inline `mod`s).
    module: Vec<String>,
    /// (top-level module, line) of every resolved path.
    found: Vec<(String, usize)>,
}

impl Paths {
    /// Records the top-level module `segments` resolve to, if they start at `crate`/`super`/`self`.
    fn resolve(&mut self, segments: &[String], line: usize) {
        let supers = segments.iter().take_while(|s| *s == "super").count();
        let target = match segments.first().map(String::as_str) {
            Some("crate") => segments.get(1),
            Some("super") if supers <= self.module.len() => {
                let base = &self.module[..self.module.len() - supers];
                base.first().or(segments.get(supers))
            }
            Some("self") => self.module.first().or(segments.get(1)),
            _ => None,
        };
        if let Some(target) = target {
            self.found.push((target.clone(), line));
        }
    }

    /// Every path of a `use` tree, each from `prefix` on.
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        let line = |ident: &syn::Ident| ident.span().start().line;
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.resolve(
                &[&prefix[..], &[n.ident.to_string()]].concat(),
                line(&n.ident),
            ),
            syn::UseTree::Rename(r) => self.resolve(
                &[&prefix[..], &[r.ident.to_string()]].concat(),
                line(&r.ident),
            ),
            syn::UseTree::Glob(g) => self.resolve(prefix, g.star_token.span.start().line),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(t, prefix)),
        }
    }

    /// `crate :: name` sequences in a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, token) in tokens.iter().enumerate() {
            match (token, tokens.get(i + 3)) {
                (TokenTree::Ident(c), Some(TokenTree::Ident(name))) if c == "crate" => {
                    let colons = tokens[i + 1..i + 3]
                        .iter()
                        .all(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ':'));
                    if colons {
                        self.resolve(&["crate".into(), name.to_string()], c.span().start().line);
                    }
                }
                (TokenTree::Group(group), _) => self.tokens(group.stream()),
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.module.push(m.ident.to_string());
        visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&u.tree, &mut Vec::new());
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = path.segments.first() {
            self.resolve(&segments, first.ident.span().start().line);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: format!("crates/c/src/{path}"),
            text: text.into(),
        }
    }

    fn check(files: &[SourceFile]) -> Vec<String> {
        let found = import_cycles(files, "crates/c/src").unwrap();
        found.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_two_module_cycle_through_super_is_reported_with_a_witness_per_edge() {
        let files = [
            file("lib.rs", "mod a;\nmod b;\n"),
            file("a/mod.rs", "mod x;\n"),
            file("a/x.rs", "\nuse super::super::b::Thing;\n"),
            file("b.rs", "fn f() {\n    let _ = crate::a::g();\n}\n"),
        ];
        assert_eq!(
            check(&files),
            [
                "crates/c/src/a/x.rs:2: no import cycle between lakestream-core's top-level modules: \
              a -> b -> a (a -> b at crates/c/src/a/x.rs:2, b -> a at crates/c/src/b.rs:2): \
              move the shared piece down into a module both can import \
              (read ARCHITECTURE.md, \"Where things live\")"
            ]
        );
    }

    #[test]
    fn one_way_imports_and_root_reexports_are_not_cycles() {
        let files = [
            file("lib.rs", "pub use a::Error;\n"),
            file(
                "a.rs",
                "use crate::{b::{self, B}, Error};\nuse super::c::*;\n",
            ),
            file(
                "b.rs",
                "use self::inner::X;\nuse crate::Error;\n/// [`A`](crate::a::A)\npub struct S;\n",
            ),
            file("c.rs", "pub(super) fn f() {}\n"),
        ];
        assert_eq!(check(&files), Vec::<String>::new());
    }

    #[test]
    fn test_code_compiles_into_its_module_so_its_imports_count() {
        let files = [
            file("a.rs", "use crate::b::B;\n"),
            file("b/tests.rs", "use crate::a::A;\n"),
            file("c.rs", "use crate::a::A;\n"),
            file(
                "d.rs",
                "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::c::C;\n}\n",
            ),
            file("a/x.rs", "use crate::d::D;\n"),
        ];
        let found = check(&files);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].contains(
                "a -> b -> a (a -> b at crates/c/src/a.rs:1, b -> a at crates/c/src/b/tests.rs:1)"
            ),
            "{found:?}"
        );
        assert!(found[1].contains("a -> d -> c -> a (a -> d at crates/c/src/a/x.rs:1, d -> c at crates/c/src/d.rs:4, c -> a at crates/c/src/c.rs:1)"), "{found:?}");
    }

    #[test]
    fn a_cycle_hidden_in_a_macro_and_a_group_is_found() {
        let files = [
            file("a.rs", "use crate::{x, b::B};\n"),
            file("b.rs", "fn f() {\n    matches!(v, crate::a::A::X);\n}\n"),
        ];
        let found = check(&files);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains(
            "a -> b -> a (a -> b at crates/c/src/a.rs:1, b -> a at crates/c/src/b.rs:2)"
        ));
    }
}
