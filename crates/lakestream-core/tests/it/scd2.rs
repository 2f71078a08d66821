//! SCD type 2 apply (issue 26): a bronze table of changes applied into silver with history
//! intervals and Delta's change data feed: in-order history, a late change placed in the
//! middle, a delete closing the open row, a re-insert opening a new one, a redelivery changing
//! nothing, a truncate closing every row; the feed rows of each run.

use anyhow::{Context, Result};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::{KafkaIngestor, Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{TestLake, backends, strings};

const CONF: &str = r#"
[[topics]]
topic = "bronze"
table = "raw/bronze"
schema_mode = "merge"
columns = [
  { name = "id", type = "int64" },
  { name = "v", type = "string" },
  { name = "__op", type = "string", nullable = false },
  { name = "__seq", type = "string", nullable = false },
  { name = "__source_ts", type = "timestamp" },
  { name = "__ingested_at", type = "timestamp" },
]

[[refine]]
job = "hist"
output = "silver/hist"
[refine.cdc]
source = "raw/bronze"
keys = ["id"]
scd = 2
"#;

fn config(lake: &TestLake) -> Result<PipelineConfig> {
    let mut cfg = PipelineConfig::from_toml(&format!("{}\n{CONF}", lakestream_testkit::EXAMPLE))?;
    cfg.lake = lake.config.lake.clone();
    cfg.commit = lake.config.commit.clone();
    Ok(cfg)
}

/// A change: offset, id (None: a truncate), value, op, seq (2 digits), second of the minute
/// (`__source_ts`; value `no-ts`: none, `__ingested_at` at that second of the next minute).
fn change(o: i64, id: Option<i64>, v: &str, op: &str, seq: u32) -> SourceRecord {
    let id = id.map_or("null".to_string(), |i| i.to_string());
    let time = if v == "no-ts" {
        format!(r#""__ingested_at":"2026-01-01T00:01:{seq:02}Z""#)
    } else {
        format!(r#""__source_ts":"2026-01-01T00:00:{seq:02}Z""#)
    };
    let json = format!(r#"{{"id":{id},"v":"{v}","__op":"{op}","__seq":"{seq:02}",{time}}}"#);
    SourceRecord::new("bronze", 0, o, 0, json.as_bytes())
}

/// Writes changes into the bronze topic table, at the next offsets.
struct Bronze {
    ing: KafkaIngestor,
    off: i64,
}

impl Bronze {
    fn new(cfg: &PipelineConfig) -> Result<Self> {
        let clock = std::sync::Arc::new(lakestream_core::SystemClock);
        Ok(Self {
            ing: KafkaIngestor::new(cfg.clone(), clock)?,
            off: 0,
        })
    }

    /// Ingest (id, value, op, seq) changes; none may be dead-lettered.
    async fn send(&mut self, changes: &[(Option<i64>, &str, &str, u32)]) -> Result<()> {
        let records: Vec<SourceRecord> = changes
            .iter()
            .map(|&(id, v, op, seq)| {
                self.off += 1;
                change(self.off, id, v, op, seq)
            })
            .collect();
        let r = self.ing.ingest(&records).await?;
        anyhow::ensure!(r.dead_lettered == 0, "dead letters: {r:?}");
        Ok(())
    }
}

/// Silver rows (id, v, __seq, __END_SEQ), sorted.
async fn silver(l: &Lake) -> Result<Vec<(String, String, String, String)>> {
    let b = read::read_table(l, "silver/hist", None).await?;
    let col = |n: &str| strings(&b, n);
    let (id, v, s, e) = (col("id")?, col("v")?, col("__seq")?, col("__END_SEQ")?);
    let mut rows: Vec<_> = (0..b.num_rows())
        .map(|i| {
            let g = |c: &Vec<Option<String>>| c[i].clone().unwrap_or_else(|| "-".into());
            (g(&id), g(&v), g(&s), g(&e))
        })
        .collect();
    rows.sort();
    Ok(rows)
}

/// The change feed of silver version `v`: (_change_type, id, __seq, __END_SEQ), sorted.
async fn feed(l: &Lake, v: u64) -> Result<Vec<(String, String, String, String)>> {
    let c = lakestream_core::inspect::changes(l, "silver/hist", v, Some(v)).await?;
    let b = &c.rows;
    let col = |n: &str| strings(b, n);
    let (k, id, s, e) = (
        col("_change_type")?,
        col("id")?,
        col("__seq")?,
        col("__END_SEQ")?,
    );
    let mut rows: Vec<_> = (0..b.num_rows())
        .map(|i| {
            let g = |c: &Vec<Option<String>>| c[i].clone().unwrap_or_else(|| "-".into());
            (g(&k), g(&id), g(&s), g(&e))
        })
        .collect();
    rows.sort();
    Ok(rows)
}

fn t4(r: &[(&str, &str, &str, &str)]) -> Vec<(String, String, String, String)> {
    let mut v: Vec<_> = r
        .iter()
        .map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string()))
        .collect();
    v.sort();
    v
}

async fn apply(cfg: &PipelineConfig, l: &Lake, s: &CommitSettings) -> Result<Option<u64>> {
    let job = cfg.refine_job("hist").context("job")?;
    let ctx = RunContext::new(cfg, l, s, chrono::Utc::now());
    let r = run_job(&ctx, job, 1000).await?;
    Ok(r.runs.iter().filter_map(|r| r.output_version).max())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scd2_history_and_change_feed() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "scd2")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let s = CommitSettings::from(&cfg.commit);
        let mut bronze = Bronze::new(&cfg)?;

        // Run 1, in order: 1 inserted then updated; 2 inserted.
        bronze
            .send(&[
                (Some(1), "a", "c", 10),
                (Some(1), "b", "u", 20),
                (Some(2), "x", "c", 15),
            ])
            .await?;
        let v = apply(&cfg, &l, &s).await?.context("run 1 committed")?;
        assert_eq!(
            silver(&l).await?,
            t4(&[
                ("1", "a", "10", "20"),
                ("1", "b", "20", "-"),
                ("2", "x", "15", "-")
            ]),
            "{b:?}"
        );
        assert_eq!(
            feed(&l, v).await?,
            t4(&[
                ("insert", "1", "10", "20"),
                ("insert", "1", "20", "-"),
                ("insert", "2", "15", "-")
            ]),
            "{b:?}"
        );

        // Run 2, a late change of 1 between 10 and 20; 2 untouched.
        bronze.send(&[(Some(1), "late", "u", 12)]).await?;
        let v = apply(&cfg, &l, &s).await?.context("run 2")?;
        assert_eq!(
            silver(&l).await?,
            t4(&[
                ("1", "a", "10", "12"),
                ("1", "late", "12", "20"),
                ("1", "b", "20", "-"),
                ("2", "x", "15", "-")
            ]),
            "{b:?}"
        );
        assert_eq!(
            feed(&l, v).await?,
            t4(&[
                ("insert", "1", "12", "20"),
                ("update_preimage", "1", "10", "20"),
                ("update_postimage", "1", "10", "12")
            ]),
            "{b:?}"
        );

        // Run 3, a delete closes 1; a redelivery of (2, 15) changes nothing.
        bronze
            .send(&[(Some(1), "b", "d", 30), (Some(2), "x", "c", 15)])
            .await?;
        let v = apply(&cfg, &l, &s).await?.context("run 3")?;
        assert_eq!(
            silver(&l).await?,
            t4(&[
                ("1", "a", "10", "12"),
                ("1", "late", "12", "20"),
                ("1", "b", "20", "30"),
                ("2", "x", "15", "-")
            ]),
            "{b:?}"
        );
        assert_eq!(
            feed(&l, v).await?,
            t4(&[
                ("update_preimage", "1", "20", "-"),
                ("update_postimage", "1", "20", "30")
            ]),
            "{b:?}"
        );

        // Run 4, a redelivery only: the txn moves, no row and no feed row.
        bronze.send(&[(Some(1), "late", "u", 12)]).await?;
        let v = apply(&cfg, &l, &s).await?.context("run 4")?;
        assert!(feed(&l, v).await?.is_empty(), "{b:?}");

        // Run 5, a re-insert after the delete opens a new row.
        bronze.send(&[(Some(1), "again", "c", 40)]).await?;
        let v = apply(&cfg, &l, &s).await?.context("run 5")?;
        assert_eq!(
            feed(&l, v).await?,
            t4(&[("insert", "1", "40", "-")]),
            "{b:?}"
        );

        // Run 6, a truncate closes every open row and is recorded.
        bronze.send(&[(None, "", "t", 50)]).await?;
        let v = apply(&cfg, &l, &s).await?.context("run 6")?;
        assert_eq!(
            silver(&l).await?,
            t4(&[
                ("1", "a", "10", "12"),
                ("1", "late", "12", "20"),
                ("1", "b", "20", "30"),
                ("1", "again", "40", "50"),
                ("2", "x", "15", "50")
            ]),
            "{b:?}"
        );
        assert_eq!(
            feed(&l, v).await?,
            t4(&[
                ("update_preimage", "1", "40", "-"),
                ("update_postimage", "1", "40", "50"),
                ("update_preimage", "2", "15", "-"),
                ("update_postimage", "2", "15", "50")
            ]),
            "{b:?}"
        );
        let h = lakestream_core::table::TableHandle::open_existing(&l, "silver/hist").await?;
        let snap = h.snapshot()?;
        assert_eq!(
            snap.metadata()
                .configuration()
                .get("lakestream.cdc.truncated_at")
                .map(String::as_str),
            Some("50"),
            "{b:?}"
        );
        assert_eq!(snap.protocol().min_writer_version(), 4, "{b:?}");
    }
    Ok(())
}

/// A delete delivered before the upsert it closes (out of order across runs), and a truncate
/// before an older insert, still close them when they arrive: silver keeps no trace of such a
/// delete, so the job's side table (`_lakestream/<job>/tombstones`) does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_or_truncate_delivered_first_closes_what_arrives_later() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "scd2-early-delete")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let s = CommitSettings::from(&cfg.commit);
        let mut bronze = Bronze::new(&cfg)?;
        for (run, changes) in [
            // The delete of 3 (at 35, no source time) first; 4 is inserted so silver exists;
            // 6 inserted and deleted.
            vec![
                (Some(3), "no-ts", "d", 35),
                (Some(4), "y", "c", 31),
                (Some(6), "b", "c", 41),
                (Some(6), "b", "d", 49),
            ],
            // The insert 3's delete ends, then a re-insert after it; an older delete of 6
            // closes its row first (the delete at 49 now closes nothing)...
            vec![(Some(3), "a", "c", 32), (Some(6), "b", "d", 45)],
            // ... and still closes the re-insert made between them, delivered last.
            vec![(Some(3), "z", "c", 38), (Some(6), "c", "c", 47)],
            // A truncate at 58, then an insert made before it, delivered after it.
            vec![(None, "", "t", 58)],
            vec![(Some(5), "old", "c", 55)],
        ]
        .into_iter()
        .enumerate()
        {
            bronze.send(&changes).await?;
            apply(&cfg, &l, &s)
                .await?
                .with_context(|| format!("run {run} committed"))?;
        }
        assert_eq!(
            silver(&l).await?,
            t4(&[
                ("3", "a", "32", "35"),
                ("3", "z", "38", "58"),
                ("4", "y", "31", "58"),
                ("5", "old", "55", "58"),
                ("6", "b", "41", "45"),
                ("6", "c", "47", "49"),
            ]),
            "{b:?}"
        );
        // Every closed row has its end time, also the one closed by the stored delete
        // without a source time.
        let rows = read::read_table(&l, "silver/hist", None).await?;
        let ends = strings(&rows, "__END_SEQ")?.into_iter();
        let ends: Vec<_> = ends.zip(strings(&rows, "__END_AT")?).collect();
        let untimed: Vec<_> = ends
            .iter()
            .filter(|(s, at)| s.is_none() != at.is_none())
            .collect();
        assert!(untimed.is_empty(), "{b:?}: {untimed:?}");
        let at_35 = ends.iter().find(|(s, _)| s.as_deref() == Some("35"));
        let at_35 = at_35.and_then(|(_, at)| at.as_deref());
        assert!(
            at_35.is_some_and(|t| t.starts_with("2026-01-01T00:01:35")),
            "{b:?}: {at_35:?}"
        );
    }
    Ok(())
}
