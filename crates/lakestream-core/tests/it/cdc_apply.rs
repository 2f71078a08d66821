//! CDC apply, SCD type 1, on bronze tables written directly (the contract's bronze schema):
//! out-of-order changes across runs, redelivery, deletes and their tombstones, re-insert,
//! truncates, a new bronze column, keys from the bronze property or the config; two runs at
//! once, a compaction racing the apply, a run killed between silver's anchor and its commit;
//! a family's tables expanded into jobs. Issue 37: a change equal to the silver row writes
//! nothing (a re-snapshot commits no row and no feed row); a TOAST placeholder takes the
//! previous value (silver row, or an earlier change in the run; null after a delete).

use super::faults::Faults;
use anyhow::{Context, Result};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use lakestream_core::commit::CommitSettings;
use lakestream_core::maintenance::maintained_tables;
use lakestream_core::refine::cdc::family::all_jobs;
use lakestream_core::refine::keyed::pending;
use lakestream_core::refine::{RunContext, UpsertCounts, in_dependency_order, run_job};
use lakestream_core::table::TableHandle;
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::cdc::{BronzeChange, append_bronze};
use lakestream_testkit::{TestLake, backends, strings};
use std::sync::Arc;
use std::sync::atomic::Ordering;

const BRONZE: &str = "bronze/crm/public/orders";
const SILVER: &str = "silver/crm/public/orders";

fn config(lake: &TestLake, keys: &str) -> Result<PipelineConfig> {
    let job = format!(
        r#"
[[refine]]
job = "orders"
output = "{SILVER}"
[refine.cdc]
source = "{BRONZE}"
{keys}
"#
    );
    let mut cfg = PipelineConfig::from_toml(&format!("{}\n{job}", lakestream_testkit::EXAMPLE))?;
    cfg.lake = lake.config.lake.clone();
    cfg.commit = lake.config.commit.clone();
    Ok(cfg)
}

fn rows_schema(color: bool) -> SchemaRef {
    let mut f = vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ];
    if color {
        f.push(Field::new("color", DataType::Utf8, true));
    }
    Arc::new(Schema::new(f))
}

/// Silver's version.
async fn silver_version(l: &Lake) -> Result<u64> {
    let h = TableHandle::open_existing(l, SILVER).await?;
    h.version().context("silver has a version")
}

/// (id, v, __seq) of a table, sorted.
async fn silver(l: &Lake, table: &str) -> Result<Vec<(String, String, String)>> {
    let b = read::read_table(l, table, None).await?;
    let mut rows: Vec<(String, String, String)> = strings(&b, "id")?
        .into_iter()
        .zip(strings(&b, "v")?)
        .zip(strings(&b, "__seq")?)
        .map(|((i, v), s)| {
            (
                i.unwrap_or_default(),
                v.unwrap_or_default(),
                s.unwrap_or_default(),
            )
        })
        .collect();
    rows.sort();
    Ok(rows)
}

fn want(rows: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    rows.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

async fn apply(cfg: &PipelineConfig, l: &Lake, s: &CommitSettings) -> Result<UpsertCounts> {
    let job = cfg.refine_job("orders").context("job")?;
    let ctx = RunContext::new(cfg, l, s, chrono::Utc::now());
    Ok(run_job(&ctx, job, 1000).await?.upserted())
}

type Step = (
    Vec<BronzeChange<'static>>,
    bool,
    Vec<(&'static str, &'static str, &'static str)>,
);

fn history() -> Vec<Step> {
    vec![
        (
            vec![
                ("c", "s05", r#"{"id":1,"v":"a"}"#),
                ("c", "s05", r#"{"id":2,"v":"b"}"#),
                ("u", "s07", r#"{"id":1,"v":"a2"}"#),
            ],
            false,
            vec![("1", "a2", "s07"), ("2", "b", "s05")],
        ),
        // A late older update and a redelivered change: nothing changes.
        (
            vec![
                ("u", "s06", r#"{"id":1,"v":"old"}"#),
                ("c", "s05", r#"{"id":2,"v":"b"}"#),
            ],
            false,
            vec![("1", "a2", "s07"), ("2", "b", "s05")],
        ),
        (
            vec![("d", "s10", r#"{"id":2,"v":"b"}"#)],
            false,
            vec![("1", "a2", "s07")],
        ),
        // Older than the delete, arriving after it: the tombstone keeps it out.
        (
            vec![("u", "s09", r#"{"id":2,"v":"late"}"#)],
            false,
            vec![("1", "a2", "s07")],
        ),
        // Re-insert after the delete.
        (
            vec![("c", "s11", r#"{"id":2,"v":"back"}"#)],
            false,
            vec![("1", "a2", "s07"), ("2", "back", "s11")],
        ),
        // A truncate: every older row goes; older changes in the same chunk are void.
        (
            vec![
                ("u", "s15", r#"{"id":1,"v":"pre"}"#),
                ("t", "s20", "{}"),
                ("c", "s21", r#"{"id":3,"v":"x"}"#),
            ],
            false,
            vec![("3", "x", "s21")],
        ),
        // A change older than the truncate is void later too; a new column evolves silver.
        (
            vec![
                ("u", "s18", r#"{"id":1,"v":"after"}"#),
                ("c", "s22", r#"{"id":4,"v":"y","color":"red"}"#),
            ],
            true,
            vec![("3", "x", "s21"), ("4", "y", "s22")],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scd1_latest_wins_deletes_stick_truncates_void_and_columns_evolve() -> Result<()> {
    for backend in backends() {
        for after_each in [true, false] {
            let lake = TestLake::new(backend, "cdc-scd1")?;
            let cfg = config(&lake, "")?;
            let l = Lake::new(&cfg.lake)?;
            let s: CommitSettings = (&cfg.commit).into();
            let h = history();
            for (changes, color, want_rows) in &h {
                append_bronze(&l, BRONZE, Some("id"), changes, &rows_schema(*color)).await?;
                if after_each {
                    apply(&cfg, &l, &s).await?;
                    assert_eq!(
                        silver(&l, SILVER).await?,
                        want(want_rows),
                        "{backend:?} after {changes:?}"
                    );
                }
            }
            apply(&cfg, &l, &s).await?;
            assert_eq!(
                silver(&l, SILVER).await?,
                want(&h[h.len() - 1].2),
                "{backend:?} after_each={after_each}"
            );
            let b = read::read_table(&l, SILVER, None).await?;
            // No `__op`, no `__ingested_at`, no lineage (a new column lands where it arrives).
            let mut names: Vec<String> = b
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            names.sort();
            assert_eq!(names, ["__seq", "__source_ts", "color", "id", "v"]);
            assert_eq!(
                strings(&b, "color")?.iter().flatten().collect::<Vec<_>>(),
                ["red"]
            );
            let mut h2 = TableHandle::open(&l, SILVER)?;
            h2.refresh().await?;
            let conf = h2.snapshot()?.metadata().configuration().clone();
            assert_eq!(
                conf.get("lakestream.cdc.truncated_at").map(String::as_str),
                Some("s20")
            );
            assert_eq!(
                conf.get("lakestream.refine.job").map(String::as_str),
                Some("orders")
            );
            if after_each {
                // The change data feed: the touched keys only, one commit per run.
                let feed = lakestream_core::inspect::changes(&l, SILVER, 0, None).await?;
                let b = &feed.rows;
                let mut got: Vec<String> = (0..b.num_rows())
                    .map(|i| -> Result<String> {
                        let col = |n: &str| -> Result<String> {
                            Ok(strings(b, n)?[i].clone().unwrap_or_default())
                        };
                        Ok(format!(
                            "v{} {} {} {}",
                            col("_commit_version")?,
                            col("id")?,
                            col("v")?,
                            col("_change_type")?
                        ))
                    })
                    .collect::<Result<_>>()?;
                got.sort();
                assert_eq!(
                    got,
                    [
                        "v0 1 a2 insert",
                        "v0 2 b insert",
                        "v2 2 b delete",
                        "v4 2 back insert",
                        "v5 1 a2 delete",
                        "v5 2 back delete",
                        "v5 3 x insert",
                        "v6 4 y insert",
                    ],
                    "{backend:?}"
                );
            }
            // Nothing new: nothing changes.
            assert_eq!(apply(&cfg, &l, &s).await?, UpsertCounts::default());
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_come_from_the_config_or_the_bronze_property_or_the_error_says_where() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "cdc-keys")?;
        let l = Lake::new(&lake.config.lake)?;
        let changes = [
            ("c", "s1", r#"{"id":1,"v":"a"}"#),
            ("c", "s2", r#"{"id":1,"v":"b"}"#),
        ];
        append_bronze(&l, BRONZE, None, &changes, &rows_schema(false)).await?;
        let cfg = config(&lake, "")?;
        let s: CommitSettings = (&cfg.commit).into();
        let e = apply(&cfg, &l, &s)
            .await
            .err()
            .context("no keys must fail")?;
        assert!(
            format!("{e:#}").contains(r#"cdc[..].keys."public.orders""#),
            "{e:#}"
        );
        let cfg = config(&lake, r#"keys = ["id"]"#)?;
        apply(&cfg, &l, &s).await?;
        assert_eq!(silver(&l, SILVER).await?, want(&[("1", "b", "s2")]));
    }
    Ok(())
}

/// 40 keys inserted, then every round updates every other key.
fn round(n: usize) -> Vec<(String, String)> {
    // Round 0: the even keys first (see the racing test).
    (0..40)
        .filter(|i| i % 2 == 0)
        .chain((0..40).filter(|i| i % 2 == 1))
        .filter(|i| n == 0 || i % 2 == n % 2)
        .map(|i| {
            (
                format!(r#"{{"id":{i},"v":"r{n}"}}"#),
                format!("s{n:02}-{i:03}"),
            )
        })
        .collect()
}

async fn append_round(l: &Lake, n: usize, op: &str) -> Result<()> {
    append_slice(l, n, op, 0..usize::MAX).await
}

/// [`append_round`] of the round's changes in `range` (in the round's order).
async fn append_slice(l: &Lake, n: usize, op: &str, range: std::ops::Range<usize>) -> Result<()> {
    let r: Vec<(String, String)> = round(n)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| range.contains(i))
        .map(|(_, c)| c)
        .collect();
    let changes: Vec<BronzeChange<'_>> = r
        .iter()
        .map(|(j, s)| (op, s.as_str(), j.as_str()))
        .collect();
    for chunk in changes.chunks(10) {
        append_bronze(l, BRONZE, Some("id"), chunk, &rows_schema(false)).await?;
    }
    Ok(())
}

/// Every key once with the newest round's value.
fn expected_after(rounds: usize, deleted_even: bool) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = (0..40)
        .filter(|i| !(deleted_even && i % 2 == 0))
        .map(|i| {
            let n = (1..=rounds).rev().find(|n| i % 2 == n % 2).unwrap_or(0);
            (i.to_string(), format!("r{n}"), format!("s{n:02}-{i:03}"))
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_applies_a_compaction_and_a_killed_run_keep_every_key_once() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "cdc-races")?;
        let cfg = config(&lake, "")?;
        let faults = Arc::new(Faults::default());
        let l = faults.install(Lake::new(&cfg.lake)?);
        let s: CommitSettings = (&cfg.commit).into();
        // Round 0 in two applies (its even keys, then its odd keys): silver gets two files,
        // round 1's updates (odd keys) rewrite one, and the compaction racing round 2 has two
        // small files to merge (a run writes what it rewrites and its new rows into one file).
        for half in [0..20, 20..40] {
            append_slice(&l, 0, "c", half).await?;
            apply(&cfg, &l, &s).await?;
        }
        // Two applies at once: every key once, the source consumed once.
        append_round(&l, 1, "u").await?;
        let (a, b) = tokio::join!(apply(&cfg, &l, &s), apply(&cfg, &l, &s));
        let (a, b) = (a?, b?);
        assert_eq!(a.updated + b.updated, 20, "{a:?} {b:?}");
        assert_eq!(
            silver(&l, SILVER).await?,
            expected_after(1, false),
            "{backend:?}"
        );

        // A compaction lands between the apply's plan and its commit.
        append_round(&l, 2, "u").await?;
        faults.compact_before_next_log_put(&l, SILVER);
        apply(&cfg, &l, &s).await?;
        assert_eq!(
            silver(&l, SILVER).await?,
            expected_after(2, false),
            "{backend:?}"
        );

        // Deletes of the even keys (silver's first): killed after the tombstone table's commit
        // (silver's anchor), before silver's, which holds the tombstones: none is anywhere.
        append_round(&l, 2, "d").await?;
        let once = CommitSettings {
            max_attempts: 1,
            ..s.clone()
        };
        faults.pass_first.store(1, Ordering::SeqCst);
        faults.refuse.store(1, Ordering::SeqCst);
        assert!(apply(&cfg, &l, &once).await.is_err());
        let tombs = "_lakestream/orders/tombstones";
        let anchored = TableHandle::open_existing(&l, tombs).await?;
        let silver_id = TableHandle::open_existing(&l, SILVER).await?.table_id()?;
        assert_eq!(
            pending::consolidated_through(&anchored, &silver_id)?,
            Some(silver_version(&l).await? as i64),
            "the anchor landed first, at the plan's read version"
        );
        assert_eq!(read::read_table(&l, tombs, None).await?.num_rows(), 0);
        assert_eq!(silver(&l, SILVER).await?, expected_after(2, false));
        let c = apply(&cfg, &l, &s).await?;
        assert_eq!(c.deleted, 20, "{c:?}");
        assert_eq!(
            silver(&l, SILVER).await?,
            expected_after(2, true),
            "{backend:?}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_family_expands_into_one_job_per_bronze_table_and_applies_all() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "cdc-family")?;
        let mut cfg = PipelineConfig::from_toml(&format!(
            "{}\n{}",
            lakestream_testkit::EXAMPLE,
            r#"
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.*.*"]
keys = { "sales.items" = ["id"] }
"#
        ))?;
        cfg.lake = lake.config.lake.clone();
        cfg.commit = lake.config.commit.clone();
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let one = [("c", "s1", r#"{"id":1,"v":"a"}"#)];
        let del = [("d", "s2", r#"{"id":2,"v":"gone"}"#)];
        for changes in [&one, &del] {
            let orders = "bronze/crm/public/orders";
            append_bronze(&l, orders, Some("id"), changes, &rows_schema(false)).await?;
        }
        append_bronze(
            &l,
            "bronze/crm/public/users",
            Some("id"),
            &one,
            &rows_schema(false),
        )
        .await?;
        append_bronze(
            &l,
            "bronze/crm/sales/items",
            None,
            &one,
            &rows_schema(false),
        )
        .await?;
        let mut jobs = all_jobs(&l, &cfg).await?;
        jobs.retain(|j| j.job.starts_with("cdc-"));
        let names: Vec<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
        assert_eq!(
            names,
            [
                "cdc-crm/public.orders",
                "cdc-crm/public.users",
                "cdc-crm/sales.items"
            ]
        );
        let ctx = RunContext::new(&cfg, &l, &s, chrono::Utc::now());
        for job in in_dependency_order(&jobs, &[])? {
            run_job(&ctx, job, 10).await?;
        }
        for t in ["public/orders", "public/users", "sales/items"] {
            assert_eq!(
                silver(&l, &format!("silver/crm/{t}")).await?,
                want(&[("1", "a", "s1")]),
                "{backend:?} {t}"
            );
        }
        let tombs =
            read::read_table(&l, "_lakestream/cdc-crm/public.orders/tombstones", None).await?;
        assert_eq!(tombs.num_rows(), 1, "{backend:?}");
        // Maintenance sees every family table: bronze, silver and the tombstones.
        let maintained: Vec<String> = maintained_tables(&cfg, &l)
            .await?
            .into_iter()
            .map(|t| t.name)
            .filter(|n| n.contains("crm"))
            .collect();
        assert_eq!(
            maintained,
            [
                "_lakestream/cdc-crm/public.orders/tombstones",
                "bronze/crm/public/orders",
                "bronze/crm/public/users",
                "bronze/crm/sales/items",
                "silver/crm/public/orders",
                "silver/crm/public/users",
                "silver/crm/sales/items",
            ],
            "{backend:?}"
        );
    }
    Ok(())
}

const TOAST: &str = "__debezium_unavailable_value";

/// (id, v, doc, __seq) of silver, sorted; `-` for null.
async fn silver_docs(l: &Lake) -> Result<Vec<[String; 4]>> {
    let b = read::read_table(l, SILVER, None).await?;
    let cols = ["id", "v", "doc", "__seq"].map(|c| strings(&b, c));
    let [id, v, doc, seq] = cols;
    let (id, v, doc, seq) = (id?, v?, doc?, seq?);
    let g = |c: &Vec<Option<String>>, i: usize| c[i].clone().unwrap_or_else(|| "-".into());
    let mut rows: Vec<[String; 4]> = (0..b.num_rows())
        .map(|i| [g(&id, i), g(&v, i), g(&doc, i), g(&seq, i)])
        .collect();
    rows.sort();
    Ok(rows)
}

fn docs(rows: &[[&str; 4]]) -> Vec<[String; 4]> {
    let mut v: Vec<[String; 4]> = rows.iter().map(|r| r.map(str::to_string)).collect();
    v.sort();
    v
}

/// One apply run: its counts and the silver version it committed.
async fn apply_v(
    cfg: &PipelineConfig,
    l: &Lake,
    s: &CommitSettings,
) -> Result<(UpsertCounts, Option<u64>)> {
    let job = cfg.refine_job("orders").context("job")?;
    let ctx = RunContext::new(cfg, l, s, chrono::Utc::now());
    let r = run_job(&ctx, job, 1000).await?;
    let v = r.runs.iter().filter_map(|r| r.output_version).max();
    Ok((r.upserted(), v))
}

/// The feed rows of silver version `v`: "id v doc _change_type", sorted.
async fn feed_of(l: &Lake, v: Option<u64>) -> Result<Vec<String>> {
    let Some(v) = v else { return Ok(vec![]) };
    let c = lakestream_core::inspect::changes(l, SILVER, v, Some(v)).await?;
    let b = &c.rows;
    let cols = ["id", "v", "doc", "_change_type"].map(|n| strings(b, n));
    let [id, val, doc, kind] = cols;
    let (id, val, doc, kind) = (id?, val?, doc?, kind?);
    let g = |c: &Vec<Option<String>>, i: usize| c[i].clone().unwrap_or_else(|| "-".into());
    let mut rows: Vec<String> = (0..b.num_rows())
        .map(|i| {
            format!(
                "{} {} {} {}",
                g(&id, i),
                g(&val, i),
                g(&doc, i),
                g(&kind, i)
            )
        })
        .collect();
    rows.sort();
    Ok(rows)
}

/// Issue 37 items 2 and 3 in SCD1, with Debezium-shaped bronze rows (PostgreSQL, default
/// `REPLICA IDENTITY`: an UPDATE that leaves the TOASTed `doc` alone sends the placeholder).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scd1_unchanged_rows_have_no_feed_rows_and_toast_placeholders_keep_the_value() -> Result<()>
{
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
        Field::new("doc", DataType::Utf8, true),
    ]));
    let p64 = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";
    for backend in backends() {
        let lake = TestLake::new(backend, "cdc-scd1-values")?;
        let keys = format!("keys = [\"id\"]\ntoast_placeholder = \"{TOAST}\"");
        let cfg = config(&lake, &keys)?;
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let row = |id: i64, v: &str, doc: &str| -> String {
            format!(r#"{{"id":{id},"v":"{v}","doc":"{doc}"}}"#)
        };
        let step =
            async |changes: Vec<(&str, &str, String)>| -> Result<(UpsertCounts, Vec<String>)> {
                let c: Vec<BronzeChange<'_>> = changes
                    .iter()
                    .map(|(o, q, r)| (*o, *q, r.as_str()))
                    .collect();
                append_bronze(&l, BRONZE, None, &c, &schema).await?;
                let (counts, v) = apply_v(&cfg, &l, &s).await?;
                Ok((counts, feed_of(&l, v).await?))
            };
        step(vec![
            ("r", "s05", row(1, "a", "big")),
            ("r", "s05", row(2, "b", "x")),
        ])
        .await?;
        // An update that leaves doc alone; a re-snapshot row of 2 equal to silver.
        let (counts, feed) = step(vec![
            ("u", "s07", row(1, "a2", TOAST)),
            ("r", "s08", row(2, "b", "x")),
        ])
        .await?;
        assert_eq!(
            feed,
            ["1 a big update_preimage", "1 a2 big update_postimage"],
            "{backend:?}"
        );
        // 2's row takes s08 (silver holds a key's greatest `__seq`), with no feed row.
        assert_eq!((counts.inserted, counts.updated), (0, 2), "{backend:?}");
        // A re-snapshot of the unchanged table: no feed row; the rows take its `__seq`, so a
        // change older than it arriving later stays out.
        let (counts, feed) = step(vec![
            ("r", "s09", row(1, "a2", "big")),
            ("r", "s09", row(2, "b", "x")),
        ])
        .await?;
        assert!(feed.is_empty(), "{backend:?}: {feed:?}");
        assert_eq!((counts.inserted, counts.updated), (0, 2), "{backend:?}");
        assert_eq!(
            silver_docs(&l).await?,
            docs(&[["1", "a2", "big", "s09"], ["2", "b", "x", "s09"]]),
            "{backend:?}"
        );
        // A change older than the re-snapshot (position and commit time), arriving after it:
        // out.
        let (_, feed) = step(vec![("u", "s08a", row(2, "late", "x"))]).await?;
        assert!(feed.is_empty(), "{backend:?}: {feed:?}");
        assert_eq!(
            silver_docs(&l).await?,
            docs(&[["1", "a2", "big", "s09"], ["2", "b", "x", "s09"]]),
            "{backend:?}: the late change stays out"
        );
        // In one run: doc changed, then an update leaving it alone (the earlier change's
        // value); 2 as base64 of the placeholder's bytes (a bytea column without schemas).
        step(vec![
            ("u", "s10", row(1, "a3", "big2")),
            ("u", "s11", row(1, "a4", TOAST)),
            // A repeat of s11 with a newer position: silver holds the greatest `__seq`.
            ("u", "s115", row(1, "a4", "big2")),
            ("u", "s12", row(2, "b2", p64)),
        ])
        .await?;
        assert_eq!(
            silver_docs(&l).await?,
            docs(&[["1", "a4", "big2", "s115"], ["2", "b2", "x", "s12"]]),
            "{backend:?}"
        );
        // After a delete there is no value before: null, never the placeholder.
        step(vec![
            ("d", "s13", row(1, "a4", "big2")),
            ("c", "s14", row(1, "a5", TOAST)),
            ("c", "s14", row(3, "new", TOAST)),
        ])
        .await?;
        assert_eq!(
            silver_docs(&l).await?,
            docs(&[
                ["1", "a5", "-", "s14"],
                ["2", "b2", "x", "s12"],
                ["3", "new", "-", "s14"]
            ]),
            "{backend:?}"
        );
    }
    Ok(())
}
