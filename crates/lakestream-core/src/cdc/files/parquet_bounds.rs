//! A Parquet object's metadata checked before parquet-rs decodes any of it (ARCHITECTURE.md
//! "Threat model"). parquet-rs trusts counts in the footer: a 44-byte file declaring two billion
//! row groups makes it reserve hundreds of gigabytes (the process aborts), and a schema nested
//! 200,000 levels deep overflows its recursive schema conversion. So the footer is walked here
//! first, without recursion deeper than the format's own structs and without allocating from a
//! declared count: every list and string must fit in the bytes that remain, the schema tree is
//! checked iteratively (nesting, leaf columns, a consistent shape), and the row groups' declared
//! sizes are bounded. When a column chunk is fetched, its page headers are checked the same way
//! before any page is decompressed: no page above the page bound, and no chunk whose pages add up
//! to more than its footer declared (a footer that lies to pass the row-group bound).
//!
//! Thrift compact protocol: <https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md>;
//! field numbers from `parquet.thrift` (FileMetaData, SchemaElement, RowGroup, ColumnChunk,
//! ColumnMetaData, PageHeader).

use super::parquet_thrift::{T_BINARY, T_I32, T_I64, T_LIST, T_STRUCT, Thrift};
use lakestream_formats::config::CdcLimits;

/// Why an object is refused (no value from the file is quoted).
pub type Refusal = String;
pub(super) type R<T> = std::result::Result<T, Refusal>;

/// The bounds, in bytes and counts.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    max_footer: u64,
    max_nesting: u64,
    max_columns: u64,
    max_row_groups: u64,
    max_row_group: u64,
    max_page: u64,
    max_decoded: u64,
}

impl From<&CdcLimits> for Bounds {
    fn from(l: &CdcLimits) -> Self {
        Self {
            max_footer: l.max_footer_bytes(),
            max_nesting: u64::from(l.max_nesting),
            max_columns: l.max_columns,
            max_row_groups: l.max_row_groups,
            max_row_group: l.max_row_group_bytes(),
            max_page: l.max_page_bytes(),
            max_decoded: l.max_decoded_bytes(),
        }
    }
}

/// One column chunk as the footer declares it: where its pages are and how large they are
/// decompressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkExtent {
    /// Its row group (0-based).
    pub row_group: usize,
    /// First byte (the dictionary page's offset, else the first data page's).
    pub start: u64,
    /// Compressed length.
    pub len: u64,
    /// Declared decompressed size of all its pages.
    pub uncompressed: u64,
}

/// What a checked footer declares.
#[derive(Debug, Default)]
pub struct Footer {
    /// Every column chunk of every row group.
    pub chunks: Vec<ChunkExtent>,
}

/// The footer's length from the last 8 bytes of an object of `size` bytes.
pub fn footer_len(tail: &[u8], size: u64, b: &Bounds) -> R<u64> {
    let Ok([l0, l1, l2, l3, m0, m1, m2, m3]) = <[u8; 8]>::try_from(tail) else {
        return Err("shorter than a Parquet file's 12 bytes of framing".into());
    };
    match &[m0, m1, m2, m3] {
        b"PAR1" => {}
        b"PARE" => return Err("an encrypted Parquet footer (PARE): not read".into()),
        _ => return Err("no Parquet magic (PAR1) at its end: not a Parquet file".into()),
    }
    let len = u64::from(u32::from_le_bytes([l0, l1, l2, l3]));
    if size < 12 || len > size - 12 {
        return Err(format!(
            "its footer length ({len} bytes) does not fit in the object ({size} bytes)"
        ));
    }
    if len > b.max_footer {
        return Err(format!(
            "its footer ({len} bytes) exceeds `cdc_limits.max_footer_mib` ({} bytes)",
            b.max_footer
        ));
    }
    Ok(len)
}

/// Walk a footer (the thrift `FileMetaData`, without the trailing length and magic).
pub fn check_footer(bytes: &[u8], b: &Bounds) -> R<Footer> {
    let mut t = Thrift::new(bytes);
    let mut children: Vec<i64> = Vec::new();
    let mut footer = Footer::default();
    let mut last = 0;
    let mut leaves = None;
    while let Some((id, ty)) = t.field(&mut last)? {
        Thrift::typed(id, ty, &[(1, T_I32), (2, T_LIST), (3, T_I64), (4, T_LIST)])?;
        match id {
            2 => {
                children = schema_elements(&mut t)?;
                leaves = Some(schema_shape(&children, b)?);
            }
            4 => {
                let Some(leaves) = leaves else {
                    return Err("its row groups come before its schema".into());
                };
                row_groups(&mut t, b, leaves, &mut footer)?;
            }
            _ => t.skip(ty, 1)?,
        }
    }
    if t.remaining() != 0 {
        return Err("bytes follow its metadata".into());
    }
    if leaves.is_none() {
        schema_shape(&children, b)?;
    }
    Ok(footer)
}

/// Each schema element's `num_children` (0 for a leaf).
fn schema_elements(t: &mut Thrift) -> R<Vec<i64>> {
    let n = t.struct_list()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut last = 0;
        let mut children = 0;
        while let Some((id, ty)) = t.field(&mut last)? {
            Thrift::typed(id, ty, &[(1, T_I32), (3, T_I32), (4, T_BINARY), (5, T_I32)])?;
            match id {
                5 => children = t.zigzag()?,
                _ => t.skip(ty, 2)?,
            }
        }
        out.push(children);
    }
    Ok(out)
}

/// The schema is a tree in depth-first order: within the nesting and column bounds, and every
/// element accounted for.
fn schema_shape(children: &[i64], b: &Bounds) -> R<u64> {
    let Some((&root, rest)) = children.split_first() else {
        return Err("its footer has no schema".into());
    };
    let mut open: Vec<i64> = vec![root.max(0)];
    let mut leaves = 0u64;
    for &c in rest {
        while open.last() == Some(&0) {
            open.pop();
        }
        let Some(parent) = open.last_mut() else {
            return Err("its schema lists more elements than its tree holds".into());
        };
        *parent -= 1;
        if c < 0 {
            return Err("its schema has a negative child count".into());
        } else if c > 0 {
            open.push(c);
            if open.len() as u64 - 1 > b.max_nesting {
                return Err(format!(
                    "its schema nests deeper than `cdc_limits.max_nesting` ({})",
                    b.max_nesting
                ));
            }
        } else {
            leaves += 1;
            if leaves > b.max_columns {
                return Err(format!(
                    "it has more than `cdc_limits.max_columns` ({}) leaf columns",
                    b.max_columns
                ));
            }
        }
    }
    if open.iter().any(|&c| c > 0) {
        return Err("its schema declares more children than it lists".into());
    }
    Ok(leaves)
}

/// The row groups: a bounded count, each within the row-group bound (decompressed and as
/// stored), every column chunk's extent recorded.
fn row_groups(t: &mut Thrift, b: &Bounds, leaves: u64, footer: &mut Footer) -> R<()> {
    let n = t.struct_list()?;
    if n as u64 > b.max_row_groups {
        return Err(format!(
            "it has {n} row groups, more than `cdc_limits.max_row_groups` ({})",
            b.max_row_groups
        ));
    }
    for row_group in 0..n {
        let (mut raw, mut stored) = (0u64, 0u64);
        let mut last = 0;
        while let Some((id, ty)) = t.field(&mut last)? {
            Thrift::typed(id, ty, &[(1, T_LIST), (2, T_I64), (3, T_I64), (6, T_I64)])?;
            if id != 1 {
                t.skip(ty, 2)?;
                continue;
            }
            let columns = t.struct_list()?;
            if columns as u64 != leaves {
                return Err(format!(
                    "a row group has {columns} column chunks, its schema {leaves} leaf columns"
                ));
            }
            for _ in 0..columns {
                let c = column_chunk(t, row_group)?;
                raw = raw.saturating_add(c.uncompressed);
                stored = stored.saturating_add(c.len);
                footer.chunks.push(c);
            }
        }
        if raw.max(stored) > b.max_row_group {
            return Err(format!(
                "a row group declares {} bytes, more than `cdc_limits.max_row_group_mib` ({} bytes)",
                raw.max(stored),
                b.max_row_group
            ));
        }
    }
    Ok(())
}

/// One `ColumnChunk`: its `ColumnMetaData`'s sizes and offsets.
fn column_chunk(t: &mut Thrift, row_group: usize) -> R<ChunkExtent> {
    let (mut raw, mut stored, mut data, mut dict) = (0i64, 0i64, 0i64, None);
    let mut last = 0;
    while let Some((id, ty)) = t.field(&mut last)? {
        Thrift::typed(id, ty, &[(2, T_I64), (3, T_STRUCT)])?;
        if id != 3 {
            t.skip(ty, 3)?;
            continue;
        }
        let mut last = 0;
        while let Some((id, ty)) = t.field(&mut last)? {
            let known = [
                (1, T_I32),
                (5, T_I64),
                (6, T_I64),
                (7, T_I64),
                (9, T_I64),
                (11, T_I64),
            ];
            Thrift::typed(id, ty, &known)?;
            match id {
                6 => raw = t.zigzag()?,
                7 => stored = t.zigzag()?,
                9 => data = t.zigzag()?,
                11 => dict = Some(t.zigzag()?),
                _ => t.skip(ty, 4)?,
            }
        }
    }
    if raw < 0 || stored < 0 || data < 0 || dict.is_some_and(|d| d < 0) {
        return Err("a column chunk declares a negative size or offset".into());
    }
    Ok(ChunkExtent {
        row_group,
        start: dict.unwrap_or(data) as u64,
        len: stored as u64,
        uncompressed: raw as u64,
    })
}

/// The page headers of one fetched column chunk: each page within the page bound, and all of
/// them within what the footer declared for the chunk. Returns its largest page (decompressed).
pub fn check_pages(chunk: &[u8], declared: u64, b: &Bounds) -> R<u64> {
    let mut t = Thrift::new(chunk);
    let (mut total, mut largest) = (0u64, 0u64);
    while t.remaining() > 0 {
        let (mut raw, mut stored, mut dict_values) = (-1i64, -1i64, 0i64);
        let mut last = 0;
        while let Some((id, ty)) = t.field(&mut last)? {
            let known = [
                (1, T_I32),
                (2, T_I32),
                (3, T_I32),
                (5, T_STRUCT),
                (7, T_STRUCT),
                (8, T_STRUCT),
            ];
            Thrift::typed(id, ty, &known)?;
            match id {
                2 => raw = t.zigzag()?,
                3 => stored = t.zigzag()?,
                7 => dict_values = dictionary_values(&mut t)?,
                _ => t.skip(ty, 1)?,
            }
        }
        if raw < 0 || stored < 0 {
            return Err("a page header without its sizes".into());
        }
        // parquet-rs sizes a dictionary from its count before reading it; every value takes at
        // least a byte.
        if dict_values < 0 || dict_values > raw {
            return Err("a dictionary page declares more values than its bytes hold".into());
        }
        if raw as u64 > b.max_page {
            return Err(format!(
                "a page declares {raw} bytes decompressed, more than `cdc_limits.max_page_mib` \
                 ({} bytes)",
                b.max_page
            ));
        }
        total = total.saturating_add(raw as u64);
        largest = largest.max(raw as u64);
        if total > declared {
            return Err(format!(
                "a column chunk's pages add up to more than the {declared} bytes its footer \
                 declares"
            ));
        }
        t.advance(stored as u64)?;
    }
    Ok(largest)
}

/// A `DictionaryPageHeader`'s `num_values`.
fn dictionary_values(t: &mut Thrift) -> R<i64> {
    let (mut n, mut last) = (0, 0);
    while let Some((id, ty)) = t.field(&mut last)? {
        Thrift::typed(id, ty, &[(1, T_I32), (2, T_I32)])?;
        match id {
            1 => n = t.zigzag()?,
            _ => t.skip(ty, 2)?,
        }
    }
    Ok(n)
}

/// The largest pages of one row group's columns (`largest`, one per column chunk fetched), which
/// are decompressed at the same time, within the decoded bound.
pub fn check_live_pages(largest: impl Iterator<Item = u64>, b: &Bounds) -> R<()> {
    let live = largest.fold(0u64, u64::saturating_add);
    if live > b.max_decoded {
        return Err(format!(
            "its columns' largest pages add up to {live} bytes decompressed, more than \
             `cdc_limits.max_decoded_mib` ({} bytes)",
            b.max_decoded
        ));
    }
    Ok(())
}

/// Rows per batch so that a batch holds about the decoded bound: the widest row group's
/// declared bytes per row (`(bytes, rows)` per row group), at most `max_rows`, at least one.
pub fn batch_rows(
    row_groups: impl Iterator<Item = (i64, i64)>,
    b: &Bounds,
    max_rows: usize,
) -> usize {
    let widest = row_groups
        .filter(|(_, rows)| *rows > 0)
        .map(|(bytes, rows)| (bytes.max(0) as u64).div_ceil(rows as u64))
        .max()
        .unwrap_or(0)
        .max(1);
    usize::try_from(b.max_decoded / 4 / widest)
        .unwrap_or(usize::MAX)
        .clamp(1, max_rows.max(1))
}

#[cfg(test)]
#[path = "parquet_bounds_tests.rs"]
mod tests;
