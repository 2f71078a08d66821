//! The one commit loop (issue 23): a change is checked against *every* commit after the
//! version it was planned from — whatever happened in between (a transient error, dropped
//! bins, this run's own earlier partitions) — and a CDC delete is never lost to its own
//! tombstone when the upsert re-plans or re-runs.

use crate::faults::Faults;
use anyhow::{Context, Result};
use lakestream_core::commit::CommitSettings;
use lakestream_core::maintenance::{CompactOptions, compact};
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::{KafkaIngestor, Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::records;
use lakestream_testkit::{TestLake, backends, cdc_config, strings};
use std::sync::Arc;
use std::sync::atomic::Ordering;

fn member(i: usize, owner: &str) -> SourceRecord {
    let level = format!("m{i}");
    records::member(0, i as i64, owner, &level, "2026-11-30T10:00:00Z", 0)
}

/// Sorted `(order_owner, membership)` of `raw/member`: every record once, none twice.
async fn members(lake: &TestLake) -> Result<Vec<(String, String)>> {
    let b = lake.read("raw/member").await?;
    let mut rows: Vec<(String, String)> = strings(&b, "order_owner")?
        .into_iter()
        .zip(strings(&b, "membership")?)
        .map(|(o, m)| (o.unwrap_or_default(), m.unwrap_or_default()))
        .collect();
    rows.sort();
    Ok(rows)
}

/// `raw/member` with 4 small files in each of the partitions `owners`; the records sent.
async fn small_files(lake: &TestLake, owners: &[&str]) -> Result<Vec<(String, String)>> {
    let ing = lake.ingestor()?;
    let mut sent = Vec::new();
    for round in 0..4 {
        let batch: Vec<SourceRecord> = owners
            .iter()
            .enumerate()
            .map(|(k, o)| member(round * owners.len() + k, o))
            .collect();
        ing.ingest(&batch).await?;
        for (k, o) in owners.iter().enumerate() {
            sent.push((o.to_string(), format!("m{}", round * owners.len() + k)));
        }
    }
    sent.sort();
    Ok(sent)
}

/// Run a whole compaction of `table` on a plain lake from inside a log-PUT hook (its own
/// runtime: `compact` takes a non-Send progress callback).
fn compaction_meanwhile(
    lake: &TestLake,
    table: &'static str,
) -> Result<futures::future::BoxFuture<'static, ()>> {
    let l = Lake::new(&lake.config.lake)?;
    Ok(Box::pin(async move {
        let landed = tokio::task::spawn_blocking(move || {
            let rt = tokio::runtime::Runtime::new().ok()?;
            let r = rt.block_on(compact(
                &l,
                table,
                &CompactOptions::default(),
                chrono::Utc::now(),
                &|_, _| {},
            ));
            r.ok()?.version
        })
        .await;
        assert!(
            matches!(landed, Ok(Some(_))),
            "the other compaction must land"
        );
    }))
}

// Defect 1 (a): a compaction commits partition after partition; another compaction of every
// partition lands while the first one's first partition is about to commit. The first
// partition's bins are dropped (their files are gone); the second partition must be checked
// against the other compaction's commit too, not landed on top of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compaction_checks_later_partitions_against_every_commit_since_its_plan() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "compact-partitions")?;
        let sent = small_files(&lake, &["alice", "bob"]).await?;
        let faults = Arc::new(Faults::default());
        *faults
            .before_log_put
            .lock()
            .map_err(|_| anyhow::anyhow!("lock"))? =
            Some(compaction_meanwhile(&lake, "raw/member")?);
        let r = compact(
            &faults.install(Lake::new(&lake.config.lake)?),
            "raw/member",
            &CompactOptions::default(),
            chrono::Utc::now(),
            &|_, _| {},
        )
        .await?;
        assert_eq!(
            members(&lake).await?,
            sent,
            "{b:?}: every row exactly once ({r:?})"
        );
        assert_eq!(
            r.partitions_compacted, 0,
            "{b:?}: both partitions were taken: {r:?}"
        );
    }
    Ok(())
}

// Defect 1 (b): the compaction's log PUT fails (a 503 before the write) while another
// compaction of the same files lands; the retry must be checked, not landed blindly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compaction_retry_after_a_storage_error_is_checked() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "compact-retry")?;
        let sent = small_files(&lake, &["alice"]).await?;
        let faults = Arc::new(Faults::default());
        *faults
            .before_log_put
            .lock()
            .map_err(|_| anyhow::anyhow!("lock"))? =
            Some(compaction_meanwhile(&lake, "raw/member")?);
        faults.refuse.store(1, Ordering::SeqCst);
        let r = compact(
            &faults.install(Lake::new(&lake.config.lake)?),
            "raw/member",
            &CompactOptions::default(),
            chrono::Utc::now(),
            &|_, _| {},
        )
        .await?;
        assert_eq!(
            members(&lake).await?,
            sent,
            "{b:?}: every row exactly once ({r:?})"
        );
        assert_eq!(r.partitions_compacted, 0, "{b:?}: {r:?}");
    }
    Ok(())
}

struct Cdc {
    cfg: PipelineConfig,
    ing: KafkaIngestor,
    offset: i64,
}

impl Cdc {
    fn new(lake: &TestLake) -> Result<Self> {
        let cfg = lake.config_with(&cdc_config("cdc"))?;
        let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
        Ok(Self {
            cfg,
            ing,
            offset: 0,
        })
    }

    /// Ingest one version of changes `(id, v, ts, op)`.
    async fn send(&mut self, changes: &[(i64, &str, &str, &str)]) -> Result<()> {
        let recs: Vec<SourceRecord> = changes
            .iter()
            .map(|(id, v, ts, op)| {
                self.offset += 1;
                let json =
                    format!(r#"{{"id":{id},"v":"{v}","ts":"2026-01-01T{ts}Z","op":"{op}"}}"#);
                SourceRecord::new("cdc", 0, self.offset, 0, json.as_bytes())
            })
            .collect();
        self.ing.ingest(&recs).await?;
        Ok(())
    }

    async fn upsert(&self, l: &Lake, s: &CommitSettings) -> Result<()> {
        let job = self.cfg.refine_job("cdc").context("job")?;
        let ctx = RunContext::new(&self.cfg, l, s, chrono::Utc::now());
        run_job(&ctx, job, 100).await?;
        Ok(())
    }

    fn settings(&self) -> CommitSettings {
        (&self.cfg.commit).into()
    }
}

/// Sorted `(id, v)` of the upsert's output.
async fn output(l: &Lake) -> Result<Vec<(String, String)>> {
    let b = read::read_table(l, "silver/cdc", None).await?;
    let mut rows: Vec<(String, String)> = strings(&b, "id")?
        .into_iter()
        .zip(strings(&b, "v")?)
        .map(|(i, v)| (i.unwrap_or_default(), v.unwrap_or_default()))
        .collect();
    rows.sort();
    Ok(rows)
}

fn rows(r: &[(&str, &str)]) -> Vec<(String, String)> {
    r.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

// Defect 2: the upsert run that writes the tombstones of two deletes dies before its output
// commit lands (every output PUT refused); the next run must still delete both keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_deletes_survive_a_run_that_died_after_writing_their_tombstones() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "cdc-killed")?;
        let mut cdc = Cdc::new(&lake)?;
        let l = Lake::new(&cdc.cfg.lake)?;
        let s = cdc.settings();
        cdc.send(&[
            (1, "a", "10:00:00", "I"),
            (2, "b", "10:00:00", "I"),
            (3, "c", "10:00:00", "I"),
        ])
        .await?;
        cdc.upsert(&l, &s).await?;
        cdc.send(&[(1, "", "11:00:00", "D"), (2, "", "11:00:00", "D")])
            .await?;
        // The tombstone commit passes; every output commit after it is refused.
        let faults = Arc::new(Faults::default());
        faults.pass_first.store(1, Ordering::SeqCst);
        faults.refuse.store(1_000, Ordering::SeqCst);
        let dying = CommitSettings {
            max_attempts: 2,
            ..s.clone()
        };
        assert!(
            cdc.upsert(&faults.install(Lake::new(&cdc.cfg.lake)?), &dying)
                .await
                .is_err(),
            "{b:?}: the output commit was refused"
        );
        assert_eq!(output(&l).await?.len(), 3, "{b:?}: nothing landed yet");
        cdc.upsert(&l, &s).await?;
        assert_eq!(output(&l).await?, rows(&[("3", "c")]), "{b:?}");
    }
    Ok(())
}

// Defect 2: a compaction of the output lands between the upsert's tombstone write and its
// output commit; the re-plan must still apply the delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cdc_delete_survives_a_replan_after_a_compaction_of_the_output() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "cdc-replan")?;
        let mut cdc = Cdc::new(&lake)?;
        let l = Lake::new(&cdc.cfg.lake)?;
        let s = cdc.settings();
        for k in 0..4 {
            cdc.send(&[(k, "x", "10:00:00", "I")]).await?;
            cdc.upsert(&l, &s).await?;
        }
        cdc.send(&[(1, "", "11:00:00", "D")]).await?;
        let faults = Arc::new(Faults::default());
        *faults
            .before_log_put
            .lock()
            .map_err(|_| anyhow::anyhow!("lock"))? =
            Some(compaction_meanwhile(&lake, "silver/cdc")?);
        cdc.upsert(&faults.install(Lake::new(&cdc.cfg.lake)?), &s)
            .await?;
        assert_eq!(
            output(&l).await?,
            rows(&[("0", "x"), ("2", "x"), ("3", "x")]),
            "{b:?}"
        );
    }
    Ok(())
}

// The tie rule: a delete carries the row's last image, often with the same ordering value
// (DMS, Debezium). At equal ordering values the delete wins — against the output's row, and
// against an update of the same batch in either order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_with_the_same_ordering_value_as_the_row_deletes_it() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "cdc-tie")?;
        let mut cdc = Cdc::new(&lake)?;
        let l = Lake::new(&cdc.cfg.lake)?;
        let s = cdc.settings();
        cdc.send(&[(1, "a", "10:00:00", "I"), (9, "keep", "10:00:00", "I")])
            .await?;
        cdc.upsert(&l, &s).await?;
        cdc.send(&[(1, "a", "10:00:00", "D")]).await?;
        cdc.upsert(&l, &s).await?;
        assert_eq!(
            output(&l).await?,
            rows(&[("9", "keep")]),
            "{b:?}: vs the output"
        );
        cdc.send(&[
            (2, "z", "12:00:00", "D"),
            (2, "z", "12:00:00", "U"),
            (3, "a", "12:00:00", "U"),
            (3, "a", "12:00:00", "D"),
        ])
        .await?;
        cdc.upsert(&l, &s).await?;
        assert_eq!(
            output(&l).await?,
            rows(&[("9", "keep")]),
            "{b:?}: in one batch"
        );
        // A later update of a deleted key brings it back; an equal one does not.
        cdc.send(&[(1, "again", "10:00:00", "U"), (2, "back", "12:00:01", "U")])
            .await?;
        cdc.upsert(&l, &s).await?;
        assert_eq!(
            output(&l).await?,
            rows(&[("2", "back"), ("9", "keep")]),
            "{b:?}: tombstones"
        );
    }
    Ok(())
}
