//! Partition values measured as delta-rs writes them (issue 24 follow-up: a long partition
//! value fails its record, not the batch). delta-rs's writer is the reference: the directory it
//! creates for each value must be exactly `<col>=` plus [`encoded_len`] bytes, and
//! [`Lake::partition_limits`] must leave room for the data file's name under it.

use anyhow::{Context, Result};
use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use lakestream_core::Lake;
use lakestream_core::partition_path::{MAX_SEGMENT, encoded_len};
use std::sync::Arc;

/// Values with every kind of character delta-rs encodes (and some it keeps).
const VALUES: &[&str] = &[
    "alice",
    "a b/c=d%e:f",
    "é ü ß 日本",
    "!\"#$&'()*+,;<>?@[\\]^`{|}",
    "-_.~",
    "tab\there",
];

#[tokio::test]
async fn encoded_length_is_what_delta_rs_writes() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let lake = Lake::local(dir.path())?;
    let url = lake.table_url("raw/member")?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("order_owner", DataType::Utf8, true),
        Field::new("n", DataType::Utf8, true),
    ]));
    let owners: ArrayRef = Arc::new(StringArray::from(VALUES.to_vec()));
    let n: ArrayRef = Arc::new(StringArray::from(vec!["x"; VALUES.len()]));
    let batch = RecordBatch::try_new(schema.clone(), vec![owners, n])?;
    let mut writer =
        RecordBatchWriter::try_new(url.as_str(), schema, Some(vec!["order_owner".into()]), None)?;
    writer.write(batch).await?;
    let adds = writer.flush().await?;
    assert_eq!(adds.len(), VALUES.len());

    let table_dir = dir.path().join("raw/member");
    let mut written: Vec<usize> = std::fs::read_dir(&table_dir)?
        .map(|e| Ok(e?.file_name().len()))
        .collect::<Result<_>>()?;
    let mut expected: Vec<usize> = VALUES
        .iter()
        .map(|v| "order_owner=".len() + encoded_len(v))
        .collect();
    written.sort_unstable();
    expected.sort_unstable();
    assert_eq!(
        written,
        expected,
        "directory names under {}",
        table_dir.display()
    );

    // The room left under the path limit: the table's location and a file name fit beside it.
    let limits = lake.partition_limits("raw/member")?;
    assert_eq!(limits.segment, MAX_SEGMENT);
    let file = adds[0].path.rsplit('/').next().context("a data file")?;
    let location = table_dir.as_os_str().len() + 1;
    assert!(
        location + limits.dir + file.len() < 4095,
        "{limits:?}, file {file}"
    );
    Ok(())
}

/// On S3 the room is what the 1024-byte key limit leaves after the table's prefix and 160
/// bytes for a file name.
#[test]
fn s3_room_under_the_key_limit() -> Result<()> {
    let lake = Lake::new(&lakestream_formats::config::LakeConfig {
        root: "s3://bucket/prefix".into(),
        endpoint_url: Some("http://127.0.0.1:9".into()),
        region: Some("us-east-1".into()),
        allow_http: true,
        storage_options: Default::default(),
        assume_conditional_put: true,
    })?;
    let limits = lake.partition_limits("raw/member")?;
    assert_eq!(limits.dir, 1024 - "prefix/raw/member".len() - 160);
    assert_eq!(limits.store, "S3's key limit");
    Ok(())
}
