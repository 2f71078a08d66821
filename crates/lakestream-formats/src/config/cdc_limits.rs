//! The `[cdc_limits]` section: the bounds that keep one hostile CDC landing object (a DMS or
//! plain-file delivery any writer of the landing bucket can put there) from costing more than a
//! bounded amount of memory, stack or time. An object outside a bound is refused before it is
//! decoded: one dead letter for that object, never the rest of its SQS batch (ARCHITECTURE.md
//! "Threat model"). The defaults fit the files DMS, Spark, pandas and pyarrow write.

use crate::error::{Error, Result};
use serde::Deserialize;

/// Bounds on CDC landing objects (`[cdc_limits]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CdcLimits {
    /// An object larger than this (its size, before reading) is refused. Text is streamed and
    /// Parquet read by ranges, so this bounds time, not memory.
    #[serde(default = "default_max_object_mib")]
    pub max_object_mib: u64,
    /// A CSV record or JSON line longer than this is dead-lettered alone (its first
    /// `max_line_kib` KiB kept) without buffering the rest of it.
    #[serde(default = "default_max_line_kib")]
    pub max_line_kib: u64,
    /// A Parquet footer (the file's metadata) longer than this is refused unread.
    #[serde(default = "default_max_footer_mib")]
    pub max_footer_mib: u64,
    /// A Parquet schema nested deeper than this (a struct in a list in a struct ... counts each
    /// level) is refused.
    #[serde(default = "default_max_nesting")]
    pub max_nesting: u32,
    /// A Parquet file with more leaf columns than this (each field of a struct counts) is refused.
    #[serde(default = "default_max_columns")]
    pub max_columns: u64,
    /// A Parquet file with more row groups than this is refused.
    #[serde(default = "default_max_row_groups")]
    pub max_row_groups: u64,
    /// A Parquet row group whose columns declare more than this, decompressed, is refused
    /// (one row group's pages are decoded together).
    #[serde(default = "default_max_row_group_mib")]
    pub max_row_group_mib: u64,
    /// A Parquet page that declares more than this, decompressed, is refused when its column
    /// chunk is fetched (before it is decompressed), as is a column chunk whose pages add up to
    /// more than its footer declared.
    #[serde(default = "default_max_page_mib")]
    pub max_page_mib: u64,
    /// What decoding a Parquet object may hold at once, decompressed: a row group whose
    /// columns' largest pages add up to more is refused (one page per column is decoded at a
    /// time), and rows are read in batches of about a quarter of it (from the row group's
    /// declared size per row; dictionary-encoded text expanded that much at a time).
    #[serde(default = "default_max_decoded_mib")]
    pub max_decoded_mib: u64,
    /// Columns a CDC bronze table may have (row columns, not counting Lakestream's own): a
    /// record or row that would take its table past this is dead-lettered, and the table stays
    /// as wide as it was. Applies to Debezium records, JSON lines and header-less CSV alike.
    #[serde(default = "default_max_table_columns")]
    pub max_table_columns: u64,
    /// Columns one record or row may add to its table at once.
    #[serde(default = "default_max_new_columns")]
    pub max_new_columns: u64,
}

fn default_max_object_mib() -> u64 {
    2048
}
fn default_max_line_kib() -> u64 {
    1024
}
fn default_max_footer_mib() -> u64 {
    16
}
fn default_max_nesting() -> u32 {
    32
}
fn default_max_columns() -> u64 {
    4096
}
fn default_max_row_groups() -> u64 {
    10_000
}
fn default_max_row_group_mib() -> u64 {
    1024
}
fn default_max_page_mib() -> u64 {
    64
}
fn default_max_decoded_mib() -> u64 {
    256
}
fn default_max_table_columns() -> u64 {
    1000
}
fn default_max_new_columns() -> u64 {
    100
}

impl Default for CdcLimits {
    fn default() -> Self {
        Self {
            max_object_mib: default_max_object_mib(),
            max_line_kib: default_max_line_kib(),
            max_footer_mib: default_max_footer_mib(),
            max_nesting: default_max_nesting(),
            max_columns: default_max_columns(),
            max_row_groups: default_max_row_groups(),
            max_row_group_mib: default_max_row_group_mib(),
            max_page_mib: default_max_page_mib(),
            max_decoded_mib: default_max_decoded_mib(),
            max_table_columns: default_max_table_columns(),
            max_new_columns: default_max_new_columns(),
        }
    }
}

impl CdcLimits {
    /// Every bound is at least 1.
    pub(crate) fn validate(&self) -> Result<()> {
        for (key, v) in [
            ("max_object_mib", self.max_object_mib),
            ("max_line_kib", self.max_line_kib),
            ("max_footer_mib", self.max_footer_mib),
            ("max_nesting", u64::from(self.max_nesting)),
            ("max_columns", self.max_columns),
            ("max_row_groups", self.max_row_groups),
            ("max_row_group_mib", self.max_row_group_mib),
            ("max_page_mib", self.max_page_mib),
            ("max_decoded_mib", self.max_decoded_mib),
            ("max_table_columns", self.max_table_columns),
            ("max_new_columns", self.max_new_columns),
        ] {
            if v == 0 {
                return Err(Error::Config(format!("`cdc_limits.{key}` must be >= 1")));
            }
        }
        Ok(())
    }

    /// `max_object_mib` in bytes.
    pub fn max_object_bytes(&self) -> u64 {
        self.max_object_mib.saturating_mul(1 << 20)
    }

    /// `max_line_kib` in bytes.
    pub fn max_line_bytes(&self) -> usize {
        usize::try_from(self.max_line_kib.saturating_mul(1 << 10)).unwrap_or(usize::MAX)
    }

    /// `max_footer_mib` in bytes.
    pub fn max_footer_bytes(&self) -> u64 {
        self.max_footer_mib.saturating_mul(1 << 20)
    }

    /// `max_row_group_mib` in bytes.
    pub fn max_row_group_bytes(&self) -> u64 {
        self.max_row_group_mib.saturating_mul(1 << 20)
    }

    /// `max_page_mib` in bytes.
    pub fn max_page_bytes(&self) -> u64 {
        self.max_page_mib.saturating_mul(1 << 20)
    }

    /// (`max_table_columns`, `max_new_columns`) as counts.
    pub fn width(&self) -> (usize, usize) {
        let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        (n(self.max_table_columns), n(self.max_new_columns))
    }

    /// `max_decoded_mib` in bytes.
    pub fn max_decoded_bytes(&self) -> u64 {
        self.max_decoded_mib.saturating_mul(1 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_bounds_are_refused_and_the_key_is_named() {
        let mut l = CdcLimits::default();
        assert!(l.validate().is_ok());
        l.max_nesting = 0;
        let e = l.validate().unwrap_err().to_string();
        assert!(e.contains("cdc_limits.max_nesting"), "{e}");
    }
}
