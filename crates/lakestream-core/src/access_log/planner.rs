//! Plans one access-log table's append: the rows of every object whose `txn` is not committed
//! yet, one `txn` per object in the same commit.

use super::arrow::access_log_schema;
use crate::commit::{Planned, Planner, TableState};
use crate::error::Result;
use deltalake::arrow::compute::concat_batches;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Transaction;
use lakestream_formats::config::AccessLogLayout;
use lakestream_formats::notification::LogObject;

pub(super) struct ObjectPlanner<'a> {
    pub(super) pipeline: &'a str,
    pub(super) objects: &'a [LogObject],
    pub(super) parts: &'a [(usize, RecordBatch)],
    pub(super) retention_days: u32,
    pub(super) layout: AccessLogLayout,
    pub(super) written: Vec<usize>,
}

impl Planner for ObjectPlanner<'_> {
    fn app_ids(&self) -> Vec<String> {
        self.parts
            .iter()
            .map(|(i, _)| self.objects[*i].app_id(self.pipeline))
            .collect()
    }

    fn wants_all_txns(&self) -> bool {
        true
    }

    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        self.written.clear();
        let mut batches = Vec::new();
        let mut txns = Vec::new();
        for (i, b) in self.parts {
            let id = self.objects[*i].app_id(self.pipeline);
            if state.committed.contains_key(&id) {
                continue;
            }
            self.written.push(*i);
            batches.push(b.clone());
            txns.push(Transaction::new(id, 1));
        }
        if batches.is_empty() {
            return Ok(None);
        }
        let schema = access_log_schema();
        let batch = concat_batches(&schema, &batches)?;
        let partition_columns = match self.layout {
            AccessLogLayout::PerBucket => vec!["date".to_string()],
            AccessLogLayout::Single => vec!["bucket".to_string(), "date".to_string()],
        };
        Ok(Some(Planned {
            batch,
            schema: state.schema.clone().unwrap_or(schema),
            partition_columns,
            txns,
            commit_if_empty: false,
            set_properties: vec![],
            table_properties: vec![(
                "delta.setTransactionRetentionDuration".into(),
                format!("interval {} days", self.retention_days),
            )],
        }))
    }
}
