//! Delta's change data feed in the commit layer (issue 26): a table created with the feed
//! (writer version 4, `delta.enableChangeDataFeed`), a rewrite committed with its change data
//! files and read back by `lakestream changes`, the safety net that refuses a rewrite without
//! them, compaction (no change files), and vacuum of change files by retention.

use anyhow::{Context, Result, ensure};
use chrono::{Duration, Utc};
use deltalake::arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::{Add, Remove};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::DeltaWriter;
use futures::TryStreamExt;
use lakestream_core::commit::{
    Change, CommitSettings, Fixed, NewTable, Proposal, ReadScope, run, write_change_data,
};
use lakestream_core::maintenance::{CompactOptions, VacuumOptions, compact, vacuum};
use lakestream_core::table::TableHandle;
use lakestream_core::{Error, FixedClock, Lake};
use lakestream_testkit::{TestLake, backends};
use std::sync::Arc;

const TABLE: &str = "silver/crm/customers";

fn settings() -> CommitSettings {
    (&lakestream_formats::config::CommitConfig::default()).into()
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
        Field::new("part", DataType::Utf8, true),
    ]))
}

fn rows(ids: &[i64], vs: &[&str], part: &str) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(vs.to_vec())),
            Arc::new(StringArray::from(vec![part; ids.len()])),
        ],
    )?)
}

/// `rows` plus `_change_type`.
fn change_rows(ids: &[i64], vs: &[&str], part: &str, kinds: &[&str]) -> Result<RecordBatch> {
    let b = rows(ids, vs, part)?;
    let mut cols = b.columns().to_vec();
    cols.push(Arc::new(StringArray::from(kinds.to_vec())));
    Ok(RecordBatch::try_new(
        lakestream_core::commit::change_schema(&schema()),
        cols,
    )?)
}

fn write_op() -> DeltaOperation {
    DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: None,
        predicate: None,
    }
}

async fn data_files(h: &TableHandle, batch: RecordBatch) -> Result<Vec<Add>> {
    let mut w = h.file_writer()?;
    w.write(batch).await?;
    Ok(w.flush().await?)
}

fn removed(a: &Add) -> Remove {
    Remove {
        path: a.path.clone(),
        data_change: true,
        deletion_timestamp: Some(Utc::now().timestamp_millis()),
        extended_file_metadata: Some(true),
        partition_values: Some(a.partition_values.clone()),
        size: Some(a.size),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
    }
}

async fn land(h: &mut TableHandle, change: Change, create: Option<NewTable>) -> Result<u64> {
    let mut planner = Fixed(Some(Proposal {
        change,
        schema: schema(),
        create,
    }));
    let ran = run(h, &settings(), &mut planner).await?;
    Ok(ran.landed.context("landed")?.version)
}

/// Every object under the table's root (relative paths), sorted.
async fn files_under(h: &TableHandle) -> Result<Vec<String>> {
    let mut v: Vec<String> = h
        .object_store()
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await?;
    v.sort();
    Ok(v)
}

/// (id, v, _change_type, _commit_version) of `lakestream changes`, in its order.
fn change_list(b: &RecordBatch) -> Result<Vec<(i64, String, String, i64)>> {
    let col = |n: &str| b.column_by_name(n).with_context(|| format!("column {n}"));
    let id = col("id")?
        .as_any()
        .downcast_ref::<Int64Array>()
        .context("id")?;
    let v = col("v")?
        .as_any()
        .downcast_ref::<StringArray>()
        .context("v")?;
    let k = col("_change_type")?
        .as_any()
        .downcast_ref::<StringArray>()
        .context("kind")?;
    let ver = col("_commit_version")?
        .as_any()
        .downcast_ref::<Int64Array>()
        .context("version")?;
    Ok((0..b.num_rows())
        .map(|i| {
            (
                id.value(i),
                v.value(i).to_string(),
                k.value(i).to_string(),
                ver.value(i),
            )
        })
        .collect())
}

/// A table created with the feed: protocol, property; a rewrite with change files read back
/// by `lakestream changes` from the change files; the safety net; compaction; vacuum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_data_feed_table_through_the_commit_layer() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "cdf-commit")?;
        let l = Lake::new(&lake.config.lake)?;
        let mut h = TableHandle::open(&l, TABLE)?;
        let create = NewTable {
            partition_columns: vec!["part".into()],
            configuration: vec![],
            change_data_feed: true,
        };
        // v0: created with the feed.
        land(
            &mut h,
            Change::append(None, write_op(), vec![], vec![]),
            Some(create),
        )
        .await?;
        let snap = h.snapshot()?;
        assert_eq!(
            (
                snap.protocol().min_reader_version(),
                snap.protocol().min_writer_version()
            ),
            (1, 4),
            "{b:?}"
        );
        assert_eq!(
            snap.metadata()
                .configuration()
                .get("delta.enableChangeDataFeed")
                .map(String::as_str),
            Some("true"),
            "{b:?}"
        );
        // v1: a blind append (no change files: its adds read as inserts).
        let a = data_files(&h, rows(&[1, 2], &["a", "b"], "x")?).await?;
        let other = data_files(&h, rows(&[3], &["c"], "y")?).await?;
        let adds: Vec<Add> = a.iter().chain(&other).cloned().collect();
        let append = Change::append(h.version(), write_op(), adds, vec![]);
        assert_eq!(land(&mut h, append, None).await?, 1);

        // v2: a copy-on-write update of id 1 in partition x, with its change files.
        let new = data_files(&h, rows(&[1, 2], &["A", "b"], "x")?).await?;
        let cdc = write_change_data(
            &l,
            TABLE,
            schema(),
            &["part".to_string()],
            &change_rows(
                &[1, 1],
                &["a", "A"],
                "x",
                &["update_preimage", "update_postimage"],
            )?,
        )
        .await?;
        assert_eq!(cdc.len(), 1, "{b:?}: one change file for one partition");
        assert!(
            cdc[0].path.starts_with("_change_data/part=x/") && !cdc[0].data_change,
            "{b:?}: {:?}",
            cdc[0]
        );
        assert_eq!(
            cdc[0].partition_values.get("part"),
            Some(&Some("x".to_string()))
        );
        let read_version = h.version();
        let rewrite = |adds: Vec<Add>, cdc_files| {
            let mut c = Change::append(read_version, write_op(), adds, vec![]);
            c.removes = a.iter().map(removed).collect();
            c.scope = ReadScope::Table;
            c.cdc_files = cdc_files;
            c
        };
        // The safety net: the same rewrite without change files is refused, nothing written.
        let refused = rewrite(new.clone(), vec![]);
        let err = land(&mut h, refused, None).await.err().context("refused")?;
        let msg = err.to_string();
        assert!(
            matches!(
                err.downcast_ref::<Error>(),
                Some(Error::ChangeDataFeed { .. })
            ) && msg.contains("enableChangeDataFeed")
                && msg.contains("Nothing was written"),
            "{b:?}: {msg}"
        );
        h.refresh().await?;
        assert_eq!(h.version(), Some(1), "{b:?}: nothing landed");
        let change = rewrite(new, cdc.clone());
        assert_eq!(land(&mut h, change, None).await?, 2, "{b:?}");
        let commit = h.commit(2).await?.map(|c| c.into_bytes()).context("v2")?;
        let text = String::from_utf8_lossy(&commit);
        assert!(
            text.contains(r#""cdc":{"path":"_change_data/part=x/"#),
            "{b:?}: {text}"
        );

        // `lakestream changes`: v1 diffed (inserts), v2 from its change files only.
        let ch = lakestream_core::inspect::changes(&l, TABLE, 1, None).await?;
        let got = change_list(&ch.rows)?;
        let want: Vec<(i64, String, String, i64)> = [
            (1, "a", "insert", 1),
            (2, "b", "insert", 1),
            (3, "c", "insert", 1),
            (1, "a", "update_preimage", 2),
            (1, "A", "update_postimage", 2),
        ]
        .iter()
        .map(|(i, v, k, n)| (*i, v.to_string(), k.to_string(), *n))
        .collect();
        let mut sorted_got = got.clone();
        sorted_got[..3].sort();
        assert_eq!(sorted_got, want, "{b:?}");

        // Compaction (`dataChange = false`) is allowed and writes no change file.
        let more = data_files(&h, rows(&[4], &["d"], "x")?).await?;
        let append = Change::append(h.version(), write_op(), more, vec![]);
        assert_eq!(land(&mut h, append, None).await?, 3);
        let opts = CompactOptions {
            min_small_files: 2,
            ..Default::default()
        };
        let report = compact(&l, TABLE, &opts, Utc::now(), &|_, _| {}).await?;
        ensure!(format!("{report:?}").contains("files"), "{b:?}: {report:?}");
        let h2 = TableHandle::open_existing(&l, TABLE).await?;
        assert_eq!(
            h2.version(),
            Some(4),
            "{b:?}: compaction landed: {report:?}"
        );
        let commit = h2.commit(4).await?.map(|c| c.into_bytes()).context("v4")?;
        assert!(
            !String::from_utf8_lossy(&commit).contains(r#""cdc""#),
            "{b:?}"
        );
        let ch = lakestream_core::inspect::changes(&l, TABLE, 4, Some(4)).await?;
        assert_eq!(ch.rows.num_rows(), 0, "{b:?}: compaction changes nothing");

        // Vacuum: a staged (uncommitted) change file of a writer, and the committed one.
        let staged = write_change_data(
            &l,
            TABLE,
            schema(),
            &["part".to_string()],
            &change_rows(&[9], &["z"], "y", &["insert"])?,
        )
        .await?;
        let committed = cdc[0].path.clone();
        let staged = staged[0].path.clone();
        let now = Arc::new(FixedClock::new(Utc::now()));
        // Inside the table's window (7 days): both kept.
        let r = vacuum(&l, TABLE, &VacuumOptions::default(), now.clone()).await?;
        assert!(
            r.files.iter().all(|f| !f.starts_with("_change_data/")),
            "{b:?}: {r:?}"
        );
        // `--force --retention-hours 0`: the committed one goes (it is no young orphan), the
        // staged one is kept (a writer may be about to commit it).
        let forced = VacuumOptions {
            retention: Some(Duration::zero()),
            force: true,
            ..Default::default()
        };
        let r = vacuum(&l, TABLE, &forced, now).await?;
        assert!(r.files.contains(&committed), "{b:?}: {r:?}");
        assert!(!r.files.contains(&staged), "{b:?}: {r:?}");
        let left = files_under(&h2).await?;
        assert!(
            !left.contains(&committed) && left.contains(&staged),
            "{b:?}: {left:?}"
        );
        // A week and a day later the abandoned staged file is an old orphan: deleted.
        let later = Arc::new(FixedClock::new(Utc::now() + Duration::days(8)));
        let r = vacuum(&l, TABLE, &VacuumOptions::default(), later).await?;
        assert!(r.files.contains(&staged), "{b:?}: {r:?}");
    }
    Ok(())
}
