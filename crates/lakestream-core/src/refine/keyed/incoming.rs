//! The source side of an upsert run: the chunk's rows as the output will store them (the op
//! column dropped unless kept, `""` for null in string partition columns), their key and
//! ordering values encoded once in arrow's row format, and the winning row per key with what
//! later steps learn about it (older than the output or a tombstone, replacing a row, a
//! delete). About 8 bytes per key besides the row buffers.

use super::order::{Encoder, KeyIndex, latest_per_key, tie_texts};
use super::target;
use crate::error::{Error, Result};
use crate::refine::report::UpsertCounts;
use crate::refine::source::SourceRead;
use crate::table::parquet_read::with_partitions;
use deltalake::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::row::Rows;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::upsert::UpsertConfig;
use std::collections::HashMap;
use std::sync::Arc;

/// One key's winning source row (its key and ordering values are in the run's row buffers,
/// its tie text, when needed, in [`Ties`]).
pub(crate) struct Incoming {
    /// Index of the row in [`IncomingRows::rows`].
    pub row: u32,
    /// The row is a CDC delete.
    pub delete: bool,
    /// A newer row (in the output or a tombstone) keeps this one out.
    pub older: bool,
    /// It replaces (or deletes) a row of the output.
    pub replaces: bool,
    /// CDC: its row values equal the output row's it would replace: it changes nothing (also
    /// marked `older`, so nothing is written for it).
    pub unchanged: bool,
    /// CDC: the ordering bytes of the key's output row or tombstone it follows (a version
    /// starts after them: [`version_start`](super::unchanged::version_start)).
    pub after: Option<Vec<u8>>,
}

/// Tie texts of incoming rows, by index in the winners, computed only when needed.
pub(crate) type Ties = HashMap<usize, String>;

/// The chunk's rows of one upsert run, encoded.
pub(crate) struct IncomingRows<'a> {
    /// The job.
    pub cfg: &'a RefineJob,
    /// Its upsert settings.
    pub u: &'a UpsertConfig,
    /// What was read from the source (its handle and chunk).
    pub read: SourceRead,
    /// The rows in the source's schema (`""` for null in string partition columns).
    pub rows: RecordBatch,
    /// The same rows as the output stores them (the op column dropped unless kept).
    pub stored: RecordBatch,
    /// The schema of [`Self::stored`].
    pub stored_schema: SchemaRef,
    /// Encoder of the key columns.
    pub key_enc: Encoder,
    /// Encoder of the ordering columns.
    pub order_enc: Encoder,
    /// Key values of [`Self::rows`], row by row.
    pub keys: Rows,
    /// Ordering values of [`Self::rows`], row by row.
    pub orders: Rows,
    /// The op column as text (CDC jobs).
    op_values: Option<ArrayRef>,
}

impl<'a> IncomingRows<'a> {
    /// Encode what `read` holds; `partition_columns` are the output's.
    pub fn new(
        cfg: &'a RefineJob,
        u: &'a UpsertConfig,
        mut read: SourceRead,
        partition_columns: &[String],
    ) -> Result<Self> {
        // The batches as read are dropped once they are one batch.
        let rows = read.rows()?;
        read.batches = Vec::new();
        Self::of_rows(cfg, u, read, rows, &[], partition_columns)
    }

    /// Encode `rows`, the source rows of the run as the job shaped them (CDC: the changes of
    /// the CDC apply's `cdc::changes::read_changes`); `not_stored` are columns
    /// besides the op column the output does not keep (they stay usable as `rows` columns).
    pub fn of_rows(
        cfg: &'a RefineJob,
        u: &'a UpsertConfig,
        read: SourceRead,
        rows: RecordBatch,
        not_stored: &[&str],
        partition_columns: &[String],
    ) -> Result<Self> {
        let src_schema = rows.schema();
        // In a partition column of the output, null and "" are one Delta value: one key.
        let rows = target::empty_partition_values(&rows, partition_columns)?;
        // The rows as the output stores them (the op column dropped unless kept).
        let op_column = u.op.as_ref().filter(|o| !o.keep).map(|o| o.column.as_str());
        let out_fields: Vec<Field> = src_schema
            .fields()
            .iter()
            .filter(|f| {
                Some(f.name().as_str()) != op_column && !not_stored.contains(&f.name().as_str())
            })
            .map(|f| f.as_ref().clone())
            .collect();
        let stored_schema: SchemaRef = Arc::new(Schema::new(out_fields));
        let stored = with_partitions(&stored_schema, &rows, &HashMap::new())?;
        let types = |names: &[String]| -> Result<Vec<DataType>> {
            names
                .iter()
                .map(|n| {
                    Ok(field(&src_schema, n, &u.source, &cfg.job)?
                        .data_type()
                        .clone())
                })
                .collect()
        };
        let key_enc = Encoder::new(&u.key, types(&u.key)?)?;
        let order_enc = Encoder::new(&u.order_by, types(&u.order_by)?)?;
        // Keys and ordering values in arrow's row format: two buffers, no allocation per row.
        let keys = key_enc.rows(&rows, &u.source)?;
        let orders = order_enc.rows(&rows, &u.source)?;
        let op_values = match &u.op {
            Some(op) => {
                field(&src_schema, &op.column, &u.source, &cfg.job)?;
                let col = rows
                    .column_by_name(&op.column)
                    .ok_or_else(|| Error::Internal("op".into()))?;
                Some(cast(col, &DataType::Utf8)?)
            }
            None => None,
        };
        Ok(Self {
            cfg,
            u,
            read,
            rows,
            stored,
            stored_schema,
            key_enc,
            order_enc,
            keys,
            orders,
            op_values,
        })
    }

    /// Whether row `row` is a CDC delete.
    pub fn is_delete(&self, row: usize) -> bool {
        match (&self.op_values, &self.u.op) {
            (Some(col), Some(op)) => {
                let col = col.as_string::<i32>();
                col.is_valid(row) && op.delete.iter().any(|d| d == col.value(row))
            }
            _ => false,
        }
    }

    /// The winning row per key, in first-seen key order, and key bytes -> index in it.
    pub fn winners(&self) -> Result<(Vec<Incoming>, KeyIndex<'_>)> {
        let (winners, index) = latest_per_key(
            &self.keys,
            &self.orders,
            |row| self.is_delete(row),
            |idx| tie_texts(&self.stored, idx),
        )?;
        let incoming = winners
            .iter()
            .map(|&row| Incoming {
                row: row as u32,
                delete: self.is_delete(row),
                older: false,
                replaces: false,
                unchanged: false,
                after: None,
            })
            .collect();
        Ok((incoming, index))
    }

    /// The ordering bytes of a winner.
    pub fn order_of(&self, inc: &Incoming) -> &[u8] {
        self.orders.row(inc.row as usize).data()
    }

    /// Compute the tie texts of the `which` winners (indexes into `incoming`) that have none
    /// yet, in one batch over the stored rows.
    pub fn fill_ties(
        &self,
        incoming: &[Incoming],
        ties: &mut Ties,
        mut which: Vec<usize>,
    ) -> Result<()> {
        which.sort_unstable();
        which.dedup();
        which.retain(|w| !ties.contains_key(w));
        if which.is_empty() {
            return Ok(());
        }
        let idx: Vec<usize> = which.iter().map(|&w| incoming[w].row as usize).collect();
        ties.extend(which.into_iter().zip(tie_texts(&self.stored, &idx)?));
        Ok(())
    }
}

/// What the winners did to the output.
pub(crate) fn counts(incoming: &[Incoming]) -> UpsertCounts {
    let count = |f: &dyn Fn(&Incoming) -> bool| incoming.iter().filter(|w| f(w)).count();
    UpsertCounts {
        inserted: count(&|w| !w.older && !w.delete && !w.replaces),
        updated: count(&|w| !w.older && !w.delete && w.replaces),
        deleted: count(&|w| !w.older && w.delete && w.replaces),
        older_ignored: count(&|w| w.older && !w.unchanged),
    }
}

/// Column `name` of `schema`, or a clear error naming the job.
fn field<'s>(schema: &'s Schema, name: &str, table: &str, job: &str) -> Result<&'s Field> {
    schema.field_with_name(name).map_err(|_| Error::Schema {
        table: table.to_string(),
        reason: format!("no column `{name}` (named in refine job `{job}`)"),
    })
}
