//! Event times a Delta reader cannot take, or that run far ahead of processing time (issue 23,
//! defect 5): at ingest, a timestamp outside the years 0001-9999 is dead-lettered, never
//! written; in the curated join, one far-future row is dead-lettered instead of moving the
//! side's watermark, so later on-time rows still join — on every backend, however the source
//! versions are batched into refine runs.

use anyhow::{Context, Result};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::{Lake, read};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::records::{self, Order};
use lakestream_testkit::{TestLake, assert_accounted, backends, strings};

fn order(offset: i64, id: i32, owner: &str, ts: &str) -> SourceRecord {
    let (id, value) = (i64::from(id), i64::from(id) * 10);
    Order {
        id,
        owner,
        value,
        timestamp: ts,
    }
    .record(0, offset, 0)
}

fn member(offset: i64, owner: &str, level: &str, ts: &str) -> SourceRecord {
    records::member(0, offset, owner, level, ts, 0)
}

/// Dead-letter `(offset or object_uri, error)` pairs, sorted.
async fn letters(lake: &TestLake) -> Result<Vec<(String, String)>> {
    let dl = lake.read("dead_letters").await?;
    let mut out: Vec<(String, String)> = strings(&dl, "offset")?
        .into_iter()
        .zip(strings(&dl, "object_uri")?)
        .zip(strings(&dl, "error")?)
        .map(|((o, u), e)| (o.or(u).unwrap_or_default(), e.unwrap_or_default()))
        .collect();
    out.sort();
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_outside_years_1_to_9999_are_dead_lettered_never_written() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "ts-range")?;
        let ing = lake.ingestor()?;
        let batch = [
            order(1, 1, "alice", r#""2026-11-30T21:13:04.835Z""#),
            // An epoch in microseconds read as milliseconds: year 57,885.
            order(2, 2, "alice", "1764537184835000"),
            // The last millisecond Delta readers accept, and the first they do not.
            order(3, 3, "bob", r#""9999-12-31T23:59:59.999Z""#),
            order(4, 4, "bob", "253402300800000"),
            // One millisecond before 0001-01-01.
            order(5, 5, "bob", "-62135596800001"),
        ];
        let r = ing.ingest(&batch).await?;
        assert_accounted(batch.len(), &r);
        assert_eq!((r.written, r.dead_lettered), (2, 3), "{b:?}: {r:?}");
        let rows = lake.read("raw/order").await?;
        let mut ts = strings(&rows, "timestamp")?;
        ts.sort();
        assert_eq!(
            ts,
            [
                Some("2026-11-30T21:13:04.835Z".to_string()),
                Some("9999-12-31T23:59:59.999Z".to_string())
            ],
            "{b:?}"
        );
        let dl = letters(&lake).await?;
        let offsets: Vec<&str> = dl.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(offsets, ["2", "4", "5"], "{b:?}: {dl:?}");
        for (_, e) in &dl {
            assert!(
                e.contains("timestamp") && e.contains("0001") && e.contains("9999"),
                "{b:?}: the reason names the field and the range: {e}"
            );
        }
        assert!(
            dl[0].1.contains("57885"),
            "{b:?}: the year is named: {}",
            dl[0].1
        );
        assert!(
            dl[0].1.contains("microseconds"),
            "{b:?}: the likely cause is named: {}",
            dl[0].1
        );
    }
    Ok(())
}

/// The versions, one invocation each: a far-future order and a far-future membership between
/// on-time rows.
fn versions() -> Vec<Vec<SourceRecord>> {
    vec![
        vec![
            member(1, "alice", "gold", "2026-01-01T09:30:00Z"),
            member(2, "bob", "bronze", "2026-01-01T09:00:00Z"),
        ],
        vec![order(1, 1, "alice", r#""2026-01-01T10:00:00Z""#)],
        // A year ahead of processing time (valid for Delta, wrong for the pipeline).
        vec![order(2, 2, "alice", r#""2027-01-01T10:00:00Z""#)],
        vec![
            order(3, 3, "alice", r#""2026-01-01T10:15:00Z""#),
            order(4, 4, "bob", r#""2026-01-01T09:30:00Z""#),
        ],
        vec![member(3, "carol", "x", "2030-01-01T00:00:00Z")],
        vec![
            member(4, "carol", "y", "2026-01-01T10:00:00Z"),
            order(5, 5, "carol", r#""2026-01-01T10:30:00Z""#),
        ],
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_far_future_row_is_dead_lettered_and_does_not_make_later_rows_late() -> Result<()> {
    // Processing time of every refine run: an hour after the on-time rows.
    let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T11:00:00Z")?.to_utc();
    for b in backends() {
        for after_each in [true, false] {
            let lake = TestLake::new(b, "refine-future")?;
            let ing = lake.ingestor()?;
            let l = Lake::new(&lake.config.lake)?;
            let settings: CommitSettings = (&lake.config.commit).into();
            let job = lake
                .config
                .refine_job("curated")
                .context("curated job")?
                .clone();
            let run = || async {
                let ctx = RunContext::new(&lake.config, &l, &settings, now);
                anyhow::Ok(run_job(&ctx, &job, 100).await?)
            };
            for v in versions() {
                assert_accounted(v.len(), &ing.ingest(&v).await?);
                if after_each {
                    run().await?;
                }
            }
            run().await?;
            let out = read::read_table(&l, "curated/order", None).await?;
            let mut got: Vec<(String, String)> = strings(&out, "order_id")?
                .into_iter()
                .zip(strings(&out, "membership")?)
                .map(|(o, m)| (o.unwrap_or_default(), m.unwrap_or_default()))
                .collect();
            got.sort();
            assert_eq!(
                got,
                [
                    ("1".to_string(), "gold".to_string()),
                    ("3".into(), "gold".into()),
                    ("4".into(), "bronze".into()),
                    ("5".into(), "y".into()),
                ],
                "{b:?} after_each={after_each}: the on-time rows after the future ones join"
            );
            let dl = letters(&lake).await?;
            let uris: Vec<&str> = dl.iter().map(|l| l.0.as_str()).collect();
            assert_eq!(
                uris,
                ["delta:raw/member@1", "delta:raw/order@1"],
                "{b:?} after_each={after_each}: only the future rows, nothing late: {dl:?}"
            );
            for (_, e) in &dl {
                assert!(
                    e.starts_with("future:") && e.contains("max_future_skew"),
                    "{b:?}: {e}"
                );
            }
        }
    }
    Ok(())
}
