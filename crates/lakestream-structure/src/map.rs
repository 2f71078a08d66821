//! Every `lakestream-core` folder in ARCHITECTURE.md's module map.
//!
//! The map is the fenced block under "## Where things live"; `lakestream-core`'s part of it runs
//! from the `lakestream-core/src/` line to the next line that is not indented. A top-level
//! folder `a` must be named `a/` in the name column of one of that part's entries (the text before
//! the first double space); a folder `a/b` one level below must be named `b/` anywhere in that
//! part. Deeper folders and `tests/` folders are not checked.

use crate::{Rule, Violation};

/// The heading of the section holding the module map.
const SECTION: &str = "## Where things live";
/// The line opening `lakestream-core`'s part of the map.
const CORE: &str = "lakestream-core/src/";

/// The `folders` of `crates/lakestream-core/src` (relative to it: `refine`, `refine/upsert`) that
/// `architecture` (ARCHITECTURE.md's text) does not name in its module map.
pub fn missing_from_map(folders: &[String], architecture: &str) -> Vec<Violation> {
    let Some((line, part)) = core_part(architecture) else {
        return vec![Violation {
            rule: Rule::ModuleMap,
            file: "ARCHITECTURE.md".into(),
            line: 1,
            detail: format!(
                "no `{CORE}` part in a fenced block under \"{SECTION}\": restore the module map"
            ),
        }];
    };
    let indent = part.iter().map(|l| indentation(l)).min().unwrap_or(0);
    let names: Vec<&str> = part
        .iter()
        .filter(|l| indentation(l) == indent)
        .map(|l| l.trim_start().split("  ").next().unwrap_or(""))
        .collect();
    let mut missing = Vec::new();
    for folder in folders {
        let parts: Vec<&str> = folder.split('/').collect();
        let named = match parts[..] {
            [top] => names.iter().any(|n| names_folder(n, top)),
            [_, sub] if sub != "tests" => part.iter().any(|l| names_folder(l, sub)),
            _ => true,
        };
        if !named && !parts.contains(&"tests") {
            let name = parts.last().copied().unwrap_or_default();
            missing.push(Violation {
                rule: Rule::ModuleMap,
                file: "ARCHITECTURE.md".into(),
                line,
                detail: format!(
                    "folder `crates/lakestream-core/src/{folder}/` is not in the module map: \
                     add `{name}/` with what it holds"
                ),
            });
        }
    }
    missing
}

/// The 1-based line of the `lakestream-core/src/` line and the lines of its part of the map.
fn core_part(architecture: &str) -> Option<(usize, Vec<&str>)> {
    let lines: Vec<&str> = architecture.lines().collect();
    let section = lines.iter().position(|l| l.trim_end() == SECTION)?;
    let open = section + lines[section..].iter().position(|l| l.starts_with("```"))?;
    let close = open
        + 1
        + lines[open + 1..]
            .iter()
            .position(|l| l.starts_with("```"))?;
    let core = open
        + 1
        + lines[open + 1..close]
            .iter()
            .position(|l| l.starts_with(CORE))?;
    let part = lines[core + 1..close]
        .iter()
        .take_while(|l| l.starts_with(' '))
        .copied()
        .collect();
    Some((core + 1, part))
}

/// The number of leading spaces of `line`.
fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Whether `text` names the folder `name` as `name/`, not as the tail of a longer name.
fn names_folder(text: &str, name: &str) -> bool {
    let needle = format!("{name}/");
    text.match_indices(&needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARCHITECTURE: &str = "# Architecture\n\n## Where things live\n\nIntro.\n\n```\n\
        lakestream-formats/src/     parsers\n  refine/                   formats' refine\n\
        lakestream-core/src/\n  storage.rs put_probe/     Lake\n\
        \x20 refine/                   mod, join/{mod,side}, upsert/{mod},\n\
        \x20                           cdc/ (see the cdc folder)\n\
        lakestream-lambda/src/      glue\n```\n";

    fn missing(folders: &[&str]) -> Vec<String> {
        let folders: Vec<String> = folders.iter().map(|f| f.to_string()).collect();
        let found = missing_from_map(&folders, ARCHITECTURE);
        found.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn named_folders_pass() {
        let ok = [
            "put_probe",
            "refine",
            "refine/join",
            "refine/upsert",
            "refine/cdc/x",
        ];
        assert_eq!(missing(&ok), Vec::<String>::new());
        assert_eq!(
            missing(&["refine/cdc", "cdc/tests", "refine/tests"]).len(),
            0
        );
    }

    #[test]
    fn a_folder_missing_from_the_map_is_reported() {
        assert_eq!(
            missing(&["probe"]),
            [
                "ARCHITECTURE.md:10: every lakestream-core folder is in the module map: folder \
              `crates/lakestream-core/src/probe/` is not in the module map: add `probe/` with \
              what it holds (read ARCHITECTURE.md, \"Where things live\")"
            ]
        );
        // `cdc/` in a description line, or in another crate's part, is not a top-level entry.
        assert_eq!(missing(&["cdc", "refine/aggregate"]).len(), 2);
    }

    #[test]
    fn a_missing_map_is_reported() {
        let found = missing_from_map(&["refine".into()], "# Architecture\n");
        assert!(
            found[0]
                .to_string()
                .starts_with("ARCHITECTURE.md:1: every lakestream-core")
        );
    }
}
