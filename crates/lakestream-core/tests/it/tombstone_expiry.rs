//! Issue 37 (8): an SCD1 delete's tombstone expires after `tombstone_retention`, and a change
//! of the key older than the delete that arrives after that (a redrive, a connector re-reading
//! old offsets) must not bring the deleted key back. The expiry keeps the greatest `__seq` it
//! removed; an incremental run keeps out a change at or below it for a key with neither a row
//! nor a tombstone, counted as older. A new key above it is applied, and plain upserts keep
//! their documented behaviour. On every backend, with the run's clock moved past retention.

use anyhow::{Context, Result};
use chrono::{DateTime, Duration, Utc};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::keyed::tombstones::EXPIRED_THROUGH_PROPERTY;
use lakestream_core::refine::report::RunCounts;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::table::TableHandle;
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::cdc::{BronzeChange, append_bronze};
use lakestream_testkit::{TestLake, backends, strings};
use std::sync::Arc;

const BRONZE: &str = "bronze/crm/public/people";
const SILVER: &str = "silver/crm/public/people";

fn config(lake: &TestLake) -> Result<PipelineConfig> {
    config_scd(lake, 1)
}

fn config_scd(lake: &TestLake, scd: u8) -> Result<PipelineConfig> {
    Ok(lake.config_with(&format!(
        "[[refine]]\njob = \"people\"\noutput = \"{SILVER}\"\n[refine.cdc]\nsource = \"{BRONZE}\"\nkeys = [\"id\"]\nscd = {scd}\ntombstone_retention = \"30d\"\n"
    ))?)
}

async fn append(l: &Lake, changes: &[BronzeChange<'_>]) -> Result<u64> {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]));
    Ok(append_bronze(l, BRONZE, Some("id"), changes, &schema).await?)
}

/// One apply run at `now`; the keys it kept out as older.
async fn apply_at(cfg: &PipelineConfig, l: &Lake, now: DateTime<Utc>) -> Result<usize> {
    let s: CommitSettings = (&cfg.commit).into();
    let job = cfg.refine_job("people").context("job")?;
    let ctx = RunContext::new(cfg, l, &s, now);
    let report = run_job(&ctx, job, 1000).await?;
    Ok(report
        .runs
        .iter()
        .map(|r| match r.counts {
            RunCounts::Upsert(c) => c.older_ignored,
            _ => 0,
        })
        .sum())
}

/// Silver rows `id v __seq`, sorted.
async fn silver(l: &Lake) -> Result<Vec<String>> {
    let b = read::read_table(l, SILVER, None).await?;
    let (id, v, seq) = (strings(&b, "id")?, strings(&b, "v")?, strings(&b, "__seq")?);
    let mut rows: Vec<String> = (0..b.num_rows())
        .map(|i| {
            [&id[i], &v[i], &seq[i]]
                .map(|c| c.clone().unwrap_or_default())
                .join(" ")
        })
        .collect();
    rows.sort();
    Ok(rows)
}

/// When the runs that write tombstones run: 4 s into 2026-01-01, after the changes `s01`..`s03`
/// (the bronze helper commits `sNN` at second NN of 2026-01-01) and before `s05`.
fn writes_deletes_at() -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_225_604, 0).unwrap_or_default()
}

fn went_back(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<lakestream_core::Error>(),
        Some(lakestream_core::Error::PositionsWentBack { .. })
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_tombstone_never_brings_a_deleted_key_back() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "tombstone-expiry")?;
        let (cfg, l) = (config(&lake)?, lake.lake()?);
        let day0 = writes_deletes_at();
        append(&l, &[("c", "s01", r#"{"id":1,"v":"a"}"#)]).await?;
        apply_at(&cfg, &l, day0).await?;
        append(&l, &[("d", "s03", r#"{"id":1,"v":"a"}"#)]).await?;
        apply_at(&cfg, &l, day0).await?;
        assert!(silver(&l).await?.is_empty(), "{backend:?}");
        // 40 days later another change lands; the run's expiry removes the delete's tombstone.
        let day40 = day0 + Duration::days(40);
        append(&l, &[("c", "s05", r#"{"id":2,"v":"b"}"#)]).await?;
        apply_at(&cfg, &l, day40).await?;
        let tombs = TableHandle::open_existing(&l, "_lakestream/people/tombstones").await?;
        assert_eq!(
            tombs.property(EXPIRED_THROUGH_PROPERTY)?.as_deref(),
            Some("s03"),
            "{backend:?}"
        );
        // A change of key 1 older than its delete, redriven now: it stays out.
        append(&l, &[("u", "s02", r#"{"id":1,"v":"a-late"}"#)]).await?;
        let kept_out = apply_at(&cfg, &l, day40).await?;
        assert_eq!(kept_out, 1, "{backend:?}");
        assert_eq!(silver(&l).await?, ["2 b s05"], "{backend:?}");
        // A key inserted after the horizon, and key 1 inserted again later: applied.
        append(
            &l,
            &[
                ("c", "s06", r#"{"id":3,"v":"c"}"#),
                ("c", "s07", r#"{"id":1,"v":"again"}"#),
            ],
        )
        .await?;
        assert_eq!(apply_at(&cfg, &l, day40).await?, 0, "{backend:?}");
        assert_eq!(
            silver(&l).await?,
            ["1 again s07", "2 b s05", "3 c s06"],
            "{backend:?}"
        );
    }
    Ok(())
}

/// Review of issue 37: after an undeclared restart of the source's positions, a change that
/// sorts below a tombstone or the expiry horizon but was committed after it was written is not
/// dropped as older: the run stops with `PositionsWentBack`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_committed_after_a_delete_but_ranked_below_it_stops_the_run() -> Result<()> {
    for backend in backends() {
        for expired in [false, true] {
            let lake = TestLake::new(backend, &format!("tombstone-went-back-{expired}"))?;
            let (cfg, l) = (config(&lake)?, lake.lake()?);
            let day0 = writes_deletes_at();
            append(&l, &[("c", "s01", r#"{"id":1,"v":"a"}"#)]).await?;
            apply_at(&cfg, &l, day0).await?;
            append(&l, &[("d", "s03", r#"{"id":1,"v":"a"}"#)]).await?;
            apply_at(&cfg, &l, day0).await?;
            let now = if expired {
                let day40 = day0 + Duration::days(40);
                append(&l, &[("c", "s05", r#"{"id":2,"v":"b"}"#)]).await?;
                apply_at(&cfg, &l, day40).await?;
                day40
            } else {
                day0
            };
            // `s025` sorts below the delete `s03` but was committed at second 25, after the
            // delete's tombstone was written (second 4): key 1 re-inserted (tombstone live), or
            // a new key 4 (tombstone expired).
            let id = if expired { 4 } else { 1 };
            let row = format!(r#"{{"id":{id},"v":"after-restart"}}"#);
            append(&l, &[("c", "s025", row.as_str())]).await?;
            let e = apply_at(&cfg, &l, now).await.err();
            assert!(
                e.as_ref().is_some_and(went_back),
                "{backend:?} expired {expired}: {e:?}"
            );
        }
    }
    Ok(())
}

/// Review of issue 37: a truncate applied before an undeclared restart would void every later
/// change ranked below it; one committed after the truncate stops the run instead (SCD1, whose
/// silver records the truncate's time, and SCD2, whose side table does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_committed_after_a_truncate_but_ranked_below_it_stops_the_run() -> Result<()> {
    for backend in backends() {
        for scd in [1u8, 2] {
            let lake = TestLake::new(backend, &format!("truncate-went-back-{scd}"))?;
            let (cfg, l) = (config_scd(&lake, scd)?, lake.lake()?);
            let now = writes_deletes_at();
            append(&l, &[("c", "s01", r#"{"id":1,"v":"a"}"#)]).await?;
            append(&l, &[("t", "s05", "{}")]).await?;
            apply_at(&cfg, &l, now).await?;
            // `s0400` sorts below `s05` and was committed at second 400, after the truncate.
            append(&l, &[("c", "s0400", r#"{"id":2,"v":"after-restart"}"#)]).await?;
            let e = apply_at(&cfg, &l, now).await.err();
            assert!(
                e.as_ref().is_some_and(went_back),
                "{backend:?} scd{scd}: {e:?}"
            );
        }
    }
    Ok(())
}

/// Second review: tombstones are compared by the delete's own commit time, not by when the run
/// that wrote them started (one invocation's clock, often before the delete committed): a
/// re-sent change older than a delete applied in that invocation stays out without a stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_change_below_a_delete_is_not_a_restart_whenever_the_run_started() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "tombstone-resent")?;
        let (cfg, l) = (config(&lake)?, lake.lake()?);
        // The invocation started at second 1; the changes commit at seconds 4 and 5.
        let started = DateTime::from_timestamp(1_767_225_601, 0).unwrap_or_default();
        append(&l, &[("c", "s04", r#"{"id":1,"v":"a"}"#)]).await?;
        apply_at(&cfg, &l, started).await?;
        append(&l, &[("d", "s05", r#"{"id":1,"v":"a"}"#)]).await?;
        apply_at(&cfg, &l, started).await?;
        append(&l, &[("c", "s04", r#"{"id":1,"v":"a"}"#)]).await?;
        assert_eq!(apply_at(&cfg, &l, started).await?, 1, "{backend:?}");
        assert!(silver(&l).await?.is_empty(), "{backend:?}");
    }
    Ok(())
}

/// The `__op` of every row of the job's side table, sorted.
async fn side_ops(l: &Lake) -> Result<Vec<String>> {
    let b = read::read_table(l, "_lakestream/people/tombstones", None).await?;
    let mut ops: Vec<String> = strings(&b, "__op")?.into_iter().flatten().collect();
    ops.sort();
    Ok(ops)
}

/// Issue 38 (13): an SCD2 job's side table kept every delete that closed nothing (deletes of
/// keys it never saw) for good, and was read whole on every run. Its deletes now expire with
/// `tombstone_retention`, recording the horizon; its truncates stay; a change of the expired
/// delete's key older than it, redriven after, stays out instead of opening a version of a
/// deleted key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_scd2_side_table_keeps_its_deletes_for_the_retention_only() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "scd2-side-expiry")?;
        let (cfg, l) = (config_scd(&lake, 2)?, lake.lake()?);
        let day0 = writes_deletes_at();
        // A truncate, a key that stays, then a delete of a key silver never saw: the truncate
        // and the delete are stored.
        append(&l, &[("t", "s01", "{}")]).await?;
        append(&l, &[("c", "s02", r#"{"id":4,"v":"d"}"#)]).await?;
        append(&l, &[("d", "s03", r#"{"id":1,"v":"a"}"#)]).await?;
        apply_at(&cfg, &l, day0).await?;
        assert_eq!(side_ops(&l).await?, ["d", "t"], "{backend:?}");
        // 40 days later another change lands; the run's expiry removes the stored delete.
        let day40 = day0 + Duration::days(40);
        append(&l, &[("c", "s05", r#"{"id":2,"v":"b"}"#)]).await?;
        apply_at(&cfg, &l, day40).await?;
        assert_eq!(side_ops(&l).await?, ["t"], "{backend:?}");
        let tombs = TableHandle::open_existing(&l, "_lakestream/people/tombstones").await?;
        assert_eq!(
            tombs.property(EXPIRED_THROUGH_PROPERTY)?.as_deref(),
            Some("s03"),
            "{backend:?}"
        );
        // A change of key 1 older than its delete, redriven now: it stays out.
        append(&l, &[("u", "s02", r#"{"id":1,"v":"a-late"}"#)]).await?;
        assert_eq!(apply_at(&cfg, &l, day40).await?, 1, "{backend:?}");
        assert_eq!(silver(&l).await?, ["2 b s05", "4 d s02"], "{backend:?}");
        // Key 1 inserted again after the horizon: a version.
        append(&l, &[("c", "s07", r#"{"id":1,"v":"again"}"#)]).await?;
        assert_eq!(apply_at(&cfg, &l, day40).await?, 0, "{backend:?}");
        assert_eq!(
            silver(&l).await?,
            ["1 again s07", "2 b s05", "4 d s02"],
            "{backend:?}"
        );
        // A year on, the truncate is still stored.
        append(&l, &[("c", "s08", r#"{"id":3,"v":"c"}"#)]).await?;
        apply_at(&cfg, &l, day0 + Duration::days(400)).await?;
        assert_eq!(side_ops(&l).await?, ["t"], "{backend:?}");
        // Review: a rebuild reads all of bronze (the expired delete too), so the horizon keeps
        // nothing out: key 1's late change is closed by its delete again, as before expiry.
        let s: CommitSettings = (&cfg.commit).into();
        let job = cfg.refine_job("people").context("job")?;
        let ctx = RunContext::new(&cfg, &l, &s, day0 + Duration::days(400));
        lakestream_core::refine::rebuild(&ctx, job).await?;
        let before_rebuild = ["1 again s07", "2 b s05", "3 c s08", "4 d s02"];
        assert_eq!(
            apply_at(&cfg, &l, day0 + Duration::days(400)).await?,
            0,
            "{backend:?}"
        );
        let mut rebuilt = silver(&l).await?;
        rebuilt.retain(|r| !r.starts_with("1 a-late"));
        assert_eq!(rebuilt, before_rebuild, "{backend:?}");
    }
    Ok(())
}

/// Review of issue 38: side tables written before truncates were kept apart hold them in dated
/// partitions. Expiry stores them again (they are never forgotten) and leaves them out of the
/// horizon, which only forgotten deletes set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_side_tables_dated_truncates_survive_expiry_and_set_no_horizon() -> Result<()> {
    use deltalake::arrow::array::TimestampMicrosecondArray;
    use deltalake::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    for backend in backends() {
        let lake = TestLake::new(backend, "scd2-side-dated-truncate")?;
        let (cfg, l) = (config_scd(&lake, 2)?, lake.lake()?);
        let day0 = writes_deletes_at();
        append(&l, &[("d", "s03", r#"{"id":1,"v":"a"}"#)]).await?;
        apply_at(&cfg, &l, day0).await?;
        // A truncate stored the old way: in the day's partition.
        let columns = ["id", "__seq", "__at", "__op"].map(String::from);
        let at =
            TimestampMicrosecondArray::from(vec![Some(1_767_225_604_000_000)]).with_timezone("UTC");
        let row = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from(vec![None::<i64>])) as ArrayRef,
            ),
            (
                "__seq",
                Arc::new(StringArray::from(vec!["s04"])) as ArrayRef,
            ),
            ("__at", Arc::new(at) as ArrayRef),
            ("__op", Arc::new(StringArray::from(vec!["t"])) as ArrayRef),
        ])?;
        let s: CommitSettings = (&cfg.commit).into();
        let tombs = "_lakestream/people/tombstones";
        let ties = vec!["s04".to_string()];
        lakestream_core::refine::keyed::tombstones::write(
            &l, tombs, &s, &row, &columns, ties, day0,
        )
        .await?;
        assert_eq!(side_ops(&l).await?, ["d", "t"], "{backend:?}");
        let day40 = day0 + Duration::days(40);
        append(&l, &[("c", "s05", r#"{"id":2,"v":"b"}"#)]).await?;
        apply_at(&cfg, &l, day40).await?;
        assert_eq!(side_ops(&l).await?, ["t"], "{backend:?}");
        let tombs = TableHandle::open_existing(&l, tombs).await?;
        assert_eq!(
            tombs.property(EXPIRED_THROUGH_PROPERTY)?.as_deref(),
            Some("s03"),
            "{backend:?}"
        );
    }
    Ok(())
}
