//! ARCHITECTURE.md's structural claims checked on the real tree (one test per claim). A failure
//! lists every violation as `file:line: claim: what to do (the ARCHITECTURE section to read)`.

use std::path::PathBuf;

use lakestream_structure::{
    Error, SourceFile, Violation, crate_dirs, file_too_long, folders, import_cycles, is_test_path,
    long_functions, missing_from_map, raw_table_calls, rust_files,
};

/// `lakestream-core`'s sources, relative to the workspace root.
const CORE_SRC: &str = "crates/lakestream-core/src";

/// Files allowed a raw `.table()` / `.table_mut()` outside the table layer (keep it empty).
const RAW_TABLE_ALLOWED: &[&str] = &[];

/// The workspace root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Rust files of every crate's `subs` folders (`src`, `tests`, ...).
fn crate_files(subs: &[&str]) -> Result<Vec<SourceFile>, Error> {
    let root = root();
    let mut files = Vec::new();
    for dir in crate_dirs(&root)? {
        for sub in subs {
            files.extend(rust_files(&root, &format!("{dir}/{sub}"))?);
        }
    }
    Ok(files)
}

/// Production files: under `crates/*/src`, not a test module.
fn production_files() -> Result<Vec<SourceFile>, Error> {
    let files = crate_files(&["src"])?;
    Ok(files
        .into_iter()
        .filter(|f| !is_test_path(&f.path))
        .collect())
}

/// Fails listing every violation.
fn assert_none(what: &str, violations: Vec<Violation>) {
    let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(
        list.is_empty(),
        "{} violation(s) of {what}:\n{}",
        list.len(),
        list.join("\n")
    );
}

#[test]
fn no_production_file_over_450_lines() -> Result<(), Error> {
    let found = production_files()?
        .iter()
        .filter_map(file_too_long)
        .collect();
    assert_none("the file size limit", found);
    Ok(())
}

#[test]
fn no_production_function_over_100_lines() -> Result<(), Error> {
    let mut found = Vec::new();
    for file in production_files()? {
        found.extend(long_functions(&file)?);
    }
    assert_none("the function size limit", found);
    Ok(())
}

#[test]
fn no_import_cycle_between_core_modules() -> Result<(), Error> {
    let files = rust_files(&root(), CORE_SRC)?;
    assert!(files.len() > 10, "no core sources found under {CORE_SRC}");
    assert_none("the layering", import_cycles(&files, CORE_SRC)?);
    Ok(())
}

#[test]
fn every_core_folder_is_in_the_module_map() -> Result<(), Box<dyn std::error::Error>> {
    let root = root();
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md"))?;
    let folders = folders(&root, CORE_SRC)?;
    assert_none("the module map", missing_from_map(&folders, &architecture));
    Ok(())
}

#[test]
fn no_raw_table_access_outside_the_table_layer() -> Result<(), Error> {
    let mut found = Vec::new();
    for file in crate_files(&["src", "tests", "benches"])? {
        if !RAW_TABLE_ALLOWED.contains(&file.path.as_str()) {
            found.extend(raw_table_calls(&file)?);
        }
    }
    assert_none("the table layer", found);
    Ok(())
}
