//! Listing what a test lake holds on disk, for "a dry run writes nothing" and "nothing escaped
//! the lake" assertions.

use std::path::{Path, PathBuf};

/// Every file below `dir` (recursively), as full paths, sorted; empty when `dir` is missing.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
