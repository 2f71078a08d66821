//! SCD type 2 apply next to itself and to maintenance, every key counted: two applies at once,
//! a compaction of silver landing between an apply's plan and its commit, and an apply killed
//! between its side-table commit (deletes silver has no trace of) and its silver commit.

use super::faults::Faults;
use anyhow::{Context, Result};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{RunContext, UpsertCounts, run_job};
use lakestream_core::{Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::cdc::{BronzeChange, append_bronze};
use lakestream_testkit::{TestLake, backends, strings};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

const BRONZE: &str = "bronze/crm/public/accounts";
const SILVER: &str = "silver/crm/public/accounts";

fn config(lake: &TestLake) -> Result<PipelineConfig> {
    let job = format!(
        "[[refine]]\njob = \"accounts\"\noutput = \"{SILVER}\"\n[refine.cdc]\nsource = \"{BRONZE}\"\nscd = 2\n"
    );
    let mut cfg = PipelineConfig::from_toml(&format!("{}\n{job}", lakestream_testkit::EXAMPLE))?;
    cfg.lake = lake.config.lake.clone();
    cfg.commit = lake.config.commit.clone();
    Ok(cfg)
}

async fn apply(cfg: &PipelineConfig, l: &Lake, s: &CommitSettings) -> Result<UpsertCounts> {
    let job = cfg.refine_job("accounts").context("job")?;
    let ctx = RunContext::new(cfg, l, s, chrono::Utc::now());
    Ok(run_job(&ctx, job, 1000).await?.upserted())
}

/// Changes `op` of keys `ids` in round `n`: `__seq` `s<n>-<id>`.
async fn append(l: &Lake, n: usize, op: &str, ids: impl Iterator<Item = usize>) -> Result<()> {
    let rows: Vec<(String, String)> = ids
        .map(|i| {
            (
                format!(r#"{{"id":{i},"v":"r{n}"}}"#),
                format!("s{n:02}-{i:03}"),
            )
        })
        .collect();
    let changes: Vec<BronzeChange<'_>> = rows
        .iter()
        .map(|(j, s)| (op, s.as_str(), j.as_str()))
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]));
    for chunk in changes.chunks(10) {
        append_bronze(l, BRONZE, Some("id"), chunk, &schema).await?;
    }
    Ok(())
}

/// id -> its history [(__seq, __END_SEQ)], in `__seq` order; a (key, `__seq`) twice fails.
async fn histories(l: &Lake) -> Result<BTreeMap<i64, Vec<(String, String)>>> {
    let b = read::read_table(l, SILVER, None).await?;
    let mut out: BTreeMap<i64, Vec<(String, String)>> = BTreeMap::new();
    for ((id, s), e) in strings(&b, "id")?
        .into_iter()
        .zip(strings(&b, "__seq")?)
        .zip(strings(&b, "__END_SEQ")?)
    {
        let id: i64 = id.context("null id")?.parse()?;
        out.entry(id)
            .or_default()
            .push((s.unwrap_or_default(), e.unwrap_or_else(|| "-".into())));
    }
    for (id, h) in out.iter_mut() {
        h.sort();
        let n = h.len();
        h.dedup_by(|a, b| a.0 == b.0);
        anyhow::ensure!(h.len() == n, "key {id}: a change twice in silver: {h:?}");
    }
    Ok(out)
}

/// The history `rounds` (n, `__seq` prefix) make for key `i`, each closed by the next.
fn want(i: usize, rounds: &[usize], end: Option<usize>) -> Vec<(String, String)> {
    let seqs: Vec<String> = rounds.iter().map(|n| format!("s{n:02}-{i:03}")).collect();
    let mut ends: Vec<String> = seqs.iter().skip(1).cloned().collect();
    ends.push(end.map_or("-".into(), |n| format!("s{n:02}-{i:03}")));
    seqs.into_iter().zip(ends).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scd2_racing_applies_a_compaction_and_a_killed_run_count_every_change_once() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "scd2-races")?;
        let cfg = config(&lake)?;
        let faults = Arc::new(Faults::default());
        let l = faults.install(Lake::new(&cfg.lake)?);
        let s: CommitSettings = (&cfg.commit).into();
        append(&l, 0, "c", 0..40).await?;
        apply(&cfg, &l, &s).await?;

        // Two applies at once over the odd keys' updates: each change applied once.
        append(&l, 1, "u", (0..40).filter(|i| i % 2 == 1)).await?;
        let (a, b) = tokio::join!(apply(&cfg, &l, &s), apply(&cfg, &l, &s));
        let (a, b) = (a?, b?);
        assert_eq!(a.inserted + b.inserted, 20, "{a:?} {b:?}");

        // New keys in three runs (silver's small files), then a compaction lands between the
        // next apply's plan and its commit.
        for ids in [100..110, 110..120, 120..130] {
            append(&l, 3, "c", ids).await?;
            apply(&cfg, &l, &s).await?;
        }
        append(&l, 2, "u", (0..40).filter(|i| i % 2 == 0)).await?;
        faults.compact_before_next_log_put(&l, SILVER);
        apply(&cfg, &l, &s).await?;

        // Deletes of keys 40..50 that were never inserted (their inserts come late), killed
        // after the side-table commit, before silver's.
        append(&l, 5, "d", 40..50).await?;
        let once = CommitSettings {
            max_attempts: 1,
            ..s.clone()
        };
        faults.pass_first.store(1, Ordering::SeqCst);
        faults.refuse.store(1, Ordering::SeqCst);
        assert!(apply(&cfg, &l, &once).await.is_err());
        let side = read::read_table(&l, "_lakestream/accounts/tombstones", None).await?;
        assert_eq!(side.num_rows(), 10, "the deletes landed first");
        apply(&cfg, &l, &s).await?;
        // The late inserts (before the deletes) and re-inserts (after them).
        append(&l, 4, "c", 40..50).await?;
        apply(&cfg, &l, &s).await?;
        append(&l, 6, "c", 45..50).await?;
        apply(&cfg, &l, &s).await?;

        let got = histories(&l).await?;
        assert_eq!(got.len(), 80, "{backend:?}");
        for i in (0..50).chain(100..130) {
            let h = match i {
                _ if i >= 100 => want(i, &[3], None),
                _ if i < 40 && i % 2 == 1 => want(i, &[0, 1], None),
                _ if i < 40 => want(i, &[0, 2], None),
                _ if i < 45 => want(i, &[4], Some(5)),
                _ => [want(i, &[4], Some(5)), want(i, &[6], None)].concat(),
            };
            assert_eq!(got[&(i as i64)], h, "{backend:?} key {i}");
        }
        let side = read::read_table(&l, "_lakestream/accounts/tombstones", None).await?;
        assert_eq!(side.num_rows(), 10, "{backend:?}: no delete stored twice");
    }
    Ok(())
}
