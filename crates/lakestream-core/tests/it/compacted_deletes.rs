//! Issue 37 (8): a delete known only from its Kafka tombstone (the delete event removed by log
//! compaction, or in an earlier batch) is applied, SCD1 and SCD2, on every backend: the key's
//! row goes (change feed: a delete), a later re-emission of an older change of the key stays
//! out, and a tombstone whose delete was already applied changes nothing. Real Debezium
//! PostgreSQL payloads through the Kafka ingest.

use anyhow::{Context, Result};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::cdc::family::all_jobs;
use lakestream_core::refine::{RunContext, rebuild, run_job};
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::{RecordValue, SourceRecord};
use lakestream_testkit::{TestLake, backends, example_config_with, strings};

macro_rules! fx {
    ($name:literal) => {
        include_bytes!(concat!("../../../../tests/fixtures/debezium/", $name)).as_slice()
    };
}

const TOPIC: &str = "crm.public.customers";
const JOB: &str = "cdc-crm/public.customers";
const SILVER: &str = "silver/crm/public/customers";

fn family(scd: u8) -> String {
    format!(
        "[[cdc]]\nfamily = \"crm\"\nsource = \"debezium\"\ntopics = [\"crm.public.*\"]\nscd = {scd}\n"
    )
}

fn rec(offset: i64, key: &[u8], value: Option<&[u8]>) -> SourceRecord {
    let mut r = SourceRecord::new(TOPIC, 0, offset, 1_764_416_000_000, value.unwrap_or(b""));
    if value.is_none() {
        r.value = RecordValue::Null;
    }
    r.with_key(key)
}

fn k1004() -> &'static [u8] {
    fx!("pg_customers_1004.key.json")
}

fn k1005() -> &'static [u8] {
    fx!("pg_customers_1005.key.json")
}

/// Ada (1004, snapshot row) and Bob (1005, created).
fn first_batch() -> Vec<SourceRecord> {
    vec![
        rec(10, k1004(), Some(fx!("pg_customers_r.json"))),
        rec(11, k1005(), Some(fx!("pg_customers_c.json"))),
    ]
}

/// Apply the family's customers job; the silver version it committed.
async fn apply(cfg: &PipelineConfig, l: &Lake) -> Result<Option<u64>> {
    let s: CommitSettings = (&cfg.commit).into();
    let jobs = all_jobs(l, cfg).await?;
    let job = jobs.iter().find(|j| j.job == JOB).context("no job")?;
    let ctx = RunContext::new(cfg, l, &s, chrono::Utc::now());
    let r = run_job(&ctx, job, 100).await?;
    Ok(r.runs.iter().filter_map(|r| r.output_version).max())
}

/// The current rows' ids (SCD2: open versions), sorted.
async fn current_ids(l: &Lake, scd: u8) -> Result<Vec<String>> {
    let b = read::read_table(l, SILVER, None).await?;
    let ids = strings(&b, "id")?;
    let open: Vec<bool> = match scd {
        2 => strings(&b, "__END_SEQ")?
            .iter()
            .map(Option::is_none)
            .collect(),
        _ => vec![true; b.num_rows()],
    };
    let mut out: Vec<String> = (0..b.num_rows())
        .filter(|i| open[*i])
        .filter_map(|i| ids[i].clone())
        .collect();
    out.sort();
    Ok(out)
}

/// The change feed of silver version `v`: "id _change_type", sorted.
async fn feed(l: &Lake, v: u64) -> Result<Vec<String>> {
    let c = lakestream_core::inspect::changes(l, SILVER, v, Some(v)).await?;
    let (id, kind) = (strings(&c.rows, "id")?, strings(&c.rows, "_change_type")?);
    let mut rows: Vec<String> = (0..c.rows.num_rows())
        .map(|i| {
            format!(
                "{} {}",
                id[i].clone().unwrap_or_default(),
                kind[i].clone().unwrap_or_default()
            )
        })
        .collect();
    rows.sort();
    Ok(rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_known_only_from_its_tombstone_removes_the_row() -> Result<()> {
    for b in backends() {
        for scd in [1u8, 2] {
            let lake = TestLake::with_config(
                b,
                &format!("compacted-{scd}"),
                example_config_with(&family(scd))?,
            )?;
            let cfg = lake.config_with(&family(scd))?;
            let l = Lake::new(&cfg.lake)?;
            let ing = lake.ingestor()?;
            ing.ingest(&first_batch()).await?;
            apply(&cfg, &l).await?;
            assert_eq!(
                current_ids(&l, scd).await?,
                ["1004", "1005"],
                "{b:?} scd{scd}"
            );

            // Log compaction removed Bob's delete event (offset 13): only its tombstone is
            // left. Ada's update comes in the same batch.
            let r = ing
                .ingest(&[
                    rec(12, k1004(), Some(fx!("pg_customers_u.json"))),
                    rec(14, k1005(), None),
                ])
                .await?;
            assert_eq!((r.written, r.tombstones_skipped), (2, 0), "{r:?}");
            let v = apply(&cfg, &l)
                .await?
                .context("the tombstone's run committed")?;
            assert_eq!(current_ids(&l, scd).await?, ["1004"], "{b:?} scd{scd}");
            let f = feed(&l, v).await?;
            // SCD1 deletes the row; SCD2 closes the version (an update of its history row),
            // ranked just after the change it closes.
            let change = if scd == 1 {
                "1005 delete"
            } else {
                "1005 update_postimage"
            };
            assert!(f.contains(&change.to_string()), "{b:?} scd{scd}: {f:?}");
            if scd == 2 {
                let h = read::read_table(&l, SILVER, None).await?;
                let (id, end) = (strings(&h, "id")?, strings(&h, "__END_SEQ")?);
                let closed: Vec<String> = (0..h.num_rows())
                    .filter(|i| id[*i].as_deref() == Some("1005"))
                    .filter_map(|i| end[i].clone())
                    .collect();
                assert_eq!(closed, ["00000000000024023200|tombstone"], "{b:?}");
                // Closed when Kafka took the tombstone (its record timestamp).
                let ended: Vec<String> = strings(&h, "__END_AT")?
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| id[*i].as_deref() == Some("1005"))
                    .filter_map(|(_, e)| e)
                    .collect();
                assert_eq!(ended, ["2025-11-29T11:33:20Z"], "{b:?}");
            }

            // A connector restart re-emits Bob's create (its own position, a new offset): older
            // than the delete, so it stays out.
            ing.ingest(&[rec(20, k1005(), Some(fx!("pg_customers_c.json")))])
                .await?;
            apply(&cfg, &l).await?;
            assert_eq!(
                current_ids(&l, scd).await?,
                ["1004"],
                "{b:?} scd{scd}: resurrected"
            );

            // A rebuild reads every change at once (the tombstone placed within the run):
            // the same current rows.
            let s: CommitSettings = (&cfg.commit).into();
            let jobs = all_jobs(&l, &cfg).await?;
            let job = jobs.iter().find(|j| j.job == JOB).context("no job")?;
            rebuild(&RunContext::new(&cfg, &l, &s, chrono::Utc::now()), job).await?;
            apply(&cfg, &l).await?;
            assert_eq!(
                current_ids(&l, scd).await?,
                ["1004"],
                "{b:?} scd{scd}: rebuilt"
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tombstone_after_its_applied_delete_changes_nothing() -> Result<()> {
    for b in backends() {
        for scd in [1u8, 2] {
            let lake = TestLake::with_config(
                b,
                &format!("late-tomb-{scd}"),
                example_config_with(&family(scd))?,
            )?;
            let cfg = lake.config_with(&family(scd))?;
            let l = Lake::new(&cfg.lake)?;
            let ing = lake.ingestor()?;
            ing.ingest(&first_batch()).await?;
            // The delete ends a batch; its tombstone starts the next (applied in between).
            ing.ingest(&[rec(13, k1005(), Some(fx!("pg_customers_d.json")))])
                .await?;
            apply(&cfg, &l).await?;
            let before = read::read_table(&l, SILVER, None).await?.num_rows();
            let r = ing.ingest(&[rec(14, k1005(), None)]).await?;
            assert_eq!((r.written, r.tombstones_skipped), (1, 0), "{r:?}");
            if let Some(v) = apply(&cfg, &l).await? {
                assert_eq!(feed(&l, v).await?, Vec::<String>::new(), "{b:?} scd{scd}");
            }
            assert_eq!(current_ids(&l, scd).await?, ["1004"]);
            assert_eq!(read::read_table(&l, SILVER, None).await?.num_rows(), before);

            // The delete and its tombstone in one batch: the tombstone is skipped at ingest.
            let r = ing
                .ingest(&[
                    rec(15, k1005(), Some(fx!("pg_customers_d.json"))),
                    rec(16, k1005(), None),
                ])
                .await?;
            assert_eq!(r.tombstones_skipped, 1, "{r:?}");
        }
    }
    Ok(())
}
