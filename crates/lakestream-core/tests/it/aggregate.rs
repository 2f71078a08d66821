//! The incremental aggregate (gold) over a source that changes in place: an upsert output with
//! CDC deletes (its commits remove and rewrite files), compacted now and then. After every run
//! the gold table equals the GROUP BY recomputed here, in plain Rust over the source read at the
//! version the run consumed; two runs at once, and a compaction of gold landing between a run's
//! plan and its commit, count every group once.

use super::faults::Faults;
use anyhow::{Context, Result};
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Float64Type, Int64Type};
use lakestream_core::commit::CommitSettings;
use lakestream_core::refine::{RunContext, run_job};
use lakestream_core::{KafkaIngestor, Lake, read};
use lakestream_formats::config::PipelineConfig;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{CDC_OP, TestLake, backends, cdc_topic, cdc_upsert};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The gold job over the upsert `silver` (see [`jobs`]).
const GOLD: &str = r#"
[[refine]]
job = "gold_cdc"
output = "gold/cdc"
partition_by = ["owner"]
max_files_per_run = 3
[refine.aggregate]
source = "silver/cdc"
group_by = ["owner", "date(ts) as day"]
measures = ["count(*) as n", "sum(value) as total", "min(value) as smallest", "max(value) as largest", "avg(value) as mean", "count(value) as valued"]
"#;

/// Topic `cdc` (`raw/cdc`: an owner and a value per id), its upsert `silver` into
/// `silver/cdc`, and the gold job `gold_cdc` over it.
fn jobs() -> String {
    let columns = r#"  { name = "id", type = "int64", nullable = false },
  { name = "owner", type = "string" },
  { name = "value", type = "int64" },
  { name = "ts", type = "timestamp", nullable = false },
"#;
    cdc_topic(&format!("{columns}{CDC_OP}"), "") + &cdc_upsert("silver", "silver/cdc", true) + GOLD
}

fn config(lake: &TestLake) -> Result<PipelineConfig> {
    Ok(lake.config_with(&jobs())?)
}

/// Per group (owner, day): rows, sum, min, max, avg, non-null count.
type Expected =
    BTreeMap<(String, String), (i64, Option<i64>, Option<i64>, Option<i64>, Option<f64>, i64)>;

fn texts(b: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    let c = cast(b.column_by_name(name).context("column")?, &DataType::Utf8)?;
    let s = c.as_string::<i32>();
    Ok((0..s.len())
        .map(|i| s.is_valid(i).then(|| s.value(i).to_string()))
        .collect())
}

fn ints(b: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let c = cast(b.column_by_name(name).context("column")?, &DataType::Int64)?;
    let s = c.as_primitive::<Int64Type>();
    Ok((0..s.len())
        .map(|i| s.is_valid(i).then(|| s.value(i)))
        .collect())
}

/// GROUP BY owner, date(ts) over `silver/cdc` at `version`, computed here.
async fn recompute(l: &Lake, version: u64) -> Result<Expected> {
    let b = read::read_table(l, "silver/cdc", Some(version)).await?;
    let owners = texts(&b, "owner")?;
    let days: Vec<Option<String>> = texts(&b, "ts")?
        .into_iter()
        .map(|t| t.map(|t| t[..10].to_string()))
        .collect();
    let values = ints(&b, "value")?;
    let mut acc: BTreeMap<(String, String), Vec<Option<i64>>> = BTreeMap::new();
    for i in 0..b.num_rows() {
        acc.entry((
            owners[i].clone().unwrap_or_default(),
            days[i].clone().unwrap_or_default(),
        ))
        .or_default()
        .push(values[i]);
    }
    Ok(acc
        .into_iter()
        .map(|(k, vs)| {
            let some: Vec<i64> = vs.iter().flatten().copied().collect();
            let sum = (!some.is_empty()).then(|| some.iter().sum::<i64>());
            let avg = sum.map(|s| s as f64 / some.len() as f64);
            let v = (
                vs.len() as i64,
                sum,
                some.iter().min().copied(),
                some.iter().max().copied(),
                avg,
                some.len() as i64,
            );
            (k, v)
        })
        .collect())
}

/// The gold table as the same map, and the source version its `txn` says it consumed.
async fn gold(l: &Lake) -> Result<(Expected, u64)> {
    let b = read::read_table(l, "gold/cdc", None).await?;
    let (owners, days) = (texts(&b, "owner")?, texts(&b, "day")?);
    let (n, total, lo, hi, valued) = (
        ints(&b, "n")?,
        ints(&b, "total")?,
        ints(&b, "smallest")?,
        ints(&b, "largest")?,
        ints(&b, "valued")?,
    );
    let mean = b
        .column_by_name("mean")
        .context("mean")?
        .as_primitive::<Float64Type>()
        .clone();
    let mut out = Expected::new();
    for i in 0..b.num_rows() {
        let k = (
            owners[i].clone().unwrap_or_default(),
            days[i].clone().unwrap_or_default(),
        );
        let v = (
            n[i].unwrap_or(-1),
            total[i],
            lo[i],
            hi[i],
            mean.is_valid(i).then(|| mean.value(i)),
            valued[i].unwrap_or(-1),
        );
        assert!(out.insert(k.clone(), v).is_none(), "group {k:?} twice");
    }
    let mut h = lakestream_core::table::TableHandle::open_existing(l, "gold/cdc").await?;
    let app = lakestream_core::refine::source_app_id("orders-raw", "gold_cdc", "silver/cdc");
    let consumed = h
        .committed(std::slice::from_ref(&app))
        .await?
        .get(&app)
        .copied()
        .context("txn")?;
    Ok((out, consumed as u64))
}

fn close(a: &Expected, b: &Expected) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((ka, va), (kb, vb))| {
            ka == kb
                && (va.0, va.1, va.2, va.3, va.5) == (vb.0, vb.1, vb.2, vb.3, vb.5)
                && match (va.4, vb.4) {
                    (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(1.0),
                    (x, y) => x == y,
                }
        })
}

/// Run `job` until nothing is new: (source rows retracted, groups recomputed).
async fn run(
    cfg: &PipelineConfig,
    l: &Lake,
    s: &CommitSettings,
    job: &str,
) -> Result<(usize, usize)> {
    let job = cfg.refine_job(job).context("job")?;
    let ctx = RunContext::new(cfg, l, s, chrono::Utc::now());
    let r = run_job(&ctx, job, 1000).await?;
    Ok(r.runs
        .iter()
        .filter_map(|r| r.aggregated())
        .fold((0, 0), |(a, b), c| (a + c.retracted, b + c.recomputed)))
}

/// A random CDC batch over ids 0..40: inserts and updates (values sometimes null, owners of
/// four, times over three days) and deletes.
fn batch(rng: &mut fastrand::Rng, offset: &mut i64, clock: &mut i64) -> Vec<SourceRecord> {
    (0..rng.usize(1..25))
        .map(|_| {
            *offset += 1;
            *clock += rng.i64(1..4000);
            let ts =
                chrono::DateTime::from_timestamp(1_764_547_200 + *clock, 0).unwrap_or_default();
            let id = rng.i64(0..40);
            let op = if rng.u8(0..5) == 0 { "D" } else { "U" };
            let value = if rng.u8(0..8) == 0 {
                "null".to_string()
            } else {
                rng.i64(-50..500).to_string()
            };
            let owner = ["ann", "bob", "cy", "dee"][rng.usize(0..4)];
            let json = format!(
                r#"{{"id":{id},"owner":"{owner}","value":{value},"ts":"{}","op":"{op}"}}"#,
                ts.format("%Y-%m-%dT%H:%M:%SZ")
            );
            SourceRecord::new("cdc", 0, *offset, 0, json.as_bytes())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gold_equals_group_by_of_its_changing_source_after_every_run() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "aggregate")?;
        let cfg = config(&lake)?;
        let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
        let faults = Arc::new(Faults::default());
        let l = faults.install(Lake::new(&cfg.lake)?);
        let s: CommitSettings = (&cfg.commit).into();
        let mut rng = fastrand::Rng::with_seed(20261202);
        let (mut offset, mut clock) = (0i64, 0i64);
        let (mut retracted, mut recomputed) = (0, 0);
        for step in 0..14 {
            for _ in 0..rng.usize(1..4) {
                ing.ingest(&batch(&mut rng, &mut offset, &mut clock))
                    .await?;
                run(&cfg, &l, &s, "silver").await?;
            }
            if step % 4 == 3 {
                let opts = lakestream_core::maintenance::CompactOptions {
                    min_small_files: 2,
                    ..Default::default()
                };
                lakestream_core::maintenance::compact(
                    &l,
                    "silver/cdc",
                    &opts,
                    chrono::Utc::now(),
                    &|_, _| {},
                )
                .await?;
            }
            let ran = match step % 3 {
                // Two runs at once.
                0 => {
                    let (a, b) =
                        tokio::join!(run(&cfg, &l, &s, "gold_cdc"), run(&cfg, &l, &s, "gold_cdc"));
                    let (a, b) = (a?, b?);
                    (a.0 + b.0, a.1 + b.1)
                }
                // A compaction of the source lands between the run's plan and its commit (gold
                // keeps one file per partition: each run rewrites a touched partition whole).
                1 => {
                    let files = read::summarize(&l, "silver/cdc")
                        .await?
                        .map_or(0, |s| s.files);
                    if files >= 2 {
                        faults.compact_before_next_log_put(&l, "silver/cdc");
                    }
                    run(&cfg, &l, &s, "gold_cdc").await?
                }
                // Killed before its commit lands: the next run does it all.
                2 if step > 2 => {
                    let once = CommitSettings {
                        max_attempts: 1,
                        ..s.clone()
                    };
                    faults.refuse.store(1, std::sync::atomic::Ordering::SeqCst);
                    assert!(run(&cfg, &l, &once, "gold_cdc").await.is_err());
                    run(&cfg, &l, &s, "gold_cdc").await?
                }
                _ => run(&cfg, &l, &s, "gold_cdc").await?,
            };
            (retracted, recomputed) = (retracted + ran.0, recomputed + ran.1);
            let (got, consumed) = gold(&l).await?;
            let want = recompute(&l, consumed).await?;
            assert!(
                close(&got, &want),
                "{backend:?} step {step}: gold\n{got:#?}\nGROUP BY at v{consumed}\n{want:#?}"
            );
        }
        // The schedule retracted rows and recomputed extremes (the paths under test ran).
        assert!(retracted > 20 && recomputed > 5, "{retracted} {recomputed}");
    }
    Ok(())
}

/// Rows of `table` as `(group text, count, max)`, sorted, by `group`.
async fn groups_of(
    l: &Lake,
    table: &str,
    group: &[&str],
) -> Result<Vec<(String, i64, Option<i64>)>> {
    let b = read::read_table(l, table, None).await?;
    let cols: Vec<Vec<Option<String>>> =
        group.iter().map(|g| texts(&b, g)).collect::<Result<_>>()?;
    let (n, hi) = (ints(&b, "n")?, ints(&b, "hi")?);
    let mut out: Vec<(String, i64, Option<i64>)> = (0..b.num_rows())
        .map(|i| {
            let key: Vec<String> = cols.iter().map(|c| format!("{:?}", c[i])).collect();
            (key.join("|"), n[i].unwrap_or(-1), hi[i])
        })
        .collect();
    out.sort();
    Ok(out)
}

/// A gold table partitioned by a float and a timestamp group column keeps one row per group
/// across runs: Delta writes such partition values as `2.5` / `2026-12-01 10:00:00.000000`,
/// arrow prints `2.5` / `2026-12-01T10:00:00Z`, so files are not found by comparing text (before
/// the fix, the second run added a second row for each group).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_float_and_timestamp_partitioned_gold_keeps_one_row_per_group() -> Result<()> {
    const FLOATS: &str = r#"
[[topics]]
topic = "f"
table = "raw/f"
columns = [
  { name = "k", type = "float64" },
  { name = "at", type = "timestamp", nullable = false },
  { name = "v", type = "int64" },
]

[[refine]]
job = "gold_f"
output = "gold/f"
partition_by = ["k", "at"]
[refine.aggregate]
source = "raw/f"
group_by = ["k", "at"]
measures = ["count(*) as n", "max(v) as hi"]
"#;
    for backend in backends() {
        let lake = TestLake::new(backend, "aggregate-float")?;
        let mut cfg =
            PipelineConfig::from_toml(&format!("{}\n{FLOATS}", lakestream_testkit::EXAMPLE))?;
        cfg.lake = lake.config.lake.clone();
        cfg.commit = lake.config.commit.clone();
        let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let rec = |o: i64, k: &str, v: i64| {
            let json = format!(r#"{{"k":{k},"at":"2026-12-01T10:00:00Z","v":{v}}}"#);
            SourceRecord::new("f", 0, o, 0, json.as_bytes())
        };
        ing.ingest(&[rec(0, "2.5", 1), rec(1, "1", 7)]).await?;
        run(&cfg, &l, &s, "gold_f").await?;
        ing.ingest(&[rec(2, "2.5", 4), rec(3, "1", 2)]).await?;
        run(&cfg, &l, &s, "gold_f").await?;
        let got = groups_of(&l, "gold/f", &["k"]).await?;
        assert_eq!(
            got,
            [
                ("Some(\"1.0\")".to_string(), 2, Some(7)),
                ("Some(\"2.5\")".to_string(), 2, Some(4))
            ],
            "{backend:?}"
        );
    }
    Ok(())
}

/// In a string partition column null and `""` are one group; statistics ignore nulls, so a
/// recompute of group `""` must not prune a file whose non-null owners sort after `""` (before
/// the fix it did, and the group lost its null-owner row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recompute_of_the_empty_group_reads_its_null_rows() -> Result<()> {
    const OWNERS: &str = r#"
[[refine]]
job = "gold_owner"
output = "gold/owner"
partition_by = ["owner"]
[refine.aggregate]
source = "silver/cdc"
group_by = ["owner"]
measures = ["count(*) as n", "max(value) as hi"]
"#;
    for backend in backends() {
        let lake = TestLake::new(backend, "aggregate-empty")?;
        let cfg = lake.config_with(&format!("{}\n{OWNERS}", jobs()))?;
        let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let rec = |o: i64, id: i64, owner: &str, v: i64, op: &str| {
            let json = format!(
                r#"{{"id":{id},"owner":{owner},"value":{v},"ts":"2026-12-01T10:00:{o:02}Z","op":"{op}"}}"#
            );
            SourceRecord::new("cdc", 0, o, 0, json.as_bytes())
        };
        // One silver file with owners {null, "bob"} (min "bob"), then one with "".
        ing.ingest(&[rec(0, 1, "null", 5, "U"), rec(1, 3, "\"bob\"", 1, "U")])
            .await?;
        run(&cfg, &l, &s, "silver").await?;
        ing.ingest(&[rec(2, 2, "\"\"", 9, "U")]).await?;
        run(&cfg, &l, &s, "silver").await?;
        run(&cfg, &l, &s, "gold_owner").await?;
        // Delete the group's maximum: it is recomputed from silver.
        ing.ingest(&[rec(3, 2, "\"\"", 9, "D")]).await?;
        run(&cfg, &l, &s, "silver").await?;
        let (_, recomputed) = run(&cfg, &l, &s, "gold_owner").await?;
        assert_eq!(recomputed, 1, "{backend:?}");
        let got = groups_of(&l, "gold/owner", &["owner"]).await?;
        assert_eq!(
            got,
            [
                ("Some(\"\")".to_string(), 1, Some(5)),
                ("Some(\"bob\")".to_string(), 1, Some(1))
            ],
            "{backend:?}"
        );
    }
    Ok(())
}

/// A gold table built by one definition is never merged into by another (a measure changed
/// under the same name would misread the stored state): the run is refused, saying to rebuild;
/// a filter literal that is not a value of its column is refused before anything is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_definition_or_a_bad_filter_is_refused() -> Result<()> {
    let lake = TestLake::new(lakestream_testkit::Backend::Fs, "aggregate-spec")?;
    let cfg = config(&lake)?;
    let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
    let l = Lake::new(&cfg.lake)?;
    let s: CommitSettings = (&cfg.commit).into();
    let (mut rng, mut offset, mut clock) = (fastrand::Rng::with_seed(5), 0, 0);
    ing.ingest(&batch(&mut rng, &mut offset, &mut clock))
        .await?;
    run(&cfg, &l, &s, "silver").await?;
    run(&cfg, &l, &s, "gold_cdc").await?;
    ing.ingest(&batch(&mut rng, &mut offset, &mut clock))
        .await?;
    run(&cfg, &l, &s, "silver").await?;
    let with = |from: &str, to: &str| -> Result<PipelineConfig> {
        let text = format!(
            "{}\n{}",
            lakestream_testkit::EXAMPLE,
            jobs().replace(from, to)
        );
        let mut c = PipelineConfig::from_toml(&text)?;
        c.lake = cfg.lake.clone();
        Ok(c)
    };
    let changed = with("min(value) as smallest", "max(value) as smallest")?;
    let e = run(&changed, &l, &s, "gold_cdc")
        .await
        .err()
        .context("must fail")?;
    assert!(
        e.to_string().contains("another definition") && e.to_string().contains("rebuild"),
        "{e}"
    );
    let bad = with(
        "max_files_per_run = 3\n",
        "max_files_per_run = 3\n[refine.aggregate.filter]\n",
    )
    .err()
    .map(|e| e.to_string());
    assert!(bad.is_some(), "a filter must be a string");
    let bad = with(
        "source = \"silver/cdc\"\ngroup_by",
        "source = \"silver/cdc\"\nfilter = \"value > abc\"\ngroup_by",
    )?;
    let e = run(&bad, &l, &s, "gold_cdc")
        .await
        .err()
        .context("must fail")?;
    assert!(
        e.to_string()
            .contains("\"abc\" is not a value of column `value`"),
        "{e}"
    );
    // The unchanged job still runs on.
    run(&cfg, &l, &s, "gold_cdc").await?;
    let (got, consumed) = gold(&l).await?;
    assert!(close(&got, &recompute(&l, consumed).await?));
    Ok(())
}

/// Topic `cdc` with a float `value`, its upsert `silver` and a gold job of float sums.
fn float_jobs() -> String {
    let columns = r#"  { name = "id", type = "int64", nullable = false },
  { name = "owner", type = "string" },
  { name = "value", type = "float64" },
  { name = "ts", type = "timestamp", nullable = false },
"#;
    let gold = r#"
[[refine]]
job = "gold_float"
output = "gold/float"
partition_by = ["owner"]
[refine.aggregate]
source = "silver/cdc"
group_by = ["owner"]
measures = ["count(*) as n", "sum(value) as total", "avg(value) as mean", "count(value) as valued"]
"#;
    cdc_topic(&format!("{columns}{CDC_OP}"), "") + &cdc_upsert("silver", "silver/cdc", true) + gold
}

/// Per owner: rows, SQL's `SUM` and `AVG` of `value`, non-null values.
type FloatGroups = BTreeMap<String, (i64, Option<f64>, Option<f64>, i64)>;

fn floats(b: &RecordBatch, name: &str) -> Result<Vec<Option<f64>>> {
    let c = cast(
        b.column_by_name(name).context("column")?,
        &DataType::Float64,
    )?;
    let s = c.as_primitive::<Float64Type>();
    Ok((0..s.len())
        .map(|i| s.is_valid(i).then(|| s.value(i)))
        .collect())
}

/// SQL's `SUM` (DuckDB's): NaN with a NaN or both infinities, else the infinity, else the sum
/// (exact: every finite value written is a multiple of 1/4 below 2^80).
fn sql_sum(values: &[f64]) -> Option<f64> {
    let (pos, neg) = (
        values.contains(&f64::INFINITY),
        values.contains(&f64::NEG_INFINITY),
    );
    if values.is_empty() {
        None
    } else if values.iter().any(|v| v.is_nan()) || (pos && neg) {
        Some(f64::NAN)
    } else if pos || neg {
        Some(if pos {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        })
    } else {
        Some(values.iter().map(|v| (v * 4.0) as i128).sum::<i128>() as f64 / 4.0)
    }
}

/// GROUP BY owner over `silver/cdc` at `version` (or the float gold table, `None`).
async fn float_groups(l: &Lake, version: Option<u64>) -> Result<FloatGroups> {
    let mut out = FloatGroups::new();
    let Some(v) = version else {
        let b = read::read_table(l, "gold/float", None).await?;
        let (owners, n, valued) = (texts(&b, "owner")?, ints(&b, "n")?, ints(&b, "valued")?);
        let (total, mean) = (floats(&b, "total")?, floats(&b, "mean")?);
        for i in 0..b.num_rows() {
            let row = (
                n[i].unwrap_or(-1),
                total[i],
                mean[i],
                valued[i].unwrap_or(-1),
            );
            let owner = owners[i].clone().unwrap_or_default();
            assert!(out.insert(owner, row).is_none(), "group twice");
        }
        return Ok(out);
    };
    let b = read::read_table(l, "silver/cdc", Some(v)).await?;
    let (owners, values) = (texts(&b, "owner")?, floats(&b, "value")?);
    let mut by: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for i in 0..b.num_rows() {
        let owner = owners[i].clone().unwrap_or_default();
        by.entry(owner).or_default().push(values[i]);
    }
    for (owner, vs) in by {
        let some: Vec<f64> = vs.iter().flatten().copied().collect();
        let sum = sql_sum(&some);
        let mean = sum.map(|s| s / some.len() as f64);
        out.insert(owner, (vs.len() as i64, sum, mean, some.len() as i64));
    }
    Ok(out)
}

fn same_float(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) if x.is_nan() || y.is_nan() => x.is_nan() && y.is_nan(),
        (Some(x), Some(y)) if x.is_infinite() || y.is_infinite() => x == y,
        (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0),
        (x, y) => x == y,
    }
}

/// The float gold table against GROUP BY over the source at the version it consumed.
async fn check_floats(l: &Lake, what: &str) -> Result<FloatGroups> {
    let got = float_groups(l, None).await?;
    let mut h = lakestream_core::table::TableHandle::open_existing(l, "gold/float").await?;
    let app = lakestream_core::refine::source_app_id("orders-raw", "gold_float", "silver/cdc");
    let consumed = h
        .committed(std::slice::from_ref(&app))
        .await?
        .get(&app)
        .copied()
        .context("txn")?;
    let want = float_groups(l, Some(consumed as u64)).await?;
    let ok = got.len() == want.len()
        && got.iter().zip(&want).all(|((ka, a), (kb, b))| {
            ka == kb && (a.0, a.3) == (b.0, b.3) && same_float(a.1, b.1) && same_float(a.2, b.2)
        });
    assert!(
        ok,
        "{what}: gold\n{got:?}\nGROUP BY at v{consumed}\n{want:?}"
    );
    Ok(got)
}

/// Float `sum`/`avg` are SQL's over the current rows whatever came and went: a NaN or an
/// infinity deleted gives the finite sum back, both infinities are NaN, and deleting a large
/// value keeps the small ones (before the fix: NaN for good, and 0.0 where 1.0 is right).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gold_float_sums_follow_sql_through_nan_inf_and_large_deletes() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "aggregate-floats")?;
        let cfg = lake.config_with(&float_jobs())?;
        let ing = KafkaIngestor::new(cfg.clone(), Arc::new(lakestream_core::SystemClock))?;
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let mut offset = 0i64;
        let mut step = |changes: &[(i64, &str, &str, &str)]| {
            let records: Vec<SourceRecord> = changes
                .iter()
                .map(|(id, owner, value, op)| {
                    offset += 1;
                    let json = format!(
                        r#"{{"id":{id},"owner":"{owner}","value":{value},"ts":"2026-12-01T10:{:02}:{:02}Z","op":"{op}"}}"#,
                        offset / 60,
                        offset % 60
                    );
                    SourceRecord::new("cdc", 0, offset, 0, json.as_bytes())
                })
                .collect();
            records
        };
        let go = async |records: Vec<SourceRecord>, what: &str| -> Result<FloatGroups> {
            ing.ingest(&records).await?;
            run(&cfg, &l, &s, "silver").await?;
            run(&cfg, &l, &s, "gold_float").await?;
            check_floats(&l, &format!("{backend:?} {what}")).await
        };
        let total = |g: &FloatGroups| g.get("ann").and_then(|r| r.1);
        let g = go(
            step(&[(1, "ann", "1e20", "U"), (2, "ann", "1.0", "U")]),
            "1e20, 1",
        )
        .await?;
        assert_eq!(total(&g), Some(1e20));
        let g = go(step(&[(1, "ann", "1e20", "D")]), "1e20 deleted").await?;
        assert_eq!(total(&g), Some(1.0));
        let g = go(step(&[(3, "ann", "\"NaN\"", "U")]), "a NaN").await?;
        assert!(total(&g).is_some_and(f64::is_nan));
        let g = go(step(&[(3, "ann", "\"NaN\"", "D")]), "the NaN deleted").await?;
        assert_eq!(total(&g), Some(1.0));
        let both = [
            (4, "ann", "\"Infinity\"", "U"),
            (5, "ann", "\"-Infinity\"", "U"),
        ];
        let g = go(step(&both), "both infinities").await?;
        assert!(total(&g).is_some_and(f64::is_nan));
        let g = go(step(&[(5, "ann", "0.5", "U")]), "-Inf updated").await?;
        assert_eq!(total(&g), Some(f64::INFINITY));
        let g = go(step(&[(4, "ann", "2.0", "U")]), "+Inf updated").await?;
        assert_eq!(total(&g), Some(3.5));
        // Random changes over a few keys: NaN, infinities, large and small values, nulls.
        let pool = [
            "0.25",
            "1.0",
            "-3.5",
            "2.75",
            "1e15",
            "-1e15",
            "1e20",
            "7e18",
            "\"NaN\"",
            "\"Infinity\"",
            "\"-Infinity\"",
            "null",
        ];
        let mut rng = fastrand::Rng::with_seed(37);
        for round in 0..12 {
            let changes: Vec<(i64, &str, &str, &str)> = (0..rng.usize(1..8))
                .map(|_| {
                    let op = if rng.u8(0..4) == 0 { "D" } else { "U" };
                    let owner = ["ann", "bob"][rng.usize(0..2)];
                    (rng.i64(10..20), owner, pool[rng.usize(0..pool.len())], op)
                })
                .collect();
            go(step(&changes), &format!("round {round}")).await?;
        }
    }
    Ok(())
}
