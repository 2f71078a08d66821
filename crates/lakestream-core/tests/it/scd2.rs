//! SCD type 2 apply (issue 26): a bronze table of changes applied into silver with history
//! intervals and Delta's change data feed: in-order history, a late change placed in the
//! middle, a delete closing the open row, a re-insert opening a new one, a redelivery changing
//! nothing, a truncate closing every row; the feed rows of each run. Issue 37: the history is
//! a timeline (a running-maximum clock per key) for DMS full load + CDC, Debezium snapshots
//! and files without a timestamp; a change that changes nothing makes no version; a TOAST
//! placeholder takes the previous version's value.

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
  { name = "doc", type = "string" },
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
toast_placeholder = "__debezium_unavailable_value"
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

    /// Ingest bronze rows given as JSON objects; none may be dead-lettered.
    async fn send_json(&mut self, rows: &[String]) -> Result<()> {
        let records: Vec<SourceRecord> = rows
            .iter()
            .map(|json| {
                self.off += 1;
                SourceRecord::new("bronze", 0, self.off, 0, json.as_bytes())
            })
            .collect();
        let r = self.ing.ingest(&records).await?;
        anyhow::ensure!(r.dead_lettered == 0, "dead letters: {r:?}");
        Ok(())
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

/// A bronze row: id, value, op, `__seq`, `__source_ts` (None: only `__ingested_at`, `ingested`).
fn row(id: i64, v: &str, op: &str, seq: &str, ts: Option<&str>, ingested: &str) -> String {
    let ts = ts.map_or(String::new(), |t| format!(r#""__source_ts":"{t}","#));
    format!(
        r#"{{"id":{id},"v":"{v}","__op":"{op}","__seq":"{seq}",{ts}"__ingested_at":"{ingested}"}}"#
    )
}

/// Silver rows as (id, v, __seq, __START_AT µs, __END_AT µs), sorted by id then `__seq`.
type Version = (i64, String, String, Option<i64>, Option<i64>);

async fn versions(l: &Lake) -> Result<Vec<Version>> {
    let b = read::read_table(l, "silver/hist", None).await?;
    let ids = lakestream_testkit::int64s(&b, "id")?;
    let (v, s) = (strings(&b, "v")?, strings(&b, "__seq")?);
    let (st, en) = (
        lakestream_testkit::int64s(&b, "__START_AT")?,
        lakestream_testkit::int64s(&b, "__END_AT")?,
    );
    let mut rows: Vec<Version> = (0..b.num_rows())
        .map(|i| {
            (
                ids[i].unwrap_or_default(),
                v[i].clone().unwrap_or_default(),
                s[i].clone().unwrap_or_default(),
                st[i],
                en[i],
            )
        })
        .collect();
    rows.sort_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));
    Ok(rows)
}

/// Per key, in `__seq` order: no inverted interval, each version starts where the previous
/// ended (so none overlap), and an as-of query finds at most one version at every time.
fn assert_timeline(rows: &[Version], what: &str) {
    for r in rows {
        if let (Some(s), Some(e)) = (r.3, r.4) {
            assert!(s <= e, "{what}: inverted interval {r:?}");
        }
    }
    for w in rows.windows(2) {
        if w[0].0 == w[1].0 && w[0].4.is_some() {
            assert!(w[0].4 <= w[1].3, "{what}: {:?} overlaps {:?}", w[0], w[1]);
        }
    }
    let mut times: Vec<i64> = rows.iter().flat_map(|r| [r.3, r.4]).flatten().collect();
    times.extend(times.clone().iter().flat_map(|t| [t - 1, t + 1]));
    for t in times {
        let mut ids: Vec<i64> = rows
            .iter()
            .filter(|r| r.3.is_some_and(|s| s <= t) && r.4.is_none_or(|e| t < e))
            .map(|r| r.0)
            .collect();
        let n = ids.len();
        ids.dedup();
        assert_eq!(
            ids.len(),
            n,
            "{what}: as of {t} a key has two versions: {rows:?}"
        );
    }
}

/// µs of `2025-11-29T11:mm:ssZ`.
fn at(mm: u32, ss: u32) -> i64 {
    1_764_414_000_000_000 + (i64::from(mm) * 60 + i64::from(ss)) * 1_000_000
}

/// Issue 37 item 1: a DMS full-load row (its timestamp column is the transfer time) followed by
/// a change committed during the load (an earlier time); a Debezium snapshot row read after a
/// later-committed change; plain files without a timestamp delivered out of order; and a late
/// change recomputed from the stored (clamped) starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scd2_history_is_a_timeline_whatever_the_source_times() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "scd2-timeline")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let s = CommitSettings::from(&cfg.commit);
        let mut bronze = Bronze::new(&cfg)?;
        let ing = "2025-11-29T12:00:00Z";
        let load = "0|00001764416400000000|dms/erp/dbo/items/LOAD00000001.csv|000000000001";
        let cdc = "1|00001764416100000000|dms/erp/dbo/items/20251129-1135000000.csv|000000000001";
        bronze
            .send_json(&[
                // DMS: the full-load row at the transfer time 11:40, then the change committed
                // at 11:35 during the load, written as CDC after it.
                row(1, "loaded", "r", load, Some("2025-11-29T11:40:00Z"), ing),
                row(1, "changed", "u", cdc, Some("2025-11-29T11:35:00Z"), ing),
                // Debezium: a snapshot row (lsn 100) read at 11:50, then a change at lsn 200
                // committed at 11:45.
                row(
                    2,
                    "snap",
                    "r",
                    "00000000000000000100",
                    Some("2025-11-29T11:50:00Z"),
                    ing,
                ),
                row(
                    2,
                    "stream",
                    "u",
                    "00000000000000000200",
                    Some("2025-11-29T11:45:00Z"),
                    ing,
                ),
            ])
            .await?;
        apply(&cfg, &l, &s).await?.context("run 1")?;
        // Plain files, no timestamp column: b.csv (later in `__seq`) arrives first.
        let file = |f: &str| format!("0|00000000000000000000|files/t/{f}|000000000001");
        bronze
            .send_json(&[row(
                3,
                "b",
                "c",
                &file("b.csv"),
                None,
                "2025-11-29T11:05:00Z",
            )])
            .await?;
        apply(&cfg, &l, &s).await?.context("run 2")?;
        bronze
            .send_json(&[row(
                3,
                "a",
                "c",
                &file("a.csv"),
                None,
                "2025-11-29T11:10:00Z",
            )])
            .await?;
        apply(&cfg, &l, &s).await?.context("run 3")?;
        let got = versions(&l).await?;
        assert_timeline(&got, &format!("{b:?}"));
        let want: Vec<Version> = vec![
            (
                1,
                "loaded".into(),
                load.into(),
                Some(at(40, 0)),
                Some(at(40, 0)),
            ),
            (1, "changed".into(), cdc.into(), Some(at(40, 0)), None),
            (
                2,
                "snap".into(),
                "00000000000000000100".into(),
                Some(at(50, 0)),
                Some(at(50, 0)),
            ),
            (
                2,
                "stream".into(),
                "00000000000000000200".into(),
                Some(at(50, 0)),
                None,
            ),
            (
                3,
                "a".into(),
                file("a.csv"),
                Some(at(10, 0)),
                Some(at(10, 0)),
            ),
            (3, "b".into(), file("b.csv"), Some(at(10, 0)), None),
        ];
        assert_eq!(got, want, "{b:?}");

        // A late Debezium change of 2 (lsn 150, committed 11:30): placed between, clamped to
        // the snapshot's start; the stored starts give what the raw times give.
        bronze
            .send_json(&[row(
                2,
                "mid",
                "u",
                "00000000000000000150",
                Some("2025-11-29T11:30:00Z"),
                ing,
            )])
            .await?;
        apply(&cfg, &l, &s).await?.context("run 4")?;
        let got = versions(&l).await?;
        assert_timeline(&got, &format!("{b:?} after the late change"));
        let two: Vec<_> = got
            .iter()
            .filter(|r| r.0 == 2)
            .map(|r| (r.1.as_str(), r.3, r.4))
            .collect();
        assert_eq!(
            two,
            [
                ("snap", Some(at(50, 0)), Some(at(50, 0))),
                ("mid", Some(at(50, 0)), Some(at(50, 0))),
                ("stream", Some(at(50, 0)), None),
            ],
            "{b:?}"
        );
    }
    Ok(())
}

/// Issue 37 item 2: re-emissions and re-snapshots with equal values add no version and no feed
/// rows; v1 A, v2 A, v3 B are two versions (A from v1, B from v3); after a delete an equal
/// row is a new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_changes_nothing_makes_no_version() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "scd2-noop")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let s = CommitSettings::from(&cfg.commit);
        let mut bronze = Bronze::new(&cfg)?;
        // v1 A, then a re-snapshot of A (`r`, a later position) in the same run.
        bronze
            .send(&[
                (Some(1), "A", "c", 10),
                (Some(1), "A", "r", 20),
                (Some(2), "x", "c", 11),
            ])
            .await?;
        let v = apply(&cfg, &l, &s).await?.context("run 1")?;
        assert_eq!(
            feed(&l, v).await?,
            t4(&[("insert", "1", "10", "-"), ("insert", "2", "11", "-")]),
            "{b:?}"
        );
        // A re-snapshot of everything, unchanged, in its own run: no row, no feed row.
        bronze
            .send(&[(Some(1), "A", "r", 25), (Some(2), "x", "r", 25)])
            .await?;
        let v = apply(&cfg, &l, &s).await?.context("run 2")?;
        assert!(
            feed(&l, v).await?.is_empty(),
            "{b:?}: {:?}",
            feed(&l, v).await?
        );
        // v3 B: A from v1's start to v3, B from v3.
        bronze.send(&[(Some(1), "B", "u", 30)]).await?;
        let v = apply(&cfg, &l, &s).await?.context("run 3")?;
        assert_eq!(
            feed(&l, v).await?,
            t4(&[
                ("insert", "1", "30", "-"),
                ("update_preimage", "1", "10", "-"),
                ("update_postimage", "1", "10", "30")
            ]),
            "{b:?}"
        );
        // A delete, then B again: a new version (nothing was open).
        bronze
            .send(&[(Some(1), "B", "d", 40), (Some(1), "B", "c", 45)])
            .await?;
        apply(&cfg, &l, &s).await?.context("run 4")?;
        assert_eq!(
            silver(&l).await?,
            t4(&[
                ("1", "A", "10", "30"),
                ("1", "B", "30", "40"),
                ("1", "B", "45", "-"),
                ("2", "x", "11", "-")
            ]),
            "{b:?}"
        );
        // Two equal updates of 2 in one run: one version.
        bronze
            .send(&[(Some(2), "y", "u", 12), (Some(2), "y", "u", 13)])
            .await?;
        apply(&cfg, &l, &s).await?.context("run 5")?;
        let two: Vec<_> = silver(&l)
            .await?
            .into_iter()
            .filter(|r| r.0 == "2")
            .collect();
        assert_eq!(
            two,
            t4(&[("2", "x", "11", "12"), ("2", "y", "12", "-")]),
            "{b:?}"
        );
        assert_timeline(&versions(&l).await?, &format!("{b:?}"));
    }
    Ok(())
}

/// Issue 37 item 3: PostgreSQL's unchanged-TOAST placeholder (text, and the base64 of its
/// bytes as a `bytea` column arrives without schemas) takes the previous version's value, in
/// silver and in the feed's post-image; with no previous version it is null.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toast_placeholder_is_the_previous_versions_value() -> Result<()> {
    const P: &str = "__debezium_unavailable_value";
    const P64: &str = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";
    for b in backends() {
        let lake = TestLake::new(b, "scd2-toast")?;
        let cfg = config(&lake)?;
        let l = Lake::new(&cfg.lake)?;
        let s = CommitSettings::from(&cfg.commit);
        let mut bronze = Bronze::new(&cfg)?;
        let ch = |id: i64, v: &str, doc: &str, op: &str, seq: u32| {
            format!(
                r#"{{"id":{id},"v":"{v}","doc":"{doc}","__op":"{op}","__seq":"{seq:02}","__source_ts":"2026-01-01T00:00:{seq:02}Z"}}"#
            )
        };
        bronze
            .send_json(&[
                ch(1, "a", "big text", "c", 10),
                ch(1, "b", P, "u", 20),
                ch(2, "x", P, "c", 15),
            ])
            .await?;
        apply(&cfg, &l, &s).await?.context("run 1")?;
        bronze.send_json(&[ch(1, "c", P64, "u", 30)]).await?;
        let v = apply(&cfg, &l, &s).await?.context("run 2")?;
        let docs = |batch: &deltalake::arrow::array::RecordBatch| -> Result<Vec<(String, String, String)>> {
            let (v, d, k) = (strings(batch, "v")?, strings(batch, "doc")?, strings(batch, "__seq")?);
            let mut out: Vec<_> = (0..batch.num_rows())
                .map(|i| (k[i].clone().unwrap_or_default(), v[i].clone().unwrap_or_default(), d[i].clone().unwrap_or_else(|| "-".into())))
                .collect();
            out.sort();
            Ok(out)
        };
        let all = read::read_table(&l, "silver/hist", None).await?;
        let want = |r: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
            r.iter()
                .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
                .collect()
        };
        assert_eq!(
            docs(&all)?,
            want(&[
                ("10", "a", "big text"),
                ("15", "x", "-"),
                ("20", "b", "big text"),
                ("30", "c", "big text")
            ]),
            "{b:?}"
        );
        let c = lakestream_core::inspect::changes(&l, "silver/hist", v, Some(v)).await?;
        let types = strings(&c.rows, "_change_type")?;
        let post: Vec<_> = docs(&c.rows)?;
        assert!(types.contains(&Some("insert".into())), "{b:?}");
        assert!(post.iter().all(|r| r.2 == "big text"), "{b:?}: {post:?}");
    }
    Ok(())
}
