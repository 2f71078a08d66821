//! Issue 37 (4): a CDC apply over its bronze table's whole life, on fs and the S3 emulator. A
//! silver created (or rebuilt) after bronze's early log was cleaned starts from bronze's
//! snapshot and continues incrementally; `rebuild` empties silver and its next run builds it
//! again, also racing an apply and appends; a DELETE on bronze by another engine (a GDPR
//! erasure) makes the job rebuild silver from what bronze holds now instead of stopping.

use super::another_engine::delete_where;
use anyhow::{Context, Result};
use deltalake::arrow::array::{AsArray, BooleanArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use deltalake::logstore::object_store::{ObjectStoreExt, path::Path};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{RunContext, rebuild, run_job, void_truncate};
use lakestream_core::table::{TableHandle, WarmHandles};
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::cdc::{BronzeChange, append_bronze};
use lakestream_testkit::{TestLake, backends, strings};
use std::sync::Arc;

const BRONZE: &str = "bronze/crm/public/people";
const SILVER: &str = "silver/crm/public/people";

fn config(lake: &TestLake, scd: u8) -> Result<PipelineConfig> {
    Ok(lake.config_with(&format!(
        r#"
[[refine]]
job = "people"
output = "{SILVER}"
[refine.cdc]
source = "{BRONZE}"
keys = ["id"]
scd = {scd}
"#
    ))?)
}

fn rows_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]))
}

async fn append(l: &Lake, changes: &[BronzeChange<'_>]) -> Result<u64> {
    Ok(append_bronze(l, BRONZE, Some("id"), changes, &rows_schema()).await?)
}

/// Silver rows: SCD1 `id v __seq`, SCD2 `id v __seq __END_SEQ` (`-` for null), sorted.
async fn silver(l: &Lake, scd: u8) -> Result<Vec<String>> {
    let b = read::read_table(l, SILVER, None).await?;
    let mut cols = vec![strings(&b, "id")?, strings(&b, "v")?, strings(&b, "__seq")?];
    if scd == 2 {
        cols.push(strings(&b, "__END_SEQ")?);
    }
    let mut rows: Vec<String> = (0..b.num_rows())
        .map(|i| {
            cols.iter()
                .map(|c| c[i].clone().unwrap_or_else(|| "-".into()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    rows.sort();
    Ok(rows)
}

async fn apply(cfg: &PipelineConfig, l: &Lake, s: &CommitSettings) -> Result<()> {
    let job = cfg.refine_job("people").context("job")?;
    let ctx = RunContext::new(cfg, l, s, chrono::Utc::now());
    run_job(&ctx, job, 1000).await?;
    Ok(())
}

async fn reset(cfg: &PipelineConfig, l: &Lake, s: &CommitSettings) -> Result<Option<u64>> {
    let job = cfg.refine_job("people").context("job")?;
    let ctx = RunContext::new(cfg, l, s, chrono::Utc::now());
    Ok(rebuild(&ctx, job).await?)
}

/// Bronze's commits `0..=upto` removed after a checkpoint at the latest version: what log
/// cleanup leaves after 30 days.
async fn clean_log(l: &Lake, upto: u64) -> Result<()> {
    let mut h = TableHandle::open(l, BRONZE)?;
    h.refresh().await?;
    h.create_checkpoint().await?;
    let store = h.object_store();
    for v in 0..=upto {
        store
            .delete(&Path::from(format!("_delta_log/{v:020}.json")))
            .await?;
    }
    Ok(())
}

/// What the history below leaves in silver, per SCD type.
fn want(scd: u8, with_3: bool) -> Vec<String> {
    let mut rows: Vec<&str> = if scd == 1 {
        vec!["1 a2 s03"]
    } else {
        vec!["1 a s01 s03", "1 a2 s03 -", "2 b s02 s04"]
    };
    if with_3 {
        rows.push(if scd == 1 { "3 c s05" } else { "3 c s05 -" });
    }
    let mut rows: Vec<String> = rows.into_iter().map(String::from).collect();
    rows.sort();
    rows
}

async fn history(l: &Lake) -> Result<u64> {
    append(
        l,
        &[
            ("c", "s01", r#"{"id":1,"v":"a"}"#),
            ("c", "s02", r#"{"id":2,"v":"b"}"#),
        ],
    )
    .await?;
    append(l, &[("u", "s03", r#"{"id":1,"v":"a2"}"#)]).await?;
    append(l, &[("d", "s04", r#"{"id":2,"v":"b"}"#)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silver_created_after_bronze_log_cleanup_starts_from_its_snapshot() -> Result<()> {
    for backend in backends() {
        for scd in [1u8, 2] {
            let lake = TestLake::new(backend, &format!("cdc-recovery-log-{scd}"))?;
            let (cfg, l) = (config(&lake, scd)?, lake.lake()?);
            let s: CommitSettings = (&cfg.commit).into();
            let last = history(&l).await?;
            clean_log(&l, last - 1).await?;
            apply(&cfg, &l, &s).await?;
            assert_eq!(
                silver(&l, scd).await?,
                want(scd, false),
                "{backend:?} scd{scd}"
            );
            // Then incrementally, from the snapshot's version.
            append(&l, &[("c", "s05", r#"{"id":3,"v":"c"}"#)]).await?;
            apply(&cfg, &l, &s).await?;
            assert_eq!(
                silver(&l, scd).await?,
                want(scd, true),
                "{backend:?} scd{scd}"
            );
            // A rebuild after the cleanup gives the same silver again.
            let reset_at = reset(&cfg, &l, &s).await?.context("silver exists")?;
            assert!(
                silver(&l, scd).await?.is_empty(),
                "the reset empties silver"
            );
            apply(&cfg, &l, &s).await?;
            assert_eq!(
                silver(&l, scd).await?,
                want(scd, true),
                "{backend:?} scd{scd}"
            );
            let h = TableHandle::open_existing(&l, SILVER).await?;
            assert!(
                h.version() > Some(reset_at),
                "the rebuild committed after the reset"
            );
        }
    }
    Ok(())
}

/// Rows of `id` 2 doomed: every change of that key erased.
fn key_2(batch: &deltalake::arrow::array::RecordBatch) -> Result<BooleanArray> {
    let id = cast(batch.column_by_name("id").context("id")?, &DataType::Int64)?;
    Ok(id
        .as_primitive::<Int64Type>()
        .iter()
        .map(|v| Some(v == Some(2)))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_on_bronze_by_another_engine_rebuilds_silver() -> Result<()> {
    for backend in backends() {
        for scd in [1u8, 2] {
            let lake = TestLake::new(backend, &format!("cdc-recovery-erase-{scd}"))?;
            let (cfg, l) = (config(&lake, scd)?, lake.lake()?);
            let s: CommitSettings = (&cfg.commit).into();
            history(&l).await?;
            append(&l, &[("c", "s05", r#"{"id":2,"v":"back"}"#)]).await?;
            apply(&cfg, &l, &s).await?;
            assert!(silver(&l, scd).await?.iter().any(|r| r.starts_with("2 ")));
            // A GDPR erasure of key 2 in bronze, then more changes.
            delete_where(&l, BRONZE, key_2).await?;
            append(&l, &[("c", "s06", r#"{"id":3,"v":"c"}"#)]).await?;
            apply(&cfg, &l, &s).await?;
            let mut want: Vec<String> = if scd == 1 {
                vec!["1 a2 s03".into(), "3 c s06".into()]
            } else {
                vec![
                    "1 a s01 s03".into(),
                    "1 a2 s03 -".into(),
                    "3 c s06 -".into(),
                ]
            };
            want.sort();
            assert_eq!(silver(&l, scd).await?, want, "{backend:?} scd{scd}");
            // The job goes on incrementally afterwards.
            append(&l, &[("u", "s07", r#"{"id":3,"v":"c2"}"#)]).await?;
            apply(&cfg, &l, &s).await?;
            let rows = silver(&l, scd).await?;
            assert!(rows.iter().any(|r| r.starts_with("3 c2 s07")), "{rows:?}");
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_racing_an_apply_and_appends_loses_and_repeats_nothing() -> Result<()> {
    for backend in backends() {
        for scd in [1u8, 2] {
            let lake = TestLake::new(backend, &format!("cdc-recovery-race-{scd}"))?;
            let (cfg, l) = (config(&lake, scd)?, lake.lake()?);
            let s: CommitSettings = (&cfg.commit).into();
            history(&l).await?;
            apply(&cfg, &l, &s).await?;
            let (a, b, c) = tokio::join!(
                reset(&cfg, &l, &s),
                apply(&cfg, &l, &s),
                append(&l, &[("c", "s05", r#"{"id":3,"v":"c"}"#)]),
            );
            a?;
            b?;
            c?;
            apply(&cfg, &l, &s).await?;
            assert_eq!(
                silver(&l, scd).await?,
                want(scd, true),
                "{backend:?} scd{scd}"
            );
        }
    }
    Ok(())
}

/// Issue 38 (5): a truncate whose position is above every real one (forged, or a connector
/// bug) voids every later change of the table: silver stays empty. An operator voids it
/// (`--void-truncate SEQ`): silver is rebuilt with every change it had voided, and the
/// truncate stays void when it is delivered again (SCD1 and SCD2; SCD2's side table stored it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_voids_a_forged_truncate_and_silver_comes_back() -> Result<()> {
    for backend in backends() {
        for scd in [1u8, 2] {
            let lake = TestLake::new(backend, &format!("void-truncate-{scd}"))?;
            let (cfg, l) = (config(&lake, scd)?, lake.lake()?);
            let s: CommitSettings = (&cfg.commit).into();
            append(&l, &[("c", "s01", r#"{"id":1,"v":"a"}"#)]).await?;
            // The forged truncate ranks above everything the source will send.
            append(&l, &[("t", "s99", "{}")]).await?;
            append(&l, &[("c", "s05", r#"{"id":2,"v":"b"}"#)]).await?;
            apply(&cfg, &l, &s).await?;
            let voided_now = silver(&l, scd).await?;
            assert!(
                voided_now.iter().all(|r| scd == 2 && !r.ends_with(" -")),
                "{backend:?} scd{scd}: the truncate should have voided every row: {voided_now:?}"
            );
            let job = cfg.refine_job("people").context("job")?;
            let ctx = RunContext::new(&cfg, &l, &s, chrono::Utc::now());
            void_truncate(&ctx, job, "s99").await?;
            append(&l, &[("u", "s06", r#"{"id":1,"v":"a2"}"#)]).await?;
            apply(&cfg, &l, &s).await?;
            let want: &[&str] = match scd {
                1 => &["1 a2 s06", "2 b s05"],
                _ => &["1 a s01 s06", "1 a2 s06 -", "2 b s05 -"],
            };
            assert_eq!(silver(&l, scd).await?, want, "{backend:?} scd{scd}");
            // Delivered again (a redrive): still void.
            append(&l, &[("t", "s99", "{}")]).await?;
            apply(&cfg, &l, &s).await?;
            assert_eq!(silver(&l, scd).await?, want, "{backend:?} scd{scd}");
            // An empty SEQ, or one bronze has no truncate at, is refused and changes nothing.
            let e = void_truncate(&ctx, job, "").await.err();
            assert!(e.is_some(), "{backend:?}: an empty SEQ is refused");
            let version = TableHandle::open_existing(&l, SILVER).await?.version();
            let e = void_truncate(&ctx, job, "s05")
                .await
                .err()
                .map(|e| e.to_string());
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("holds no truncate")),
                "{backend:?}: {e:?}"
            );
            let after = TableHandle::open_existing(&l, SILVER).await?.version();
            assert_eq!(version, after, "{backend:?}: a refused void changed silver");
        }
    }
    Ok(())
}

/// The refine function loads a job's sources once per invocation, before its runs. A rebuild
/// in that invocation (after a `position_resets` change) after another instance applied newer
/// bronze versions reads bronze at least where silver was: the rebuilt silver never goes back
/// (it did: rebuilt from the older snapshot, the run after it found nothing new).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_reads_bronze_at_least_where_silver_was() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "rebuild-at-least")?;
        let l = Lake::new(&lake.config.lake)?;
        let cfg = config(&lake, 1)?;
        let s: CommitSettings = (&cfg.commit).into();
        append(&l, &[("c", "s01", r#"{"id":1,"v":"a"}"#)]).await?;
        apply(&cfg, &l, &s).await?;
        let warm = WarmHandles::new();
        let job = cfg.refine_job("people").context("job")?;
        let ctx = RunContext::new(&cfg, &l, &s, chrono::Utc::now()).with_warm(&warm);
        ctx.load_source(BRONZE).await?;
        // Meanwhile another instance applies a newer bronze version.
        append(&l, &[("c", "s02", r#"{"id":2,"v":"b"}"#)]).await?;
        apply(&cfg, &l, &s).await?;
        let both = ["1 a s01", "2 b s02"];
        assert_eq!(silver(&l, 1).await?, both, "{backend:?}");
        rebuild(&ctx, job).await?;
        run_job(&ctx, job, 10).await?;
        assert_eq!(silver(&l, 1).await?, both, "{backend:?}: silver went back");
    }
    Ok(())
}
