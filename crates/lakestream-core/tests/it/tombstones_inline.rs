//! Issue 39: a CDC apply's tombstones travel in its output commit (`keyed/pending.rs`): no
//! tombstone-table commit per apply; the tombstone table holds the output's anchor and, once a
//! checkpoint version or a day has passed, the consolidated rows. A late, older change of a
//! deleted key stays out whether its tombstone is pending (cold and warm processes, two
//! instances taking turns), consolidated, or read after log cleanup (which keeps the pending
//! commits); two applies at once with bronze appends beside them keep every tombstone; a chunk
//! too large to go inline writes its tombstones to the table first.

use anyhow::{Context, Result};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use lakestream_core::clock::FixedClock;
use lakestream_core::commit::CommitSettings;
use lakestream_core::maintenance;
use lakestream_core::refine::keyed::pending::{self, COMMIT_INFO_KEY};
use lakestream_core::refine::{RunContext, UpsertCounts, run_job};
use lakestream_core::table::{TableHandle, WarmHandles};
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::cdc::append_bronze;
use lakestream_testkit::{TestLake, backends, strings};
use std::sync::Arc;

const BRONZE: &str = "bronze/crm/public/people";
const SILVER: &str = "silver/crm/public/people";
const TOMBS: &str = "_lakestream/people/tombstones";

fn config(lake: &TestLake) -> Result<PipelineConfig> {
    let job = format!(
        "[[refine]]\njob = \"people\"\noutput = \"{SILVER}\"\n[refine.cdc]\nsource = \"{BRONZE}\"\nkeys = [\"id\"]\n"
    );
    let mut cfg = PipelineConfig::from_toml(&format!("{}\n{job}", lakestream_testkit::EXAMPLE))?;
    cfg.lake = lake.config.lake.clone();
    cfg.commit = lake.config.commit.clone();
    Ok(cfg)
}

fn rows() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]))
}

/// Bronze gains one change per `(op, seq, id)`.
async fn changes(l: &Lake, list: &[(&str, String, i64)]) -> Result<()> {
    let docs: Vec<String> = list
        .iter()
        .map(|(_, seq, id)| format!(r#"{{"id":{id},"v":"{seq}"}}"#))
        .collect();
    let batch: Vec<(&str, &str, &str)> = list
        .iter()
        .zip(&docs)
        .map(|((op, seq, _), doc)| (*op, seq.as_str(), doc.as_str()))
        .collect();
    append_bronze(l, BRONZE, Some("id"), &batch, &rows()).await?;
    Ok(())
}

fn seq(n: u32) -> String {
    format!("s{n:05}")
}

/// One apply of the job, in a process of its own (`warm: None`) or a warm one.
async fn apply(
    cfg: &PipelineConfig,
    l: &Lake,
    s: &CommitSettings,
    now: chrono::DateTime<chrono::Utc>,
    warm: Option<&WarmHandles>,
) -> Result<UpsertCounts> {
    let job = cfg.refine_job("people").context("job")?;
    let ctx = RunContext::new(cfg, l, s, now);
    let ctx = match warm {
        Some(w) => ctx.with_warm(w),
        None => ctx,
    };
    Ok(run_job(&ctx, job, 1000).await?.upserted())
}

/// Silver's ids, sorted.
async fn ids(l: &Lake) -> Result<Vec<i64>> {
    let b = read::read_table(l, SILVER, None).await?;
    let mut ids: Vec<i64> = strings(&b, "id")?
        .into_iter()
        .map(|s| s.unwrap_or_default().parse().unwrap_or(-1))
        .collect();
    ids.sort();
    Ok(ids)
}

/// The tombstone table's anchor for silver (`None`: no anchor for silver's id).
async fn anchor(l: &Lake) -> Result<Option<i64>> {
    let side = TableHandle::open_existing(l, TOMBS).await?;
    let silver = TableHandle::open_existing(l, SILVER).await?.table_id()?;
    Ok(pending::consolidated_through(&side, &silver)?)
}

async fn tombstone_rows(l: &Lake) -> Result<usize> {
    Ok(read::read_table(l, TOMBS, None).await?.num_rows())
}

async fn silver_head(l: &Lake) -> Result<TableHandle> {
    Ok(TableHandle::open_existing(l, SILVER).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_travel_in_the_output_commit_until_a_checkpoint_consolidates_them() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "tombstones-inline")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let now = chrono::Utc::now();
        // Two warm instances taking turns, and a cold process now and then.
        let (a, b) = (WarmHandles::new(), WarmHandles::new());
        let inserts: Vec<_> = (1..=12).map(|id| ("c", seq(id as u32), id)).collect();
        changes(&l, &inserts).await?;
        apply(&cfg, &l, &s, now, Some(&a)).await?;
        assert_eq!(ids(&l).await?, (1..=12).collect::<Vec<_>>());

        // Silver's first delete: the anchor at the plan's read version (0), the tombstone in
        // silver's commit 1, not in the table.
        changes(&l, &[("d", seq(100), 1)]).await?;
        assert_eq!(apply(&cfg, &l, &s, now, Some(&b)).await?.deleted, 1);
        assert_eq!(anchor(&l).await?, Some(0), "{backend:?}");
        assert_eq!(
            tombstone_rows(&l).await?,
            0,
            "{backend:?}: no tombstone commit"
        );
        let head = silver_head(&l).await?;
        let c1 = head.commit(1).await?.context("commit 1")?;
        assert!(c1.info_field(COMMIT_INFO_KEY).is_some(), "{backend:?}");

        // Late, older changes of the deleted key, in turn by each instance and a cold one:
        // kept out by the pending tombstone. Each round deletes one more key.
        let warm = [Some(&a), Some(&b), None];
        for (round, id) in (2..=7).enumerate() {
            let late = seq(50 + round as u32);
            changes(
                &l,
                &[("u", late.clone(), 1), ("d", seq(100 + id as u32), id)],
            )
            .await?;
            apply(&cfg, &l, &s, now, warm[round % 3]).await?;
            let want: Vec<i64> = (id + 1..=12).collect();
            assert_eq!(ids(&l).await?, want, "{backend:?} round {round}");
        }
        // Silver's versions 0..=7: no checkpoint version (9) yet, every tombstone pending.
        assert_eq!(silver_head(&l).await?.version(), Some(7));
        assert_eq!((anchor(&l).await?, tombstone_rows(&l).await?), (Some(0), 0));
        for id in 8..=9 {
            changes(&l, &[("d", seq(100 + id as u32), id)]).await?;
            apply(&cfg, &l, &s, now, Some(&a)).await?;
        }
        // Version 9 is checkpointed: its run consolidated versions 1..=9 (9 tombstones).
        assert_eq!(anchor(&l).await?, Some(9), "{backend:?}");
        assert_eq!(tombstone_rows(&l).await?, 9, "{backend:?}");
        // Every deleted key stays out, from the table now, by each kind of process.
        for (round, process) in warm.iter().enumerate() {
            let late: Vec<_> = (1..=9)
                .map(|id| ("u", seq(60 + round as u32), id))
                .collect();
            changes(&l, &late).await?;
            apply(&cfg, &l, &s, now, *process).await?;
            assert_eq!(ids(&l).await?, vec![10, 11, 12], "{backend:?} {round}");
        }

        // A delete today, the next run tomorrow: the pending tombstone is consolidated (dated
        // today), so the expiry sees it within a day.
        changes(&l, &[("d", seq(200), 10)]).await?;
        apply(&cfg, &l, &s, now, Some(&a)).await?;
        assert_eq!(tombstone_rows(&l).await?, 9);
        changes(&l, &[("u", seq(150), 10)]).await?;
        let tomorrow = now + chrono::Duration::days(1);
        apply(&cfg, &l, &s, tomorrow, Some(&b)).await?;
        assert_eq!(tombstone_rows(&l).await?, 10, "{backend:?}");
        assert_eq!(ids(&l).await?, vec![11, 12], "{backend:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_cleanup_keeps_the_commits_whose_tombstones_are_pending() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "tombstones-cleanup")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let now = chrono::Utc::now();
        changes(&l, &[("c", seq(1), 1), ("c", seq(2), 2), ("c", seq(3), 3)]).await?;
        apply(&cfg, &l, &s, now, None).await?;
        changes(&l, &[("d", seq(10), 2)]).await?;
        apply(&cfg, &l, &s, now, None).await?;
        changes(&l, &[("u", seq(11), 3)]).await?;
        apply(&cfg, &l, &s, now, None).await?;
        assert_eq!(anchor(&l).await?, Some(0));
        // 40 days on (past the 30-day log retention), a forced checkpoint at version 2 and
        // its log cleanup: commit 1 holds the pending tombstone and stays.
        let clock = FixedClock::new(now + chrono::Duration::days(40));
        let report = maintenance::checkpoint(&l, SILVER, true, &clock, &[]).await?;
        assert_eq!(report.checkpoint_version, Some(2), "{backend:?}");
        // A fresh process still keeps the late, older change out.
        changes(&l, &[("u", seq(9), 2)]).await?;
        apply(&cfg, &l, &s, now, None).await?;
        assert_eq!(ids(&l).await?, vec![1, 3], "{backend:?}");
        let head = silver_head(&l).await?;
        assert!(
            head.commit(1).await?.is_some(),
            "{backend:?}: commit 1 kept"
        );
        assert_eq!(report.kept_for_tombstones_from, Some(1), "{backend:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_applies_at_once_with_appends_beside_them_keep_every_tombstone() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "tombstones-race")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let now = chrono::Utc::now();
        let inserts: Vec<_> = (1..=40).map(|id| ("c", seq(id as u32), id)).collect();
        changes(&l, &inserts).await?;
        apply(&cfg, &l, &s, now, None).await?;
        let (a, b) = (WarmHandles::new(), WarmHandles::new());
        let mut deleted = 0;
        for round in 0..4u32 {
            // Deletes of 5 keys, then two applies and more deletes racing each other.
            let first: Vec<_> = (0..5)
                .map(|i| ("d", seq(1000 + round * 10 + i), (round * 10 + i + 1) as i64))
                .collect();
            changes(&l, &first).await?;
            let more: Vec<_> = (5..10)
                .map(|i| ("d", seq(1000 + round * 10 + i), (round * 10 + i + 1) as i64))
                .collect();
            let (x, y, z) = tokio::join!(
                apply(&cfg, &l, &s, now, Some(&a)),
                apply(&cfg, &l, &s, now, Some(&b)),
                changes(&l, &more),
            );
            deleted += x?.deleted + y?.deleted;
            z?;
            deleted += apply(&cfg, &l, &s, now, Some(&a)).await?.deleted;
        }
        assert_eq!(deleted, 40, "{backend:?}: every delete applied once");
        assert_eq!(ids(&l).await?, Vec::<i64>::new(), "{backend:?}");
        // Every key's older change, late: all stay out (pending or consolidated).
        let late: Vec<_> = (1..=40).map(|id| ("u", seq(500), id)).collect();
        changes(&l, &late).await?;
        apply(&cfg, &l, &s, now, Some(&b)).await?;
        assert_eq!(ids(&l).await?, Vec::<i64>::new(), "{backend:?}");
        let head = silver_head(&l).await?.version().context("silver")? as i64;
        let through = anchor(&l).await?.context("anchored")?;
        assert!(through <= head, "{backend:?}: {through} {head}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_too_large_to_go_inline_writes_the_table_first() -> Result<()> {
    let lake = TestLake::new(backends()[0], "tombstones-large")?;
    let cfg = config(&lake)?;
    let l = Lake::new(&cfg.lake)?;
    let s: CommitSettings = (&cfg.commit).into();
    let now = chrono::Utc::now();
    let n = 2_000;
    let inserts: Vec<_> = (1..=n).map(|id| ("c", seq(id as u32), id)).collect();
    changes(&l, &inserts).await.context("inserts")?;
    apply(&cfg, &l, &s, now, None)
        .await
        .context("insert apply")?;
    let deletes: Vec<_> = (1..=n)
        .map(|id| ("d", seq(10_000 + id as u32), id))
        .collect();
    changes(&l, &deletes).await.context("deletes")?;
    assert_eq!(
        apply(&cfg, &l, &s, now, None)
            .await
            .context("delete apply")?
            .deleted,
        n as usize
    );
    assert_eq!(tombstone_rows(&l).await?, n as usize);
    let head = silver_head(&l).await?;
    let c1 = head.commit(1).await?.context("commit 1")?;
    assert!(c1.info_field(COMMIT_INFO_KEY).is_none());
    let late: Vec<_> = (1..=n)
        .map(|id| ("u", seq(5_000 + id as u32), id))
        .collect();
    changes(&l, &late).await?;
    apply(&cfg, &l, &s, now, None).await?;
    assert_eq!(ids(&l).await?, Vec::<i64>::new());
    Ok(())
}
