//! The keyed latest-wins upsert with CDC deletes: out-of-order updates never go back in time,
//! a delete keeps a later-arriving older insert out (tombstone), ties go to the greater row,
//! new source columns reach the output, and the result is the same run after run, once at the
//! end, with replays, a killed run, two upserts at once and a compaction racing the upsert.

use super::faults::Faults;
use anyhow::{Context, Result};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{RunContext, UpsertCounts, run_job};
use lakestream_core::{KafkaIngestor, Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{CDC_OP, CDC_ROW, TestLake, backends, cdc_topic, cdc_upsert, strings};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The `cdc` topic (merge mode: new fields become columns) and its upsert `sensors`.
fn cdc() -> String {
    cdc_topic(&format!("{CDC_ROW}{CDC_OP}"), "schema_mode = \"merge\"\n")
        + &cdc_upsert("sensors", "silver/cdc", true)
}

fn config(lake: &TestLake) -> Result<PipelineConfig> {
    Ok(lake.config_with(&cdc())?)
}

fn rec(offset: i64, json: &str) -> SourceRecord {
    SourceRecord::new("cdc", 0, offset, 0, json.as_bytes())
}

/// (id, v) of the output, sorted, plus whether a `color` column exists.
async fn output(l: &Lake) -> Result<Vec<(String, Option<String>)>> {
    let b = read::read_table(l, "silver/cdc", None).await?;
    let ids = strings(&b, "id")?;
    let vs = strings(&b, "v")?;
    let mut rows: Vec<(String, Option<String>)> = ids
        .into_iter()
        .map(Option::unwrap_or_default)
        .zip(vs)
        .collect();
    rows.sort();
    Ok(rows)
}

async fn upsert(cfg: &PipelineConfig, l: &Lake, s: &CommitSettings) -> Result<UpsertCounts> {
    let job = cfg.refine_job("sensors").context("job")?;
    let ctx = RunContext::new(cfg, l, s, chrono::Utc::now());
    Ok(run_job(&ctx, job, 1000).await?.upserted())
}

/// One invocation's records and the output `(id, v)` expected after it.
type Step = (Vec<SourceRecord>, Vec<(&'static str, &'static str)>);

/// The versions of the CDC source, one invocation each, and the output expected after each.
fn history() -> Vec<Step> {
    let r = |o, id: i64, v: &str, ts: &str, op: &str| {
        rec(
            o,
            &format!(r#"{{"id":{id},"v":"{v}","ts":"2026-01-01T{ts}Z","op":"{op}"}}"#),
        )
    };
    vec![
        (
            vec![r(0, 1, "a", "10:00:00", "I"), r(1, 2, "b", "10:00:00", "I")],
            vec![("1", "a"), ("2", "b")],
        ),
        // An older update arrives late: ignored.
        (
            vec![r(2, 1, "old", "09:00:00", "U")],
            vec![("1", "a"), ("2", "b")],
        ),
        // Two updates of one key in one batch: the latest wins.
        (
            vec![
                r(3, 1, "c", "11:00:00", "U"),
                r(4, 1, "b4c", "10:30:00", "U"),
            ],
            vec![("1", "c"), ("2", "b")],
        ),
        (vec![r(5, 2, "", "12:00:00", "D")], vec![("1", "c")]),
        // An insert older than the delete, arriving after it: the tombstone keeps it out.
        (vec![r(6, 2, "late", "11:59:59", "I")], vec![("1", "c")]),
        (
            vec![r(7, 2, "back", "12:00:01", "I")],
            vec![("1", "c"), ("2", "back")],
        ),
        // Equal ordering values: the greater row text wins, whatever arrives first.
        (
            vec![r(8, 3, "x", "13:00:00", "I"), r(9, 3, "y", "13:00:00", "I")],
            vec![("1", "c"), ("2", "back"), ("3", "y")],
        ),
        (
            vec![r(10, 3, "m", "13:00:00", "U")],
            vec![("1", "c"), ("2", "back"), ("3", "y")],
        ),
        (
            vec![r(11, 3, "z", "13:00:00", "U")],
            vec![("1", "c"), ("2", "back"), ("3", "z")],
        ),
        // A new field reaches the output as a column.
        (
            vec![rec(
                12,
                r#"{"id":4,"v":"new","ts":"2026-01-01T14:00:00Z","op":"I","color":"red"}"#,
            )],
            vec![("1", "c"), ("2", "back"), ("3", "z"), ("4", "new")],
        ),
    ]
}

fn expected(rows: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
    rows.iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_wins_deletes_stick_and_columns_evolve() -> Result<()> {
    for backend in backends() {
        for after_each in [true, false] {
            let lake = TestLake::new(backend, "upsert-semantics")?;
            let cfg = config(&lake)?;
            let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
            let l = Lake::new(&cfg.lake)?;
            let s: CommitSettings = (&cfg.commit).into();
            let h = history();
            for (records, want) in &h {
                ing.ingest(records).await?;
                if after_each {
                    upsert(&cfg, &l, &s).await?;
                    assert_eq!(
                        output(&l).await?,
                        expected(want),
                        "{backend:?} after {records:?}"
                    );
                }
            }
            upsert(&cfg, &l, &s).await?;
            let last = &h[h.len() - 1].1;
            assert_eq!(
                output(&l).await?,
                expected(last),
                "{backend:?} after_each={after_each}"
            );
            let b = read::read_table(&l, "silver/cdc", None).await?;
            assert_eq!(
                strings(&b, "color")?.iter().flatten().collect::<Vec<_>>(),
                ["red"]
            );
            assert!(
                b.column_by_name("op").is_none(),
                "the op column is dropped by default"
            );
            // Replays change nothing.
            ing.ingest(&h[0].0).await?;
            assert_eq!(upsert(&cfg, &l, &s).await?, UpsertCounts::default());
        }
    }
    Ok(())
}

/// Rows with distinct keys spread over many commits, then updates of every third key. The
/// first round writes the updated keys first, so the updates rewrite only the first files
/// (a run writes what it rewrites and its new rows into one file): the output keeps several
/// small files for the compaction that races round 2.
fn bulk(round: usize) -> Vec<SourceRecord> {
    let first: Vec<usize> = (0..60)
        .filter(|i| i % 3 == 0)
        .chain((0..60).filter(|i| i % 3 != 0))
        .collect();
    (0..60)
        .map(|i| {
            let id = if round == 0 { first[i] } else { i * 3 % 60 };
            rec(
                (round * 100 + i) as i64,
                &format!(
                    r#"{{"id":{id},"v":"r{round}","ts":"2026-01-01T10:{:02}:{:02}Z","op":"U"}}"#,
                    round,
                    i % 60
                ),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_upserts_compactions_and_a_killed_run_keep_one_row_per_key() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "upsert-races")?;
        let cfg = config(&lake)?;
        let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
        let faults = Arc::new(Faults::default());
        let l = faults.install(Lake::new(&cfg.lake)?);
        let s: CommitSettings = (&cfg.commit).into();
        for chunk in bulk(0).chunks(10) {
            ing.ingest(chunk).await?;
            upsert(&cfg, &l, &s).await?;
        }
        for round in 1..4 {
            ing.ingest(&bulk(round)).await?;
            match round {
                1 => {
                    // Two upserts at once: one lands, the other re-plans and finds nothing new.
                    let (a, b) = tokio::join!(upsert(&cfg, &l, &s), upsert(&cfg, &l, &s));
                    let (a, b) = (a?, b?);
                    assert_eq!(
                        a.updated + b.updated,
                        20,
                        "each replaced key counted once: {a:?} {b:?}"
                    );
                }
                2 => {
                    // A compaction lands between the upsert's plan and its commit.
                    faults.compact_before_next_log_put(&l, "silver/cdc");
                    upsert(&cfg, &l, &s).await?;
                }
                _ => {
                    // Killed after writing its files: nothing lands, the next run does it all.
                    let once = CommitSettings {
                        max_attempts: 1,
                        ..s.clone()
                    };
                    faults.refuse.store(1, Ordering::SeqCst);
                    assert!(upsert(&cfg, &l, &once).await.is_err());
                    upsert(&cfg, &l, &s).await?;
                }
            }
            let rows = output(&l).await?;
            assert_eq!(rows.len(), 60, "{backend:?} round {round}: one row per key");
            for (id, v) in &rows {
                let id: usize = id.parse()?;
                let newest = (1..=round)
                    .rev()
                    .find(|r| (0..60).any(|i| i * 3 % 60 == id && *r > 0))
                    .unwrap_or(0);
                assert_eq!(
                    v.as_deref(),
                    Some(format!("r{newest}").as_str()),
                    "{backend:?} round {round} id {id}"
                );
            }
        }
    }
    Ok(())
}

const REGIONS: &str = r#"
[[topics]]
topic = "regions"
table = "raw/regions"
schema_mode = "merge"
columns = [
  { name = "region", type = "string", nullable = NULLABLE },
  { name = "id", type = "int64", nullable = false },
  { name = "v", type = "string" },
  { name = "ts", type = "timestamp", nullable = false },
]

[[refine]]
job = "regions"
output = "silver/regions"
partition_by = ["region"]
[refine.upsert]
source = "raw/regions"
key = ["region", "id"]
order_by = ["ts"]
"#;

/// In a partition column Delta does not tell an empty string from null (both are the null
/// partition value, `__HIVE_DEFAULT_PARTITION__` in Spark's paths), so the keys `("", 1)` and
/// `(null, 1)` are one output row: an update of either must replace it, not add a second row.
/// A source column declared non-nullable must not make that value unwritable either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_string_key_in_a_partition_column_is_updated_in_place() -> Result<()> {
    for (backend, nullable) in backends().into_iter().flat_map(|b| [(b, true), (b, false)]) {
        let lake = TestLake::new(backend, "upsert-empty-partition")?;
        let regions = REGIONS.replace("NULLABLE", &nullable.to_string());
        let mut cfg =
            PipelineConfig::from_toml(&format!("{}\n{regions}", lakestream_testkit::EXAMPLE))?;
        cfg.lake = lake.config.lake.clone();
        cfg.commit = lake.config.commit.clone();
        let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let job = cfg.refine_job("regions").context("job")?;
        let row = |o: i64, region: &str, id: i64, v: &str, ts: &str| {
            SourceRecord::new(
                "regions",
                0,
                o,
                0,
                format!(r#"{{"region":{region},"id":{id},"v":"{v}","ts":"2026-01-01T{ts}Z"}}"#)
                    .as_bytes(),
            )
        };
        // Twelve runs, each updating both keys: the output passes a checkpoint (every 10
        // versions), after which its partition values are read from the checkpoint.
        for n in 0..12i64 {
            let ts = format!("10:{n:02}:00");
            // The empty key as "" and, where the column allows it, as null every other run.
            let empty = if nullable && n % 2 == 1 {
                "null"
            } else {
                r#""""#
            };
            let r = ing
                .ingest(&[
                    row(2 * n, empty, 1, &format!("v{n}"), &ts),
                    row(2 * n + 1, r#""eu""#, 1, &format!("eu{n}"), &ts),
                ])
                .await?;
            assert_eq!(r.written, 2, "{r:?}");
            let ctx = RunContext::new(&cfg, &l, &s, chrono::Utc::now());
            run_job(&ctx, job, 1000).await?;
            let b = read::read_table(&l, "silver/regions", None).await?;
            // The empty region may read back as null (Delta's partition encoding): both are "".
            let mut rows: Vec<(String, Option<String>)> = strings(&b, "region")?
                .into_iter()
                .map(Option::unwrap_or_default)
                .zip(strings(&b, "v")?)
                .collect();
            rows.sort();
            assert_eq!(
                rows,
                [
                    (String::new(), Some(format!("v{n}"))),
                    ("eu".to_string(), Some(format!("eu{n}"))),
                ],
                "{backend:?} nullable={nullable} after run {n}: one row per key"
            );
        }
    }
    Ok(())
}
