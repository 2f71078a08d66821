//! What vacuum must never delete (issue 24): another table's log and data below the vacuumed
//! table's root (defect 3), and a writer's staged, not yet committed Parquet file even under
//! `--force --retention-hours 0` (defect 11: the untracked-file floor). Walks the table's
//! directory (filesystem and S3) before and after.

use anyhow::{Context, Result};
use chrono::{Duration, Utc};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::DeltaWriter;
use futures::TryStreamExt;
use lakestream_core::commit::{Change, CommitSettings, Fixed, NewTable, Proposal, run};
use lakestream_core::maintenance::{CompactOptions, VacuumOptions, checkpoint, compact, vacuum};
use lakestream_core::table::TableHandle;
use lakestream_core::{FixedClock, Lake};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{TestLake, backends, offsets};
use std::sync::Arc;

fn order(off: i64) -> SourceRecord {
    let json = format!(
        r#"{{"order_id":1,"order_owner":"o","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#
    );
    SourceRecord::new("orders", 0, off, 1_649_067_330_000, json.as_bytes())
}

/// Every object under `table`'s root (relative paths), sorted.
async fn files_under(l: &Lake, table: &str) -> Result<Vec<String>> {
    let h = TableHandle::open(l, table)?;
    let mut v: Vec<String> = h
        .object_store()
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await?;
    v.sort();
    Ok(v)
}

fn settings() -> CommitSettings {
    (&lakestream_formats::config::CommitConfig::default()).into()
}

fn write_op() -> DeltaOperation {
    DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: None,
        predicate: None,
    }
}

/// A Delta table made by hand at `name` (version 0, no data): what an older config or another
/// engine leaves behind.
async fn table_by_hand(l: &Lake, name: &str) -> Result<()> {
    let mut h = TableHandle::open(l, name)?;
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
    let mut planner = Fixed(Some(Proposal {
        change: Change::append(None, write_op(), vec![], vec![]),
        schema,
        create: Some(NewTable {
            partition_columns: vec![],
            configuration: vec![],
            change_data_feed: false,
        }),
    }));
    run(&mut h, &settings(), &mut planner).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_refuses_a_table_with_another_table_below_its_root() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "vacuum-nested")?;
        let ing = lake.ingestor()?;
        for off in 0..3 {
            ing.ingest(&[order(off)]).await?;
        }
        let l = Lake::new(&lake.config.lake)?;
        table_by_hand(&l, "raw").await?;
        let nested_before = files_under(&l, "raw/order").await?;
        assert!(
            nested_before.iter().any(|f| f.starts_with("_delta_log/"))
                && nested_before.iter().any(|f| f.ends_with(".parquet")),
            "{b:?}: {nested_before:?}"
        );
        let rows = offsets(&lake.read("raw/order").await?)?;

        // The weekly schedule's vacuum, a week and a day later; then a forced window-0 one.
        let later = Arc::new(FixedClock::new(Utc::now() + Duration::days(8)));
        let forced = VacuumOptions {
            retention: Some(Duration::zero()),
            force: true,
            ..Default::default()
        };
        for opts in [VacuumOptions::default(), forced] {
            let res = vacuum(&l, "raw", &opts, later.clone()).await;
            assert_eq!(
                files_under(&l, "raw/order").await?,
                nested_before,
                "{b:?}: not one object of `raw/order` may be deleted ({opts:?}: {res:?})"
            );
            let msg = res
                .err()
                .with_context(|| format!("{b:?}: vacuum of `raw` must be refused ({opts:?})"))?
                .to_string();
            assert!(
                msg.contains("`raw/order`") && msg.contains("nothing was deleted"),
                "{b:?}: the error names the nested table and says nothing went: {msg}"
            );
        }
        // Checkpoint + log cleanup and compaction of `raw` only touch `raw`'s own log.
        let clock = FixedClock::new(Utc::now() + Duration::days(40));
        checkpoint(&l, "raw", true, &clock, &[]).await?;
        compact(
            &l,
            "raw",
            &CompactOptions::default(),
            Utc::now(),
            &|_, _| {},
        )
        .await?;
        assert_eq!(files_under(&l, "raw/order").await?, nested_before, "{b:?}");
        assert_eq!(offsets(&lake.read("raw/order").await?)?, rows, "{b:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_window_0_vacuum_keeps_a_writers_staged_file() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "vacuum-staged")?;
        let ing = lake.ingestor()?;
        for off in 0..3 {
            ing.ingest(&[order(off)]).await?;
        }
        let l = Lake::new(&lake.config.lake)?;
        let before = lake.read("raw/order").await?;
        // A writer stages its Parquet file (a copy of the three rows) and has not committed yet.
        let mut writer_handle = TableHandle::open_existing(&l, "raw/order").await?;
        let mut writer = writer_handle.file_writer()?;
        writer.write(before.clone()).await?;
        let adds = writer.flush().await?;
        assert_eq!(adds.len(), 1, "{b:?}: one staged file");
        let staged = adds[0].path.clone();
        assert!(
            files_under(&l, "raw/order").await?.contains(&staged),
            "{b:?}"
        );

        // Meanwhile: `lakestream vacuum raw/order --force --retention-hours 0`.
        let now = Arc::new(FixedClock::new(Utc::now()));
        let forced = VacuumOptions {
            retention: Some(Duration::zero()),
            force: true,
            ..Default::default()
        };
        let r = vacuum(&l, "raw/order", &forced, now).await?;
        assert!(
            !r.files.contains(&staged),
            "{b:?}: the staged file is younger than the floor: {r:?}"
        );
        assert!(
            files_under(&l, "raw/order").await?.contains(&staged),
            "{b:?}: the staged file is still there"
        );

        // The writer commits; every row (the three, and their staged copy) is readable.
        let schema = writer_handle.arrow_schema()?;
        let mut planner = Fixed(Some(Proposal {
            change: Change::append(writer_handle.version(), write_op(), adds, vec![]),
            schema,
            create: None,
        }));
        run(&mut writer_handle, &settings(), &mut planner).await?;
        let mut expected = offsets(&before)?;
        expected.extend(offsets(&before)?);
        expected.sort();
        assert_eq!(
            offsets(&lake.read("raw/order").await?)?,
            expected,
            "{b:?}: every row readable after the commit"
        );
    }
    Ok(())
}
