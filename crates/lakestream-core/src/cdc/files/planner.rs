//! Plans one chunk's bronze commit: the chunk's rows above the object's committed `txn`
//! version, the `txn` advanced to the chunk's last data row (and the object's `done` marker
//! after its last chunk), in the same commit; the bronze table is created on first sight with
//! its properties, and its schema evolves in merge mode.

use super::layout::{align, merged_schema};
use crate::commit::{Planned, Planner, TableState};
use crate::error::Result;
use crate::schema::validate_schema;
use deltalake::arrow::array::{BooleanArray, Int64Array};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Transaction;
use lakestream_formats::config::bronze;

/// The `txn` appIds of one object version.
#[derive(Debug, Clone)]
pub struct ObjectTxn {
    /// Version = data rows committed so far.
    pub rows: String,
    /// Committed (version 1) with the object's last chunk.
    pub done: String,
}

impl ObjectTxn {
    /// `<pipeline>/cdc-object/<sha256 of bucket/key#etag>` (fixed length, whatever the key)
    /// and its `/done` marker.
    pub fn of(pipeline: &str, bucket: &str, key: &str, etag: &str) -> Self {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("{bucket}/{key}#{etag}").as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let rows = format!("{pipeline}/cdc-object/{hex}");
        Self {
            done: format!("{rows}/done"),
            rows,
        }
    }
}

/// One chunk's append.
pub struct ChunkPlanner<'a> {
    /// Bronze table name.
    pub table: &'a str,
    /// The object's appIds.
    pub txn: &'a ObjectTxn,
    /// Bronze rows of the chunk (metadata columns first).
    pub batch: &'a RecordBatch,
    /// The chunk's last data row (the `txn` version after it).
    pub last_row: i64,
    /// The object's last chunk.
    pub eof: bool,
    /// Table properties when the commit creates the table.
    pub properties: Vec<(String, String)>,
    /// Table properties the commit sets (a source column's type change).
    pub set_properties: Vec<(String, String)>,
    /// Rows the last plan wrote.
    pub written: usize,
}

impl Planner for ChunkPlanner<'_> {
    fn app_ids(&self) -> Vec<String> {
        vec![self.txn.rows.clone(), self.txn.done.clone()]
    }

    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        self.written = 0;
        if state.committed.contains_key(&self.txn.done) {
            return Ok(None);
        }
        let committed = state.committed.get(&self.txn.rows).copied().unwrap_or(0);
        if committed >= self.last_row && !(self.eof && committed == self.last_row) {
            // Another delivery of this object committed past this chunk meanwhile.
            return Ok(None);
        }
        // Rows another delivery committed meanwhile (a different chunk size) are not written
        // again.
        let rows = self
            .batch
            .column_by_name(bronze::ROW)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>());
        let keep: BooleanArray = match rows {
            Some(rows) => rows
                .iter()
                .map(|r| Some(r.unwrap_or(0) > committed))
                .collect(),
            None => BooleanArray::from(vec![true; self.batch.num_rows()]),
        };
        let batch = filter_record_batch(self.batch, &keep)?;
        let schema = merged_schema(state.schema.as_ref(), &batch.schema());
        validate_schema(self.table, &schema, state.schema.as_deref())?;
        let batch = align(self.table, &batch, &schema)?;
        self.written = batch.num_rows();
        let mut txns = vec![Transaction::new(self.txn.rows.clone(), self.last_row)];
        if self.eof {
            txns.push(Transaction::new(self.txn.done.clone(), 1));
        }
        Ok(Some(Planned {
            batch,
            schema,
            partition_columns: vec![],
            txns,
            set_properties: self.set_properties.clone(),
            table_properties: self
                .properties
                .iter()
                .chain(&self.set_properties)
                .cloned()
                .collect(),
            commit_if_empty: true,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_ids_are_fixed_length_per_version() {
        let a = ObjectTxn::of("p", "landing", "dms/dbo/items/LOAD00000001.csv", "e1");
        let b = ObjectTxn::of("p", "landing", "dms/dbo/items/LOAD00000001.csv", "e2");
        assert_ne!(a.rows, b.rows);
        assert_eq!(a.rows.len(), "p/cdc-object/".len() + 64);
        assert_eq!(a.done, format!("{}/done", a.rows));
    }
}
