//! Another engine writing a Lakestream table: a DELETE as Python `deltalake` does it (without
//! deletion vectors), written with delta-rs directly, not through Lakestream. Used by the
//! compaction races and by the CDC rebuild after a GDPR erasure on bronze.

use anyhow::{Context, Result, bail};
use deltalake::arrow::array::{BooleanArray, RecordBatch};
use deltalake::arrow::compute::{concat_batches, filter_record_batch};
use deltalake::logstore::CommitOrBytes;
use deltalake::logstore::object_store::{ObjectStoreExt, PutPayload, path::Path};
use deltalake::parquet::arrow::ArrowWriter;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use lakestream_core::Lake;

/// Delete the rows of `table` for which `doomed` is true, in one commit: every live file
/// holding such a row is removed (`dataChange = true`) and its other rows are written to a new
/// file of the same partition.
pub async fn delete_where(
    lake: &Lake,
    table: &str,
    doomed: impl Fn(&RecordBatch) -> Result<BooleanArray>,
) -> Result<()> {
    let url = lake.table_url(table)?;
    let t = deltalake::DeltaTableBuilder::from_url(url)?
        .with_storage_options(lake.storage_options().clone())
        .load()
        .await?;
    let store = t.object_store();
    let mut actions = vec![serde_json::json!({"commitInfo": {
        "timestamp": chrono::Utc::now().timestamp_millis(),
        "operation": "DELETE",
        "operationParameters": {"predicate": "(test)"},
        "engineInfo": "another-engine (test)",
    }})];
    for file in t.snapshot()?.log_data().iter() {
        let path = Path::from(file.path().as_ref());
        let bytes = store.get(&path).await?.bytes().await?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()?;
        let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
        let Some(first) = batches.first() else {
            continue;
        };
        let batch = concat_batches(&first.schema(), &batches)?;
        let keep: BooleanArray = doomed(&batch)?
            .iter()
            .map(|d| Some(d != Some(true)))
            .collect();
        let kept = filter_record_batch(&batch, &keep)?;
        if kept.num_rows() == batch.num_rows() {
            continue;
        }
        actions.push(serde_json::json!({ "remove": file.remove_action(true) }));
        if kept.num_rows() > 0 {
            #[allow(deprecated)] // the one way to get the add action (partition values) of a file
            let add = serde_json::to_value(file.add_action())?;
            actions.push(serde_json::json!({ "add": rewrite(&store, &path, &kept, add).await? }));
        }
    }
    let entry: Vec<String> = actions.iter().map(ToString::to_string).collect();
    let version = t.version().context("the table exists")? + 1;
    let written = t
        .log_store()
        .write_commit_entry(
            version,
            CommitOrBytes::LogBytes(entry.join("\n").into_bytes().into()),
            uuid::Uuid::new_v4(),
        )
        .await;
    if let Err(e) = written {
        bail!("the delete's commit v{version} did not land (nothing else writes now): {e}");
    }
    Ok(())
}

/// Write `kept` as a new file beside `old`; `add` (the old file's add action) made its.
async fn rewrite(
    store: &deltalake::logstore::ObjectStoreRef,
    old: &Path,
    kept: &RecordBatch,
    mut add: serde_json::Value,
) -> Result<serde_json::Value> {
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, kept.schema(), None)?;
    w.write(kept)?;
    w.close()?;
    let dir = old.as_ref().rsplit_once('/').map_or("", |(d, _)| d);
    let name = format!("part-00000-{}-c000.snappy.parquet", uuid::Uuid::new_v4());
    let new = if dir.is_empty() {
        name
    } else {
        format!("{dir}/{name}")
    };
    let size = buf.len();
    store
        .put(&Path::from(new.as_str()), PutPayload::from(buf))
        .await?;
    add["path"] = serde_json::json!(new);
    add["size"] = serde_json::json!(size);
    add["modificationTime"] = serde_json::json!(chrono::Utc::now().timestamp_millis());
    add["dataChange"] = serde_json::json!(true);
    add["stats"] = serde_json::json!(format!(r#"{{"numRecords":{}}}"#, kept.num_rows()));
    Ok(add)
}
