//! Reading the tree: the workspace's crates, their Rust files and folders, which are test code.

use std::fs;
use std::path::Path;

use crate::{Error, SourceFile};

/// The crate folders under `root/crates`, as `crates/<name>`, sorted.
pub fn crate_dirs(root: &Path) -> Result<Vec<String>, Error> {
    let mut dirs: Vec<String> = entries(root, "crates")?
        .into_iter()
        .filter(|(_, is_dir)| *is_dir)
        .map(|(path, _)| path)
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Every `.rs` file under `root/dir` (recursively), sorted by path; none when `dir` is absent.
pub fn rust_files(root: &Path, dir: &str) -> Result<Vec<SourceFile>, Error> {
    let mut files = Vec::new();
    if !root.join(dir).is_dir() {
        return Ok(files);
    }
    for (path, is_dir) in entries(root, dir)? {
        if is_dir {
            files.extend(rust_files(root, &path)?);
        } else if path.ends_with(".rs") {
            let text = fs::read_to_string(root.join(&path)).map_err(|source| Error::Io {
                path: root.join(&path),
                source,
            })?;
            files.push(SourceFile { path, text });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Every folder under `root/dir` (recursively), relative to `dir` (`refine`, `refine/upsert`).
pub fn folders(root: &Path, dir: &str) -> Result<Vec<String>, Error> {
    let mut found = Vec::new();
    for (path, is_dir) in entries(root, dir)? {
        if is_dir {
            let relative = path[dir.len() + 1..].to_owned();
            found.extend(
                folders(root, &path)?
                    .into_iter()
                    .map(|sub| format!("{relative}/{sub}")),
            );
            found.push(relative);
        }
    }
    found.sort();
    Ok(found)
}

/// Whether a file under a `src` folder is a test module by its path: `tests.rs`, `*_tests.rs`, or
/// anything under a `tests/` folder.
pub fn is_test_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "tests.rs" || name.ends_with("_tests.rs") || path.split('/').any(|c| c == "tests")
}

/// The entries of `root/dir` as (`dir/name`, is a folder).
fn entries(root: &Path, dir: &str) -> Result<Vec<(String, bool)>, Error> {
    let io = |source| Error::Io {
        path: root.join(dir),
        source,
    };
    let mut found = Vec::new();
    for entry in fs::read_dir(root.join(dir)).map_err(io)? {
        let entry = entry.map_err(io)?;
        let is_dir = entry.file_type().map_err(io)?.is_dir();
        found.push((
            format!("{dir}/{}", entry.file_name().to_string_lossy()),
            is_dir,
        ));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_modules_are_recognised_by_path() {
        assert!(is_test_path("crates/a/src/x/tests.rs"));
        assert!(is_test_path("crates/a/src/x/plan_tests.rs"));
        assert!(is_test_path("crates/a/src/x/tests/cases.rs"));
        assert!(!is_test_path("crates/a/src/x/testsuite.rs"));
    }
}
