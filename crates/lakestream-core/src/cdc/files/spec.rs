//! What decoding one object needs from its family ([`FileSpec`]): the file's kind, the declared
//! columns, the CSV dialect, the `[cdc_limits]` bounds and the bronze table's columns, with the
//! checks a header or schema meets before any row is read (width, case-only twins).

use super::layout::FileKind;
use crate::error::{Error, Result};
use lakestream_formats::config::{CdcColumn, CdcFamily, CdcLimits, CdcSource, FamilyTable};
use std::collections::HashSet;
use std::sync::Arc;

/// What decoding one object needs from its family.
pub struct FileSpec {
    /// The file's kind.
    pub kind: FileKind,
    /// The family's source.
    pub source: CdcSource,
    /// Declared columns of the table (may be empty).
    pub declared: Vec<CdcColumn>,
    /// First line is a header.
    pub header: bool,
    /// CSV delimiter.
    pub delimiter: u8,
    /// The commit-time column.
    pub timestamp_column: Option<String>,
    /// `s3://bucket/key`, for messages.
    pub uri: String,
    /// The config key naming the table's declared columns, for messages.
    pub columns_key: String,
    /// Bounds on the object (`[cdc_limits]`).
    pub limits: CdcLimits,
    /// The bronze table's row columns, lower-cased (empty for a new table): the width bounds
    /// count the table's columns, not only the chunk's.
    pub bronze: Arc<HashSet<String>>,
}

impl FileSpec {
    /// The spec of `t`'s file `kind` in `family`.
    pub fn of(
        family: &CdcFamily,
        t: &FamilyTable,
        kind: FileKind,
        uri: String,
        limits: &CdcLimits,
    ) -> Result<Self> {
        Ok(Self {
            kind,
            source: family.source.kind(),
            declared: family.declared_columns(t)?,
            header: family.has_csv_header(),
            delimiter: family.csv_delimiter(),
            timestamp_column: family.timestamp_column().map(str::to_string),
            uri,
            columns_key: format!("cdc.{}.columns.\"{}\"", family.family, t.qualified()),
            limits: limits.clone(),
            bronze: Arc::default(),
        })
    }

    /// `Some(why)` when a header or schema naming `names` would take the bronze table past
    /// `max_table_columns`, or add more than `max_new_columns` to an existing one.
    pub(super) fn schema_too_wide<'a>(
        &self,
        names: impl Iterator<Item = &'a str>,
    ) -> Option<String> {
        let (max_table, max_new) = self.limits.width();
        // A DMS file's `Op` is no column of the table.
        let dms = self.source == CdcSource::Dms;
        let counted = |n: &&str| !(dms && *n == "Op");
        let new = names
            .filter(counted)
            .filter(|n| !self.bronze.contains(&n.to_lowercase()))
            .count();
        let width = self.bronze.len() + new;
        (width > max_table || (!self.bronze.is_empty() && new > max_new)).then(|| {
            format!(
                "it adds {new} columns to a table of {} (`[cdc_limits]`: at most {max_new} new \
                 at once to an existing table, {max_table} in all); raise `max_new_columns` / \
                 `max_table_columns` if the source table is that wide",
                self.bronze.len()
            )
        })
    }

    pub(super) fn refuse(&self, message: String) -> Error {
        Error::Fetch {
            object: self.uri.clone(),
            message,
            retryable: false,
        }
    }
}

/// `Some(why)` when two of `names` differ only in case (Delta column names are
/// case-insensitive: one would overwrite or shift the other).
pub(super) fn case_twins<'a>(names: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut seen: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    for n in names {
        if let Some(first) = seen.insert(n.to_lowercase(), n) {
            return Some(format!(
                "has columns `{first}` and `{n}`, which differ only in case: Delta column names \
                 are case-insensitive; rename one at the source"
            ));
        }
    }
    None
}
