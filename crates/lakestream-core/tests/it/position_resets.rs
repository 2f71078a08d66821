//! Issue 37 (7): a MySQL binlog restart (`RESET MASTER`, a fail-over to a server with its own
//! binlog) starts the source positions again. A change after it ranks below the changes before
//! it by position, but was committed later: the apply stops with `PositionsWentBack` (SCD1 and
//! SCD2, the change in a later run or in the same run as the older one) instead of dropping it
//! as older, and applies it once the family lists the restart in `position_resets`. Real
//! Debezium MySQL payloads, through the Kafka ingest into bronze, on every backend.

use anyhow::{Context, Result};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::cdc::family::all_jobs;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::{Error, Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{TestLake, backends, example_config_with, strings};

macro_rules! fx {
    ($name:literal) => {
        include_bytes!(concat!("../../../../tests/fixtures/debezium/", $name)).as_slice()
    };
}

const TOPIC: &str = "crm.inventory.products";
const JOB: &str = "cdc-crm/inventory.products";
const SILVER: &str = "silver/crm/inventory/products";

/// The family; `resets`: its `position_resets` line (or nothing).
fn family(scd: u8, resets: &str) -> String {
    format!(
        "[[cdc]]\nfamily = \"crm\"\nsource = \"debezium\"\ntopics = [\"crm.inventory.*\"]\nscd = {scd}\n{resets}\n"
    )
}

/// A lake whose ingestor has the family (without resets).
fn lake(b: lakestream_testkit::Backend, name: &str, scd: u8) -> Result<TestLake> {
    Ok(TestLake::with_config(
        b,
        name,
        example_config_with(&family(scd, ""))?,
    )?)
}

fn config(lake: &TestLake, scd: u8, resets: &str) -> Result<PipelineConfig> {
    Ok(lake.config_with(&family(scd, resets))?)
}

fn rec(offset: i64, value: &[u8]) -> SourceRecord {
    SourceRecord::new(TOPIC, 0, offset, 1_764_412_400_000, value)
        .with_key(fx!("mysql_products_101.key.json"))
}

/// A change of product 102.
fn rec_102(offset: i64, value: &[u8]) -> SourceRecord {
    SourceRecord::new(TOPIC, 0, offset, 1_764_412_400_000, value)
        .with_key(fx!("mysql_products_102.key.json"))
}

/// After `RESET MASTER`, before 101's change: product 102 created and updated in file 1.
fn new_key_after_restart() -> Vec<SourceRecord> {
    vec![
        rec_102(12, fx!("mysql_products_102_c_after_reset.json")),
        rec_102(13, fx!("mysql_products_102_u_after_reset.json")),
    ]
}

/// Before the restart: created in binlog file 3, updated in file 4 (ts 1764412900).
fn before_restart() -> Vec<SourceRecord> {
    vec![
        rec(10, fx!("mysql_products_c.json")),
        rec(11, fx!("mysql_products_u_rollover.json")),
    ]
}

/// After `RESET MASTER`: binlog file 1 again, committed at 10:53:20 (11 min 40 s after 101's
/// last change).
fn after_restart() -> Vec<SourceRecord> {
    vec![rec(14, fx!("mysql_products_u_after_reset.json"))]
}

async fn apply(cfg: &PipelineConfig, l: &Lake) -> lakestream_core::Result<()> {
    let s: CommitSettings = (&cfg.commit).into();
    let jobs = all_jobs(l, cfg).await?;
    let job = jobs
        .iter()
        .find(|j| j.job == JOB)
        .ok_or_else(|| Error::Config(format!("no job {JOB}")))?;
    let ctx = RunContext::new(cfg, l, &s, chrono::Utc::now());
    run_job(&ctx, job, 100).await?;
    Ok(())
}

/// The current weight of product 101 (SCD2: the open version's).
async fn weight(l: &Lake, scd: u8) -> Result<Vec<String>> {
    weight_of(l, scd, "101").await
}

/// The current weight of product `id` (SCD2: the open version's).
async fn weight_of(l: &Lake, scd: u8, id: &str) -> Result<Vec<String>> {
    let b = read::read_table(l, SILVER, None).await?;
    let ids = strings(&b, "id")?;
    let w = strings(&b, "weight")?;
    let open: Vec<bool> = if scd == 2 {
        strings(&b, "__END_SEQ")?
            .iter()
            .map(Option::is_none)
            .collect()
    } else {
        vec![true; b.num_rows()]
    };
    Ok((0..b.num_rows())
        .filter(|i| open[*i] && ids[*i].as_deref() == Some(id))
        .map(|i| w[i].clone().unwrap_or_default())
        .collect())
}

fn went_back(e: &lakestream_core::Error) -> bool {
    matches!(e, Error::PositionsWentBack { .. })
        && e.to_string().contains("position_resets")
        && e.to_string().contains("committed 2025-11-29T10:53:20")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_after_a_binlog_restart_stops_the_job_until_the_reset_is_declared() -> Result<()> {
    for b in backends() {
        for scd in [1u8, 2] {
            for same_run in [false, true] {
                let lake = lake(b, &format!("resets-{scd}-{same_run}"), scd)?;
                let cfg = config(&lake, scd, "")?;
                let l = Lake::new(&cfg.lake)?;
                let ing = lake.ingestor()?;
                ing.ingest(&before_restart()).await?;
                if !same_run {
                    apply(&cfg, &l).await?;
                    assert_eq!(weight(&l, scd).await?, ["3.5"], "{b:?} scd{scd}");
                }
                // Product 102 is created and updated after the restart: no earlier change of
                // it, so nothing proves the restart yet and (in its own run) it applies.
                ing.ingest(&new_key_after_restart()).await?;
                if !same_run {
                    apply(&cfg, &l).await?;
                    assert_eq!(weight_of(&l, scd, "102").await?, ["1.5"], "{b:?} scd{scd}");
                }
                ing.ingest(&after_restart()).await?;
                let e = apply(&cfg, &l).await.err().context("the apply must stop")?;
                assert!(went_back(&e), "{b:?} scd{scd} same run {same_run}: {e}");
                // Declared: the restart happened between the two commits. Silver is rebuilt
                // from bronze with the new ranks (102's rows were applied unranked).
                let cfg = config(&lake, scd, "position_resets = [\"2025-11-29T10:50:00Z\"]")?;
                apply(&cfg, &l).await?;
                let want = |w: &str| vec![w.to_string()];
                assert_eq!(
                    weight(&l, scd).await?,
                    want("3.75"),
                    "{b:?} scd{scd} same run {same_run}"
                );
                assert_eq!(
                    weight_of(&l, scd, "102").await?,
                    want("1.5"),
                    "{b:?} scd{scd}"
                );
                let h = lakestream_core::table::TableHandle::open_existing(&l, SILVER).await?;
                assert!(
                    h.property("lakestream.cdc.position_resets")?.is_some(),
                    "{b:?} scd{scd}: silver records the resets it was ranked with"
                );
                // Redeliveries: 101's change from before the restart stays older; 102's create,
                // re-emitted after the reset was declared, does not pass its update.
                ing.ingest(&[
                    rec(15, fx!("mysql_products_u_rollover.json")),
                    rec_102(16, fx!("mysql_products_102_c_after_reset.json")),
                ])
                .await?;
                apply(&cfg, &l).await?;
                assert_eq!(weight(&l, scd).await?, want("3.75"), "{b:?} scd{scd}");
                assert_eq!(
                    weight_of(&l, scd, "102").await?,
                    want("1.5"),
                    "{b:?} scd{scd}"
                );
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_older_change_and_a_snapshot_row_are_not_a_restart() -> Result<()> {
    for b in backends() {
        let lake = lake(b, "resets-late", 1)?;
        let cfg = config(&lake, 1, "")?;
        let l = Lake::new(&cfg.lake)?;
        let ing = lake.ingestor()?;
        // The file-4 update first, then the file-3 create late: older by position and time.
        ing.ingest(&[rec(11, fx!("mysql_products_u_rollover.json"))])
            .await?;
        apply(&cfg, &l).await?;
        ing.ingest(&[rec(10, fx!("mysql_products_c.json"))]).await?;
        apply(&cfg, &l).await?;
        assert_eq!(weight(&l, 1).await?, ["3.5"], "{b:?}");
        // A snapshot row at the snapshot's (lower) position, read after both commits: older.
        ing.ingest(&[rec(14, fx!("mysql_products_r_read_late.json"))])
            .await?;
        apply(&cfg, &l).await?;
        assert_eq!(weight(&l, 1).await?, ["3.5"], "{b:?}");
    }
    Ok(())
}
