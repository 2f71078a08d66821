//! The table layer's read seams on every backend: the commits of a range (and the one typed
//! error for a gone commit), the live files and the projected read, time travel, and a
//! vacuumed file recognised however it is read.

use anyhow::Result;
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use deltalake::kernel::Action;
use deltalake::logstore::object_store::ObjectStoreExt;
use futures::TryStreamExt;
use lakestream_core::table::{AsOf, TableHandle, is_missing_file};
use lakestream_core::{Error, Lake};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{Backend, TestLake, backends};
use std::sync::Arc;

fn batch(p: i32, from: i64, n: i64) -> Vec<SourceRecord> {
    (from..from + n)
        .map(|off| {
            let json = format!(
                r#"{{"order_id":{off},"order_owner":"o{p}","order_value":{off},"timestamp":"2022-04-04T10:15:30Z"}}"#
            );
            SourceRecord::new("orders", p, off, 1_649_067_330_000, json.as_bytes())
        })
        .collect()
}

/// Three appends: versions 0, 1 and 2 with 3, 4 and 5 rows.
async fn three_versions(name: &str) -> Result<Vec<(Backend, TestLake, Lake)>> {
    let mut out = Vec::new();
    for b in backends() {
        let lake = TestLake::new(b, name)?;
        let ing = lake.ingestor()?;
        ing.ingest(&batch(0, 0, 3)).await?;
        ing.ingest(&batch(0, 3, 4)).await?;
        ing.ingest(&batch(1, 0, 5)).await?;
        let l = Lake::new(&lake.config.lake)?;
        out.push((b, lake, l));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_stream_in_order_and_a_gone_one_is_one_typed_error() -> Result<()> {
    for (b, _lake, l) in three_versions("seam-commits").await? {
        let h = TableHandle::open_existing(&l, "raw/order").await?;
        let commits: Vec<_> = h.commits(0..=2).stream().try_collect().await?;
        let versions: Vec<u64> = commits.iter().map(|c| c.version()).collect();
        assert_eq!(versions, [0, 1, 2], "{b:?}");
        for c in &commits {
            let adds = c
                .actions()?
                .iter()
                .filter(|a| matches!(a, Action::Add(_)))
                .count();
            assert_eq!(adds, 1, "{b:?}: version {}", c.version());
            assert_eq!(c.txns().len(), 1, "{b:?}");
            assert!(c.written_at().is_some(), "{b:?}: commitInfo.timestamp");
        }
        let newest: Vec<u64> = h
            .commits(0..=2)
            .newest_first()
            .read_ahead(4)
            .stream()
            .map_ok(|c| c.version())
            .try_collect()
            .await?;
        assert_eq!(newest, [2, 1, 0], "{b:?}");
        assert!(h.commit(3).await?.is_none(), "{b:?}: not written yet");

        // Log cleanup took version 0 (after a checkpoint): one typed error naming the oldest
        // commit left.
        h.create_checkpoint().await?;
        assert_eq!(h.last_checkpoint().await?, Some(2), "{b:?}");
        let first = deltalake::Path::from(format!("_delta_log/{:020}.json", 0));
        h.object_store().delete(&first).await?;
        let h = TableHandle::open_existing(&l, "raw/order").await?;
        assert!(h.commit(0).await?.is_none(), "{b:?}");
        let err = h
            .commits(0..=2)
            .stream()
            .try_collect::<Vec<_>>()
            .await
            .expect_err("version 0 is gone");
        assert!(
            matches!(
                &err,
                Error::CommitGone {
                    version: 0,
                    oldest: Some(1),
                    ..
                }
            ) && !err.is_retryable()
                && err
                    .to_string()
                    .contains("the oldest commit still in the log is version 1"),
            "{b:?}: {err}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_files_are_read_projected_scanned_and_as_of_a_version() -> Result<()> {
    for (b, _lake, l) in three_versions("seam-files").await? {
        let mut h = TableHandle::open_existing(&l, "raw/order").await?;
        let files = h.live_files()?;
        assert_eq!((files.len(), h.num_live_files()?), (3, 3), "{b:?}");
        let rows: usize = files.iter().filter_map(|f| f.num_records()).sum();
        assert_eq!(rows, 12, "{b:?}");
        assert!(
            files
                .iter()
                .all(|f| f.size() > 0 && !f.has_deletion_vector())
        );
        assert!(files[0].min_max("order_id").is_some(), "{b:?}: statistics");

        // Projected: only the asked column, every row of the file.
        let schema = h.arrow_schema()?;
        let id = schema.field_with_name("order_id")?.clone();
        let one: SchemaRef = Arc::new(Schema::new(vec![id]));
        let f = &files[0];
        let got = h.read_columns(&f.data_file(), &one).await?;
        let n: usize = got.iter().map(|b| b.num_rows()).sum();
        assert_eq!(Some(n), f.num_records(), "{b:?}");
        assert!(got.iter().all(|b| b.num_columns() == 1), "{b:?}");
        let whole = h.read_file(&f.data_file(), &schema).await?;
        assert_eq!(whole[0].num_columns(), schema.fields().len(), "{b:?}");

        // Scanned: pruned files are not read.
        let mut scanned = 0;
        h.scan(
            &["order_id"],
            |f| f.num_records() == Some(4),
            |b, _| {
                scanned += b.num_rows();
                Ok(())
            },
        )
        .await?;
        assert_eq!(scanned, 4, "{b:?}");

        // Time travel.
        assert_eq!(h.resolve(AsOf::Latest).await?, 2);
        let err = h.resolve(AsOf::Version(9)).await.expect_err("not yet");
        assert!(
            err.to_string()
                .contains("version 9 does not exist yet; the latest is 2"),
            "{err}"
        );
        assert_eq!(h.as_of(AsOf::Version(1)).await?, 1);
        assert_eq!((h.version(), h.live_files()?.len()), (Some(1), 2), "{b:?}");

        // A vacuumed file, read whole or projected, is recognisable.
        h.object_store().delete(&f.object_path()).await?;
        let whole = h
            .read_file(&f.data_file(), &schema)
            .await
            .expect_err("gone");
        assert!(is_missing_file(&whole), "{b:?}: {whole}");
        let part = h
            .read_columns(&f.data_file(), &one)
            .await
            .expect_err("gone");
        assert!(is_missing_file(&part), "{b:?}: {part}");
    }
    Ok(())
}
