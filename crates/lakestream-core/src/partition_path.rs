//! Partition directories as delta-rs writes them, measured before anything is written.
//!
//! A partitioned table's data files live under `<col>=<value>/.../part-....parquet`, one
//! directory segment per partition column, the value percent-encoded the way delta-rs encodes it
//! (`deltalake::kernel::scalars`, the Delta protocol's "URL-encode keys and string values"
//! set; a null is `__HIVE_DEFAULT_PARTITION__`). Partition values come from records, so a
//! record can make a key S3 refuses (over 1024 bytes: `400 KeyTooLongError`) or a file name the
//! file system refuses (a segment over 255 bytes). [`oversized_rows`] finds those rows so that
//! only their records are dead-lettered (reason class `partition-value-too-long`), never the
//! batch.
//!
//! It is also the one codec of partition paths: [`encode`] a value as delta-rs writes it in a
//! directory, [`decode`] a path as the log stores it (percent-encoded), and
//! [`values_from_path`] recover the partition values of a file from its Hive-style path (a
//! `remove` written without them). This module imports nothing of the crate but its error
//! type, so every module may use it.

use crate::error::Result;
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::util::display::{ArrayFormatter, FormatOptions};
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use std::collections::HashMap;

/// The longest directory or file name, in bytes (Linux `NAME_MAX`). Applied on S3 too, so a
/// lake can be copied to (or read from) a file system.
pub const MAX_SEGMENT: usize = 255;

/// What delta-rs writes for a null partition value.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The characters delta-rs percent-encodes in a partition value (its `RFC3986_PART` set, the
/// Delta protocol's list); non-ASCII bytes are always encoded.
const PART: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'!')
    .add(b'"')
    .add(b'#')
    .add(b'$')
    .add(b'%')
    .add(b'&')
    .add(b'\'')
    .add(b'(')
    .add(b')')
    .add(b'*')
    .add(b'+')
    .add(b',')
    .add(b'/')
    .add(b':')
    .add(b';')
    .add(b'<')
    .add(b'=')
    .add(b'>')
    .add(b'?')
    .add(b'@')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// How long a table's partition directories may be (the lake's storage says: `Lake::partition_limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLimits {
    /// Bytes per `<col>=<value>` segment.
    pub segment: usize,
    /// Bytes for all segments with their `/` separators (`a=1/b=2/`): the storage's limit less
    /// the table's location and the room kept for a data file's name.
    pub dir: usize,
    /// The limit `dir` comes from, for the reason ("S3's key limit", ...).
    pub store: &'static str,
}

/// The length of `value` once delta-rs percent-encodes it for a partition directory.
pub fn encoded_len(value: &str) -> usize {
    utf8_percent_encode(value, PART).map(str::len).sum()
}

/// `value` percent-encoded as delta-rs writes it in a partition directory (`a b` -> `a%20b`).
pub fn encode(value: &str) -> String {
    utf8_percent_encode(value, PART).to_string()
}

/// A path or value as the Delta log stores it, percent-decoded (invalid UTF-8 replaced): the
/// one decoding of log paths (`add`, `remove`, `cdc`), partition segments and table locations.
pub fn decode(encoded: &str) -> String {
    percent_decode_str(encoded).decode_utf8_lossy().into_owned()
}

/// The values of `partition_columns` in a data file's Hive-style `path` as the log stores it
/// (`year=26/day=__HIVE_DEFAULT_PARTITION__/part-0.parquet`): each segment decoded twice (the
/// log percent-encodes the path, whose segments are encoded values), [`NULL_PARTITION`] is
/// null. Other segments and columns not in the path are left out.
pub fn values_from_path(
    path: &str,
    partition_columns: &[String],
) -> HashMap<String, Option<String>> {
    let mut out = HashMap::new();
    for seg in path.split('/') {
        if let Some((k, v)) = seg.split_once('=')
            && partition_columns.iter().any(|c| c == k)
        {
            let v = decode(&decode(v));
            let v = (v != NULL_PARTITION).then_some(v);
            out.insert(k.to_string(), v);
        }
    }
    out
}

/// The encoded length of row `row`'s value of `column`: exact for strings and nulls; for
/// other types a bound (binary values: delta-rs's `\u00XX` per byte, encoded; the rest: their
/// text with every byte encoded). Only strings and binaries can be long.
fn value_len(column: &dyn Array, row: usize, fmt: Option<&ArrayFormatter<'_>>) -> usize {
    if column.is_null(row) {
        return NULL_PARTITION.len();
    }
    match column.data_type() {
        DataType::Utf8 => encoded_len(column.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => encoded_len(column.as_string::<i64>().value(row)),
        DataType::Utf8View => encoded_len(column.as_string_view().value(row)),
        DataType::Binary => column.as_binary::<i32>().value(row).len() * 8,
        DataType::LargeBinary => column.as_binary::<i64>().value(row).len() * 8,
        DataType::BinaryView => column.as_binary_view().value(row).len() * 8,
        _ => fmt.map_or(0, |f| f.value(row).to_string().len() * 3),
    }
}

/// The rows of `batch` whose partition directory (over `columns`, as delta-rs encodes it)
/// has a segment longer than `limits.segment` or is longer than `limits.dir`, each with the
/// reason (lengths and limits, never the value). Columns missing from the batch are skipped.
pub fn oversized_rows(
    batch: &RecordBatch,
    columns: &[String],
    limits: &PartitionLimits,
) -> Result<Vec<(usize, String)>> {
    let options = FormatOptions::default();
    let mut cols = Vec::with_capacity(columns.len());
    for name in columns {
        let Some(col) = batch.column_by_name(name) else {
            continue;
        };
        let text = !matches!(
            col.data_type(),
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
        );
        let fmt = if text {
            Some(ArrayFormatter::try_new(col.as_ref(), &options)?)
        } else {
            None
        };
        cols.push((name.as_str(), col.as_ref(), fmt));
    }
    let mut out = Vec::new();
    if cols.is_empty() {
        return Ok(out);
    }
    for row in 0..batch.num_rows() {
        let mut dir = 0;
        let mut worst: Option<(&str, usize)> = None;
        for (name, col, fmt) in &cols {
            let seg = name.len() + 1 + value_len(*col, row, fmt.as_ref());
            dir += seg + 1;
            if seg > limits.segment && worst.is_none_or(|(_, w)| seg > w) {
                worst = Some((name, seg));
            }
        }
        let why = match worst {
            Some((name, seg)) => format!(
                "partition value too long: column `{name}` makes the directory `{name}=…` {seg} \
                 bytes once encoded, over the {} bytes a directory name may take; the record is \
                 kept here, not written (shorten the value or partition by another column)",
                limits.segment
            ),
            None if dir > limits.dir => format!(
                "partition value too long: the partition directories ({}) take {dir} bytes once \
                 encoded, over the {} bytes this table's location leaves under {}; the record \
                 is kept here, not written (shorten the value or partition by another column)",
                cols.iter()
                    .map(|(n, _, _)| format!("{n}=…"))
                    .collect::<Vec<_>>()
                    .join("/"),
                limits.dir,
                limits.store
            ),
            None => continue,
        };
        out.push((row, why));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{ArrayRef, Int32Array, StringArray};
    use deltalake::arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn batch(owners: Vec<Option<String>>) -> RecordBatch {
        let n = owners.len() as i32;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(owners)),
            Arc::new(Int32Array::from_iter_values(0..n)),
        ];
        let schema = Schema::new(vec![
            Field::new("order_owner", DataType::Utf8, true),
            Field::new("n", DataType::Int32, false),
        ]);
        RecordBatch::try_new(Arc::new(schema), cols).unwrap()
    }

    #[test]
    fn paths_decode_and_values_come_back_from_them() {
        let cols = vec!["year".to_string(), "day".to_string()];
        let p = values_from_path(
            "year=26/day=__HIVE_DEFAULT_PARTITION__/part-0.parquet",
            &cols,
        );
        assert_eq!(p.get("year"), Some(&Some("26".to_string())));
        assert_eq!(p.get("day"), Some(&None));
        assert_eq!(p.len(), 2);
        // The log encodes the path whose segment is an encoded value: decoded twice.
        let value = "a b/c=d%:é";
        let logged = format!("region={}/part-0.parquet", encode(&encode(value)));
        let p = values_from_path(&logged, &["region".to_string()]);
        assert_eq!(p.get("region"), Some(&Some(value.to_string())));
        assert_eq!(decode(&encode(value)), value);
        assert_eq!(encode(value).len(), encoded_len(value));
    }

    #[test]
    fn encoding_matches_delta_rs() {
        assert_eq!(encoded_len("alice"), 5);
        // space, `/`, `=`, `%`, `:` are encoded (3 bytes each); `é` is two UTF-8 bytes, 6 encoded.
        assert_eq!(encoded_len("a b/c=d%:"), 4 + 5 * 3);
        assert_eq!(encoded_len("é"), 6);
        assert_eq!(encoded_len("-_.~"), 4);
    }

    #[test]
    fn long_values_are_found_row_by_row() -> Result<()> {
        let s3 = PartitionLimits {
            segment: MAX_SEGMENT,
            dir: 1024 - 20 - 160,
            store: "S3's key limit",
        };
        let owners = vec![
            Some("alice".to_string()),
            Some("A".repeat(1100)),
            None,
            // `order_owner=` is 12 bytes: 243 fits a 255-byte segment, 244 does not.
            Some("B".repeat(243)),
            Some("B".repeat(244)),
            // 100 characters that encode to 300 bytes.
            Some("/".repeat(100)),
        ];
        let found = oversized_rows(&batch(owners), &["order_owner".into()], &s3)?;
        let rows: Vec<usize> = found.iter().map(|r| r.0).collect();
        assert_eq!(rows, vec![1, 4, 5]);
        for (_, why) in &found {
            assert!(why.starts_with("partition value too long"), "{why}");
            assert!(!why.contains("AAAA") && !why.contains("BBBB"), "{why}");
            assert_eq!(crate::redact::reason_class(why), "partition-value-too-long");
        }
        assert!(found[0].1.contains("1112 bytes"), "{}", found[0].1);
        // The room under the key limit: 169 bytes (`order_owner=` + 150, `n=` + a bound of 3
        // bytes per digit, two `/`) fit in 200, 219 do not.
        let tight = PartitionLimits { dir: 200, ..s3 };
        let two = batch(vec![Some("C".repeat(150)), Some("D".repeat(200))]);
        let found = oversized_rows(&two, &["order_owner".into(), "n".into()], &tight)?;
        assert_eq!(found.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1]);
        assert!(found[0].1.contains("S3's key limit"), "{}", found[0].1);
        // Unpartitioned tables and unknown columns: nothing to check.
        assert!(oversized_rows(&two, &[], &tight)?.is_empty());
        assert!(oversized_rows(&two, &["nope".into()], &tight)?.is_empty());
        Ok(())
    }
}
