//! The footer and page checks against a real file written by parquet-rs (nothing refused, the
//! same extents parquet-rs reads) and against hand-made metadata, one bound at a time.

use super::*;
use deltalake::arrow::array::{Int64Array, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::parquet::arrow::ArrowWriter;
use deltalake::parquet::file::metadata::ParquetMetaDataReader;
use deltalake::parquet::file::properties::WriterProperties;
use std::sync::Arc;

fn bounds() -> Bounds {
    Bounds::from(&CdcLimits::default())
}

/// A Parquet file of `rows` rows in row groups of 100, with a dictionary-encoded column.
fn real_file(rows: i64) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("tier", DataType::Utf8, true),
    ]));
    let ids = Int64Array::from_iter_values(0..rows);
    let tiers =
        StringArray::from_iter_values((0..rows).map(|i| ["gold", "silver"][i as usize % 2]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(tiers)]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(100))
        .build();
    let mut w = ArrowWriter::try_new(Vec::new(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.into_inner().unwrap()
}

fn footer_of(file: &[u8]) -> &[u8] {
    let len = footer_len(&file[file.len() - 8..], file.len() as u64, &bounds()).unwrap();
    &file[file.len() - 8 - len as usize..file.len() - 8]
}

#[test]
fn a_real_file_passes_with_the_extents_parquet_reads() {
    let file = real_file(250);
    let footer = check_footer(footer_of(&file), &bounds()).unwrap();
    let meta = ParquetMetaDataReader::decode_metadata(footer_of(&file)).unwrap();
    let theirs: Vec<(u64, u64)> = meta
        .row_groups()
        .iter()
        .flat_map(|rg| rg.columns().iter().map(|c| c.byte_range()))
        .collect();
    let ours: Vec<(u64, u64)> = footer.chunks.iter().map(|c| (c.start, c.len)).collect();
    assert_eq!(ours, theirs);
    assert_eq!(ours.len(), 6, "3 row groups x 2 columns");
    for c in &footer.chunks {
        let bytes = &file[c.start as usize..(c.start + c.len) as usize];
        check_pages(bytes, c.uncompressed, &bounds()).unwrap();
        // The same pages against a footer that declared less: refused.
        let e = check_pages(bytes, 10, &bounds()).unwrap_err();
        assert!(e.contains("add up to more than"), "{e}");
    }
}

#[test]
fn framing_is_checked_before_anything_is_read() {
    let b = bounds();
    assert!(footer_len(b"PAR1", 4, &b).unwrap_err().contains("12 bytes"));
    assert!(
        footer_len(b"\x10\0\0\0PAR2", 40, &b)
            .unwrap_err()
            .contains("magic")
    );
    assert!(
        footer_len(b"\x10\0\0\0PARE", 40, &b)
            .unwrap_err()
            .contains("encrypted")
    );
    assert!(
        footer_len(b"\x1d\0\0\0PAR1", 40, &b)
            .unwrap_err()
            .contains("does not fit")
    );
    assert_eq!(footer_len(b"\x1c\0\0\0PAR1", 40, &b).unwrap(), 28);
    let small = Bounds {
        max_footer: 27,
        ..b
    };
    assert!(
        footer_len(b"\x1c\0\0\0PAR1", 40, &small)
            .unwrap_err()
            .contains("max_footer_mib")
    );
}

/// Thrift compact-protocol writing, for hand-made metadata.
#[derive(Default)]
struct W(Vec<u8>);

impl W {
    fn varint(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    fn field(&mut self, delta: u8, ty: u8) -> &mut Self {
        self.0.push(delta << 4 | ty);
        self
    }
    fn int(&mut self, delta: u8, ty: u8, v: i64) -> &mut Self {
        self.field(delta, ty).varint(((v << 1) ^ (v >> 63)) as u64)
    }
    fn list(&mut self, delta: u8, elem: u8, n: u64) -> &mut Self {
        self.field(delta, T_LIST);
        if n < 15 {
            self.0.push((n as u8) << 4 | elem);
            self
        } else {
            self.0.push(0xf0 | elem);
            self.varint(n)
        }
    }
    fn stop(&mut self) -> &mut Self {
        self.0.push(0);
        self
    }
    /// A schema element (`name` field 4, `num_children` field 5), closed.
    fn element(&mut self, children: i64) -> &mut Self {
        self.field(4, T_BINARY).varint(1);
        self.0.push(b'c');
        if children != 0 {
            self.int(1, T_I32, children);
        }
        self.stop()
    }
}

/// `FileMetaData` with a schema of `children` counts (depth-first) and no row groups.
fn with_schema(children: &[i64]) -> Vec<u8> {
    let mut w = W::default();
    w.int(1, T_I32, 1).list(1, T_STRUCT, children.len() as u64);
    for &c in children {
        w.element(c);
    }
    w.int(1, T_I64, 0).list(1, T_STRUCT, 0).stop();
    w.0
}

#[test]
fn a_row_group_count_larger_than_the_footer_is_refused_unallocated() {
    // The 44-byte object of the audit: two billion row groups declared, none present.
    let mut w = W::default();
    w.int(1, T_I32, 1).list(1, T_STRUCT, 1).element(0);
    w.int(1, T_I64, 0).list(1, T_STRUCT, i32::MAX as u64);
    let e = check_footer(&w.0, &bounds()).unwrap_err();
    assert!(e.contains("list of 2147483647 items"), "{e}");
}

#[test]
fn row_groups_past_the_bound_are_refused() {
    let mut w = W::default();
    w.int(1, T_I32, 1)
        .list(1, T_STRUCT, 2)
        .element(1)
        .element(0);
    w.int(1, T_I64, 0).list(1, T_STRUCT, 3);
    for _ in 0..3 {
        w.stop();
    }
    w.stop();
    let two = Bounds {
        max_row_groups: 2,
        ..bounds()
    };
    assert!(
        check_footer(&w.0, &two)
            .unwrap_err()
            .contains("max_row_groups")
    );
    assert!(check_footer(&w.0, &bounds()).is_ok());
}

#[test]
fn schema_nesting_and_width_are_bounded_without_recursion() {
    // 200,000 levels: refused by the iterative walk, no stack used.
    let deep: Vec<i64> = std::iter::repeat_n(1, 200_000).chain([0]).collect();
    let e = check_footer(&with_schema(&deep), &bounds()).unwrap_err();
    assert!(e.contains("max_nesting"), "{e}");
    // 32 levels (the default bound) pass, 33 do not.
    let ok: Vec<i64> = std::iter::repeat_n(1, 33).chain([0]).collect();
    assert!(check_footer(&with_schema(&ok), &bounds()).is_ok());
    let over: Vec<i64> = std::iter::repeat_n(1, 34).chain([0]).collect();
    assert!(check_footer(&with_schema(&over), &bounds()).is_err());
    let wide = Bounds {
        max_columns: 4,
        ..bounds()
    };
    let e = check_footer(&with_schema(&[5, 0, 0, 0, 0, 0]), &wide).unwrap_err();
    assert!(e.contains("max_columns"), "{e}");
    assert!(check_footer(&with_schema(&[4, 0, 0, 0, 0]), &wide).is_ok());
}

#[test]
fn metadata_parquet_rs_would_read_otherwise_is_refused() {
    // A row-group list declared as a set, a repeated schema field, a collection of booleans
    // (parquet-rs skips them as zero bytes, this walk as one: a second footer could hide in
    // them), and bytes after the footer.
    let mut set = W::default();
    set.int(1, T_I32, 1).list(1, T_STRUCT, 1).element(0);
    set.int(1, T_I64, 0)
        .field(1, 10)
        .0
        .extend([0xfc, 0xff, 0xff, 0xff, 0xff, 0x07]);
    let e = check_footer(&set.0, &bounds()).unwrap_err();
    assert!(e.contains("wrong type"), "{e}");
    let mut twice = W::default();
    twice.int(1, T_I32, 1).list(1, T_STRUCT, 1).element(0);
    // Field 2 again, its id written out (a delta of 0): zigzag(2) = 4.
    twice.0.extend([T_LIST, 4, 1 << 4 | T_STRUCT]);
    twice.element(0).stop();
    let e = check_footer(&twice.0, &bounds()).unwrap_err();
    assert!(e.contains("repeats a field"), "{e}");
    let mut bools = W::default();
    bools.int(1, T_I32, 1).list(1, T_STRUCT, 1).element(0);
    bools.list(13, 1, 3).0.extend([1, 1, 1]);
    bools.stop();
    let e = check_footer(&bools.0, &bounds()).unwrap_err();
    assert!(e.contains("booleans"), "{e}");
    let mut trailing = with_schema(&[1, 0]);
    trailing.push(0);
    assert!(
        check_footer(&trailing, &bounds())
            .unwrap_err()
            .contains("bytes follow")
    );
    // A row group with another column count than the schema's leaves.
    let mut w = W::default();
    w.int(1, T_I32, 1)
        .list(1, T_STRUCT, 2)
        .element(1)
        .element(0);
    w.int(1, T_I64, 0)
        .list(1, T_STRUCT, 1)
        .list(1, T_STRUCT, 2)
        .stop()
        .stop()
        .stop()
        .stop();
    assert!(
        check_footer(&w.0, &bounds())
            .unwrap_err()
            .contains("column chunks")
    );
}

#[test]
fn a_dictionary_page_declaring_more_values_than_bytes_is_refused() {
    // PageHeader { 1: type, 2: raw, 3: stored, 7: DictionaryPageHeader { 1: num_values } }.
    let page = |values: i64| {
        let mut w = W::default();
        w.int(1, T_I32, 2)
            .int(1, T_I32, 16)
            .int(1, T_I32, 2)
            .field(4, T_STRUCT);
        w.int(1, T_I32, values).stop().stop();
        w.0.extend([0, 0]);
        w.0
    };
    assert!(check_pages(&page(2), 100, &bounds()).is_ok());
    let e = check_pages(&page(i32::MAX as i64), 100, &bounds()).unwrap_err();
    assert!(e.contains("more values than its bytes"), "{e}");
}

#[test]
fn a_schema_whose_counts_do_not_match_its_elements_is_refused() {
    for bad in [&[3, 0, 0][..], &[1, 0, 0], &[2, 0, -1], &[]] {
        assert!(
            check_footer(&with_schema(bad), &bounds()).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn a_row_group_declaring_more_than_the_bound_is_refused() {
    let mut w = W::default();
    w.int(1, T_I32, 1)
        .list(1, T_STRUCT, 2)
        .element(1)
        .element(0);
    w.int(1, T_I64, 0).list(1, T_STRUCT, 1);
    // RowGroup { 1: columns [ColumnChunk { 3: ColumnMetaData { 6, 7, 9 } }] }
    w.list(1, T_STRUCT, 1).field(3, T_STRUCT);
    w.int(6, T_I64, 1100 << 20)
        .int(1, T_I64, 1 << 20)
        .int(2, T_I64, 4);
    w.stop().stop().stop().stop();
    let e = check_footer(&w.0, &bounds()).unwrap_err();
    assert!(e.contains("max_row_group_mib"), "{e}");
}

#[test]
fn pages_past_the_page_bound_are_refused_before_decompression() {
    let page = |raw: i64, stored: i64| {
        let mut w = W::default();
        w.int(1, T_I32, 0)
            .int(1, T_I32, raw)
            .int(1, T_I32, stored)
            .stop();
        w.0.extend(std::iter::repeat_n(7u8, stored as usize));
        w.0
    };
    let b = bounds();
    let mut two = page(100, 3);
    two.extend(page(50, 2));
    assert!(check_pages(&two, 150, &b).is_ok());
    assert!(check_pages(&two, 149, &b).is_err());
    let e = check_pages(&page(200 << 20, 4), u64::MAX, &b).unwrap_err();
    assert!(e.contains("max_page_mib"), "{e}");
    // A page longer than the chunk: truncated, refused.
    assert!(check_pages(&page(10, 4)[..6], 100, &b).is_err());
}

#[test]
fn live_pages_and_batches_stay_within_the_decoded_bound() {
    let b = Bounds {
        max_decoded: 100,
        ..bounds()
    };
    assert!(check_live_pages([40, 60].into_iter(), &b).is_ok());
    let e = check_live_pages([40, 61].into_iter(), &b).unwrap_err();
    assert!(e.contains("max_decoded_mib"), "{e}");
    // The widest row group sets the batch: 10 bytes a row -> 2 rows of a quarter of 100 bytes.
    assert_eq!(
        batch_rows([(50, 10), (1000, 100)].into_iter(), &b, 250_000),
        2
    );
    assert_eq!(batch_rows([(1 << 30, 1)].into_iter(), &b, 250_000), 1);
    assert_eq!(batch_rows([(10, 100)].into_iter(), &b, 7), 7);
    assert_eq!(batch_rows(std::iter::empty(), &b, 7), 7);
}
