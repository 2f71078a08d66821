//! Bronze CDC tables written directly (ARCHITECTURE.md "Bronze: one schema for every source"),
//! through the core's commit path, for tests of the apply: each change is `(op, seq, row)`
//! with the row's columns as JSON (`null` for a truncate), and the lineage columns filled as a
//! Debezium source would (`__topic`, `__partition`, `__offset` = the change's index).

use crate::{Error, Result};
use deltalake::arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
    new_null_array,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use lakestream_core::Lake;
use lakestream_core::commit::{self, CommitSettings, Planned, Planner, TableState};
use lakestream_core::table::TableHandle;
use lakestream_formats::config::bronze;
use std::sync::Arc;

/// One bronze change: `__op`, `__seq` and the row's columns as a JSON object (`"{}"` for none).
pub type BronzeChange<'a> = (&'a str, &'a str, &'a str);

/// The bronze batch of `changes`: metadata columns then the row columns of `row_schema`.
pub fn bronze_batch(changes: &[BronzeChange<'_>], row_schema: &SchemaRef) -> Result<RecordBatch> {
    let n = changes.len();
    let ts = |v: Vec<Option<i64>>| -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC"))
    };
    let text = |v: Vec<Option<String>>| -> ArrayRef { Arc::new(StringArray::from(v)) };
    let base = 1_767_225_600_000_000i64; // 2026-01-01T00:00:00Z
    let mut fields = vec![
        Field::new(bronze::OP, DataType::Utf8, false),
        Field::new(bronze::SEQ, DataType::Utf8, false),
        Field::new(
            bronze::SOURCE_TS,
            lakestream_core::schema::timestamp_type(),
            true,
        ),
        Field::new(bronze::KEY, DataType::Utf8, true),
        Field::new(bronze::TOPIC, DataType::Utf8, true),
        Field::new(bronze::PARTITION, DataType::Int32, true),
        Field::new(bronze::OFFSET, DataType::Int64, true),
        Field::new(bronze::OBJECT, DataType::Utf8, true),
        Field::new(bronze::ETAG, DataType::Utf8, true),
        Field::new(bronze::ROW, DataType::Int64, true),
        Field::new(
            bronze::INGESTED_AT,
            lakestream_core::schema::timestamp_type(),
            false,
        ),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        text(changes.iter().map(|c| Some(c.0.to_string())).collect()),
        text(changes.iter().map(|c| Some(c.1.to_string())).collect()),
        // The source commit time follows the sequence's trailing digits (seconds).
        ts(changes
            .iter()
            .map(|c| {
                let digits: String = c.1.chars().filter(char::is_ascii_digit).collect();
                let s: i64 = digits.parse().unwrap_or(0) % 1_000_000;
                Some(base + s * 1_000_000)
            })
            .collect()),
        text(vec![None; n]),
        text(vec![Some("crm.public.t".into()); n]),
        Arc::new(Int32Array::from(vec![0; n])),
        Arc::new(Int64Array::from((0..n as i64).collect::<Vec<_>>())),
        text(vec![None; n]),
        text(vec![None; n]),
        Arc::new(Int64Array::from(vec![None; n])),
        ts(vec![Some(base + 86_400_000_000); n]),
    ];
    let json: String = changes
        .iter()
        .map(|c| format!("{}\n", c.2))
        .collect::<String>();
    // One batch for every change (the reader's default stops at 1,024 rows).
    let mut reader = arrow_json::ReaderBuilder::new(row_schema.clone())
        .with_batch_size(n.max(1))
        .build(std::io::Cursor::new(json.into_bytes()))?;
    let rows = match reader.next() {
        Some(b) => b?,
        None => RecordBatch::new_empty(row_schema.clone()),
    };
    for (f, c) in row_schema.fields().iter().zip(rows.columns()) {
        fields.push(f.as_ref().clone().with_nullable(true));
        cols.push(c.clone());
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?)
}

struct Append {
    batch: RecordBatch,
    properties: Vec<(String, String)>,
}

impl Planner for Append {
    fn app_ids(&self) -> Vec<String> {
        vec![]
    }
    async fn plan(&mut self, state: &TableState) -> lakestream_core::Result<Option<Planned>> {
        // The table's columns, then new ones (merge mode); the batch aligned to them.
        let mut fields: Vec<Field> = match &state.schema {
            Some(s) => s.fields().iter().map(|f| f.as_ref().clone()).collect(),
            None => vec![],
        };
        for f in self.batch.schema().fields() {
            if !fields.iter().any(|g| g.name() == f.name()) {
                fields.push(f.as_ref().clone());
            }
        }
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let cols: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .map(|f| match self.batch.column_by_name(f.name()) {
                Some(c) => c.clone(),
                None => new_null_array(f.data_type(), self.batch.num_rows()),
            })
            .collect();
        Ok(Some(Planned {
            batch: RecordBatch::try_new(schema.clone(), cols)?,
            schema,
            partition_columns: vec![],
            txns: vec![],
            set_properties: vec![],
            table_properties: self.properties.clone(),
            commit_if_empty: false,
        }))
    }
}

/// Append `changes` (row columns of `row_schema`) to bronze table `table`, created with the
/// bronze properties (`keys` comma-separated, none when `None`); the version committed.
pub async fn append_bronze(
    lake: &Lake,
    table: &str,
    keys: Option<&str>,
    changes: &[BronzeChange<'_>],
    row_schema: &SchemaRef,
) -> Result<u64> {
    let mut properties = vec![
        (bronze::FAMILY_PROPERTY.to_string(), "test".to_string()),
        (bronze::TABLE_PROPERTY.to_string(), {
            let mut parts: Vec<&str> = table.rsplit('/').take(2).collect();
            parts.reverse();
            parts.join(".")
        }),
    ];
    if let Some(k) = keys {
        properties.push((bronze::KEYS_PROPERTY.to_string(), k.to_string()));
    }
    let mut planner = Append {
        batch: bronze_batch(changes, row_schema)?,
        properties,
    };
    let mut handle = TableHandle::open(lake, table)?;
    let settings = CommitSettings {
        checkpoint_interval: 10,
        max_attempts: 30,
        inner_retries: 3,
        base_backoff: std::time::Duration::from_millis(20),
        max_backoff: std::time::Duration::from_millis(500),
    };
    commit::append(lake, &mut handle, &settings, &mut planner)
        .await?
        .version
        .ok_or_else(|| Error::NoTable(table.to_string()))
}
