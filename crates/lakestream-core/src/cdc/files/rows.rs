//! Text rows (CSV fields, JSON-lines values) of one chunk -> typed columns. Every column is
//! collected as text and cast to its declared type at the end of the chunk (arrow's casts:
//! integers, decimals, ISO / `YYYY-MM-DD HH:MM:SS[.ffffff]` times as UTC, dates); a value that
//! does not parse makes its row a bad row, dead-lettered with its raw bytes, the others land.
//! An empty field is null. Undeclared columns stay text.

use super::layout::DecodedRows;
use crate::error::Result;
use crate::schema::timestamp_type;
use deltalake::arrow::array::{
    Array, ArrayRef, BooleanArray, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::compute::{CastOptions, cast_with_options, filter_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::arrow::record_batch::RecordBatch;
use lakestream_formats::config::{CdcColumn, CdcType};
use std::collections::HashSet;
use std::sync::Arc;

/// A row that cannot land: its 1-based row number, raw bytes and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    /// 1-based data row.
    pub row: i64,
    /// The bytes it was read from.
    pub raw: Vec<u8>,
    /// Why, and what to do.
    pub reason: String,
    /// A value that does not parse as its column's declared type: the source column changed
    /// type (`<column>: <type> -> ...`, never the value); the bronze commit records it and the
    /// table's apply job stops (README "CDC: schema changes").
    pub type_change: Option<String>,
}

/// The Arrow type of a declared column type.
pub fn declared_type(t: CdcType) -> DataType {
    match t {
        CdcType::String => DataType::Utf8,
        CdcType::Int32 => DataType::Int32,
        CdcType::Int64 => DataType::Int64,
        CdcType::Float64 => DataType::Float64,
        CdcType::Boolean => DataType::Boolean,
        CdcType::Timestamp => timestamp_type(),
        CdcType::Date => DataType::Date32,
        CdcType::Decimal(p, s) => DataType::Decimal128(p, s),
        CdcType::Binary => DataType::Binary,
    }
}

/// One chunk's rows as text, column by column.
pub struct TextChunk {
    names: Vec<String>,
    /// Column index by lower-cased name.
    index: std::collections::HashMap<String, usize>,
    types: Vec<DataType>,
    values: Vec<Vec<Option<String>>>,
    ops: Vec<&'static str>,
    rows: Vec<i64>,
    raws: Vec<Vec<u8>>,
    /// Rows refused while reading (field count, `Op`, not UTF-8 / JSON).
    pub bad: Vec<BadRow>,
    /// The bronze table's row columns, lower-cased ([`FileSpec::bronze`](super::decode::FileSpec)).
    bronze: Arc<HashSet<String>>,
    /// The chunk's columns bronze does not have.
    beyond: usize,
    /// Raw bytes held.
    pub bytes: usize,
}

impl TextChunk {
    /// An empty chunk with `columns` known up front (declared or from the header), typed by
    /// `declared`.
    pub fn new(columns: &[String], declared: &[CdcColumn], bronze: Arc<HashSet<String>>) -> Self {
        let mut c = Self {
            names: vec![],
            index: std::collections::HashMap::new(),
            types: vec![],
            values: vec![],
            ops: vec![],
            rows: vec![],
            raws: vec![],
            bad: vec![],
            bytes: 0,
            bronze,
            beyond: 0,
        };
        for name in columns {
            c.column(name, declared);
        }
        c
    }

    /// Rows held (good so far and bad).
    pub fn len(&self) -> usize {
        self.rows.len() + self.bad.len()
    }

    /// Whether the chunk holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Some(why)` when a row with columns `names` would add more than `max_new` columns to the
    /// chunk and its bronze table, or take the table past `max_table` columns
    /// (`[cdc_limits]`).
    pub fn too_wide<'a>(
        &self,
        names: impl Iterator<Item = &'a str>,
        (max_table, max_new): (usize, usize),
    ) -> Option<String> {
        let new = names
            .map(str::to_lowercase)
            .filter(|n| !self.index.contains_key(n) && !self.bronze.contains(n))
            .count();
        // A new table's first row brings its columns; after that one row may add at most
        // `max_new`.
        let first = self.names.is_empty() && self.bronze.is_empty();
        let per_row = !first && new > max_new;
        (per_row || self.bronze.len() + self.beyond + new > max_table).then(|| {
            format!(
                "the row adds {new} columns, more than `[cdc_limits]` allows (at most {max_new} \
                 new in one row, {max_table} in the table); raise `max_new_columns` / \
                 `max_table_columns` if the source table is that wide"
            )
        })
    }

    /// The index of column `name` (case-insensitive), added (text unless declared) when new.
    pub fn column(&mut self, name: &str, declared: &[CdcColumn]) -> usize {
        if let Some(&i) = self.index.get(&name.to_lowercase()) {
            return i;
        }
        let lower = name.to_lowercase();
        if !self.bronze.contains(&lower) {
            self.beyond += 1;
        }
        self.index.insert(lower, self.names.len());
        let t = declared
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name))
            .map_or(DataType::Utf8, |d| declared_type(d.data_type));
        self.names.push(name.to_string());
        self.types.push(t);
        self.values.push(vec![None; self.rows.len()]);
        self.names.len() - 1
    }

    /// Add a row: `values` by column index (missing columns null).
    pub fn push(
        &mut self,
        row: i64,
        op: &'static str,
        values: Vec<(usize, Option<String>)>,
        raw: Vec<u8>,
    ) {
        for col in &mut self.values {
            col.push(None);
        }
        for (i, v) in values {
            if let Some(slot) = self.values.get_mut(i).and_then(|c| c.last_mut()) {
                *slot = v.filter(|s| !s.is_empty());
            }
        }
        self.bytes += raw.len();
        self.ops.push(op);
        self.rows.push(row);
        self.raws.push(raw);
    }

    /// Refuse a row.
    pub fn reject(&mut self, row: i64, raw: Vec<u8>, reason: String) {
        self.bytes += raw.len();
        self.bad.push(BadRow {
            row,
            raw,
            reason,
            type_change: None,
        });
    }

    /// Typed rows and every bad row (ordered by row); `timestamp_column` fills the rows'
    /// commit times (a value that is not a time is a bad row).
    pub fn finish(self, timestamp_column: Option<&str>) -> Result<(DecodedRows, Vec<BadRow>)> {
        let n = self.rows.len();
        let mut bad: Vec<Option<String>> = vec![None; n];
        let mut changed: Vec<Option<String>> = vec![None; n];
        let safe = CastOptions::default();
        let mut fields = Vec::with_capacity(self.names.len());
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(self.names.len());
        let mut ts: Vec<Option<i64>> = vec![None; n];
        for ((name, t), values) in self.names.iter().zip(&self.types).zip(&self.values) {
            let text = StringArray::from(values.clone());
            let typed = cast_with_options(&text, t, &safe)?;
            for (r, slot) in bad.iter_mut().enumerate() {
                if text.is_valid(r) && !typed.is_valid(r) && slot.is_none() {
                    *slot = Some(format!(
                        "column `{name}`: the value does not parse as {t}: fix the row, or \
                         the source column changed type or the family's `columns` declares the \
                         wrong one (a DMS table's apply job then stops until the table is \
                         rebuilt: README \"CDC: schema changes\")"
                    ));
                    changed[r] = Some(format!("column `{name}`: {t} -> text that is not {t}"));
                }
            }
            if timestamp_column.is_some_and(|c| c.eq_ignore_ascii_case(name)) {
                let times = cast_with_options(&text, &timestamp_type(), &safe)?;
                if let Some(times) = times.as_any().downcast_ref::<TimestampMicrosecondArray>() {
                    for (r, slot) in ts.iter_mut().enumerate() {
                        if times.is_valid(r) {
                            *slot = Some(times.value(r));
                        } else if text.is_valid(r) && bad[r].is_none() {
                            bad[r] = Some(format!(
                                "timestamp column `{name}`: the value is not a time \
                                 (YYYY-MM-DD HH:MM:SS[.ffffff], UTC)"
                            ));
                        }
                    }
                }
            }
            fields.push(Field::new(name, t.clone(), true));
            cols.push(typed);
        }
        let keep: BooleanArray = bad.iter().map(|b| Some(b.is_none())).collect();
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new_with_options(
            schema,
            cols,
            &deltalake::arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        let columns = filter_record_batch(&batch, &keep)?;
        let mut bad_rows = self.bad;
        let mut ops = Vec::new();
        let mut rows = Vec::new();
        let mut times = Vec::new();
        for (r, (raw, why)) in self.raws.into_iter().zip(bad).enumerate() {
            match why {
                Some(reason) => bad_rows.push(BadRow {
                    row: self.rows[r],
                    raw,
                    reason,
                    type_change: changed[r].take(),
                }),
                None => {
                    ops.push(self.ops[r]);
                    rows.push(self.rows[r]);
                    times.push(ts[r]);
                }
            }
        }
        bad_rows.sort_by_key(|b| b.row);
        Ok((
            DecodedRows {
                columns,
                ops,
                rows,
                source_ts: times,
            },
            bad_rows,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_does_not_parse_refuses_its_row_only() -> anyhow::Result<()> {
        let declared = vec![
            CdcColumn::parse("id int64").map_err(anyhow::Error::msg)?,
            CdcColumn::parse("amount decimal(10,2)").map_err(anyhow::Error::msg)?,
            CdcColumn::parse("ts timestamp").map_err(anyhow::Error::msg)?,
        ];
        let names: Vec<String> = declared.iter().map(|d| d.name.clone()).collect();
        let mut c = TextChunk::new(&names, &declared, Arc::default());
        let row = |a: &str, b: &str, t: &str| {
            vec![
                (0, Some(a.to_string())),
                (1, Some(b.to_string())),
                (2, Some(t.to_string())),
            ]
        };
        c.push(
            1,
            "c",
            row("1", "9.50", "2026-11-29 11:34:01.000001"),
            b"r1".to_vec(),
        );
        c.push(2, "u", row("x", "1", "2026-11-29 11:34:02"), b"r2".to_vec());
        c.push(3, "d", row("3", "", "nope"), b"r3".to_vec());
        c.reject(4, b"r4".to_vec(), "field count".into());
        let (d, bad) = c.finish(Some("ts"))?;
        assert_eq!(d.rows, [1]);
        assert_eq!(d.ops, ["c"]);
        assert_eq!(d.source_ts, [Some(1_795_952_041_000_001)]);
        assert_eq!(
            bad.iter()
                .map(|b| (b.row, b.raw.clone()))
                .collect::<Vec<_>>(),
            [
                (2, b"r2".to_vec()),
                (3, b"r3".to_vec()),
                (4, b"r4".to_vec())
            ]
        );
        assert!(bad[0].reason.contains("`id`"), "{bad:?}");
        assert!(bad[1].reason.contains("`ts`"), "{bad:?}");
        assert_eq!(d.columns.num_rows(), 1);
        Ok(())
    }
}
