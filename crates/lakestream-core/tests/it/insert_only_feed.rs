//! Issue 39: a CDC apply that only inserts (new keys, no silver file rewritten) writes no
//! `_change_data/` file (one PUT fewer): the Delta protocol has a reader of the feed derive a
//! version without `cdc` actions from its adds. SCD1 and SCD2, on every backend: the log of
//! each apply is read back (a `cdc` action or none), and the feed as `lakestream changes`
//! reads it holds every change with its type either way. The independent reader (Python
//! `deltalake`'s `load_cdf`) reads the same feeds in `tests/e2e/test_cdc_reference.py`.

use anyhow::{Context, Result};
use deltalake::Path;
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::logstore::object_store::ObjectStoreExt;
use lakestream_core::Lake;
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::table::TableHandle;
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::cdc::{BronzeChange, append_bronze};
use lakestream_testkit::{TestLake, backends, strings};
use std::sync::Arc;

const BRONZE: &str = "bronze/crm/public/items";
const SILVER: &str = "silver/crm/public/items";

fn config(lake: &TestLake, scd: u8) -> Result<PipelineConfig> {
    let job = format!(
        "[[refine]]\njob = \"items\"\noutput = \"{SILVER}\"\n[refine.cdc]\nsource = \"{BRONZE}\"\n\
         keys = [\"id\"]\nscd = {scd}\n"
    );
    let mut cfg = PipelineConfig::from_toml(&format!("{}\n{job}", lakestream_testkit::EXAMPLE))?;
    cfg.lake = lake.config.lake.clone();
    cfg.commit = lake.config.commit.clone();
    Ok(cfg)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]))
}

/// Append `changes` to bronze, apply, and return silver's new version, whether its commit has
/// a `cdc` action, and its feed rows ("id v _change_type", sorted).
async fn step(
    cfg: &PipelineConfig,
    l: &Lake,
    changes: &[BronzeChange<'_>],
) -> Result<(u64, bool, Vec<String>)> {
    append_bronze(l, BRONZE, None, changes, &schema()).await?;
    let s: CommitSettings = (&cfg.commit).into();
    let ctx = RunContext::new(cfg, l, &s, chrono::Utc::now());
    let report = run_job(&ctx, cfg.refine_job("items").context("job")?, 1000).await?;
    let v = report
        .runs
        .iter()
        .filter_map(|r| r.output_version)
        .max()
        .context("the apply committed")?;
    let h = TableHandle::open_existing(l, SILVER).await?;
    let log = h
        .object_store()
        .get(&Path::from(format!("_delta_log/{v:020}.json")))
        .await?
        .bytes()
        .await?;
    let has_cdc = String::from_utf8_lossy(&log).contains(r#"{"cdc":"#);
    let feed = lakestream_core::inspect::changes(l, SILVER, v, Some(v)).await?;
    let b = &feed.rows;
    let [id, val, kind] = ["id", "v", "_change_type"].map(|n| strings(b, n));
    let (id, val, kind) = (id?, val?, kind?);
    let g = |c: &Vec<Option<String>>, i: usize| c[i].clone().unwrap_or_else(|| "-".into());
    let mut rows: Vec<String> = (0..b.num_rows())
        .map(|i| format!("{} {} {}", g(&id, i), g(&val, i), g(&kind, i)))
        .collect();
    rows.sort();
    Ok((v, has_cdc, rows))
}

fn row(id: i64, v: &str) -> String {
    format!(r#"{{"id":{id},"v":"{v}"}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_that_only_inserts_writes_no_change_data_file() -> Result<()> {
    for backend in backends() {
        for scd in [1u8, 2] {
            let lake = TestLake::new(backend, &format!("insert-only-feed-{scd}"))?;
            let cfg = config(&lake, scd)?;
            let l = Lake::new(&cfg.lake)?;
            let at = format!("{backend:?} scd{scd}");
            let (r1, r2, r3, r4) = (row(1, "a"), row(2, "b"), row(3, "c"), row(1, "a2"));
            // Silver's first commit: inserts only.
            let (v0, cdc, feed) =
                step(&cfg, &l, &[("c", "s01", r1.as_str()), ("c", "s02", &r2)]).await?;
            assert!(!cdc, "{at}: version {v0} wrote change data");
            assert_eq!(feed, ["1 a insert", "2 b insert"], "{at}");
            // A new key into an existing silver: inserts only again.
            let (v1, cdc, feed) = step(&cfg, &l, &[("c", "s03", r3.as_str())]).await?;
            assert!(!cdc, "{at}: version {v1} wrote change data");
            assert_eq!(feed, ["3 c insert"], "{at}");
            // An update rewrites 1's file: the feed needs its file (pre and post images, and
            // no row of the rewritten file's other keys).
            let (v2, cdc, feed) = step(&cfg, &l, &[("u", "s04", r4.as_str())]).await?;
            assert!(cdc, "{at}: version {v2} has no change data");
            if scd == 1 {
                assert_eq!(
                    feed,
                    ["1 a update_preimage", "1 a2 update_postimage"],
                    "{at}"
                );
            } else {
                // SCD2: 1's open version closed and its new one opened; no other key.
                assert!(feed.len() >= 2, "{at}: {feed:?}");
                assert!(feed.iter().all(|r| r.starts_with("1 ")), "{at}: {feed:?}");
            }
            // A delete removes a file: change data again.
            let (v3, cdc, _) = step(&cfg, &l, &[("d", "s05", r2.as_str())]).await?;
            assert!(cdc, "{at}: version {v3} has no change data");
        }
    }
    Ok(())
}
