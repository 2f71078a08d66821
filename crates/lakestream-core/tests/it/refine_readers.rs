//! Maintenance keeps what a lagging refine job still needs (issue 24 defect 6): a forced
//! window-0 vacuum keeps the files removed after the version the job consumed, log cleanup keeps
//! the log to load that version; a job further behind than the source's log retention is not
//! waited for, `lag` says so, and the job fails with what to do instead of skipping rows.

use anyhow::{Context, Result};
use chrono::{Duration, Utc};
use lakestream_core::maintenance::{
    CompactOptions, Reader, VacuumOptions, checkpoint, compact, refine_readers, vacuum,
};
use lakestream_core::{FixedClock, Lake, inspect};
use lakestream_formats::config::PipelineConfig;
use lakestream_testkit::lagging::{curated_order_ids, member, order, run_curated};
use lakestream_testkit::{Backend, TestLake, backends};
use std::sync::Arc;

/// The example's lake without its gold job (it reads raw/order too, and never runs here: these
/// tests are about the curated job's lag).
fn without_gold(mut lake: TestLake) -> TestLake {
    lake.config.refine.retain(|j| j.job != "gold");
    lake
}

async fn order_readers(lake: &Lake, cfg: &PipelineConfig) -> Result<Vec<Reader>> {
    Ok(refine_readers(lake, cfg)
        .await?
        .remove("raw/order")
        .unwrap_or_default())
}

/// The member, orders 0..3 read by the job, orders 3..9 not: the job lags by six versions.
async fn lagging(lake: &TestLake, l: &Lake) -> Result<()> {
    let ing = lake.ingestor()?;
    ing.ingest(&[member()]).await?;
    for id in 0..3 {
        ing.ingest(&[order(id)]).await?;
    }
    assert_eq!(run_curated(&lake.config, l).await?, 3);
    for id in 3..9 {
        ing.ingest(&[order(id)]).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_keeps_what_a_lagging_job_needs_until_the_log_retention() -> Result<()> {
    for b in backends() {
        let lake = without_gold(TestLake::new(b, "refine-readers")?);
        let l = Lake::new(&lake.config.lake)?;
        lagging(&lake, &l).await?;
        let readers = order_readers(&l, &lake.config).await?;
        assert_eq!(
            readers,
            [Reader {
                job: "curated".into(),
                consumed: Some(2)
            }]
        );
        let opts = CompactOptions {
            min_small_files: 2,
            ..Default::default()
        };
        let c = compact(&l, "raw/order", &opts, Utc::now(), &|_, _| {}).await?;
        assert_eq!((c.files_before, c.files_after), (9, 1), "{b:?}");

        // `lakestream vacuum raw/order --force --retention-hours 0`, the job's versions kept.
        let forced = VacuumOptions {
            retention: Some(Duration::zero()),
            force: true,
            readers: readers.clone(),
            ..Default::default()
        };
        let now = Arc::new(FixedClock::new(Utc::now() + Duration::hours(2)));
        let r = vacuum(&l, "raw/order", &forced, now).await?;
        assert_eq!(
            (r.files.len(), r.kept_for_readers, r.readers.from_version),
            (0, 9, Some(3)),
            "{b:?}: the 9 compacted-away files are the job's state and unread versions: {r:?}"
        );

        // A month later the job is further behind than the 30-day log retention: `lag` says so,
        // vacuum no longer waits, and the job fails with what to do (no row silently skipped).
        let lag = inspect::lag(&l, &lake.config, Utc::now()).await?;
        let row = lag
            .refine
            .iter()
            .find(|r| r.job == "curated" && r.source == "raw/order")
            .context("lag row")?;
        assert_eq!((row.behind, row.max_lag_hours), (7, Some(720)), "{row:?}");
        assert!(!row.too_far_behind && row.must_read_by > row.unread_since);
        let month = Utc::now() + Duration::days(31);
        let lag = inspect::lag(&l, &lake.config, month).await?;
        assert!(
            lag.refine
                .iter()
                .any(|r| r.source == "raw/order" && r.too_far_behind),
            "{lag:?}"
        );
        let r = vacuum(
            &l,
            "raw/order",
            &VacuumOptions {
                readers,
                ..Default::default()
            },
            Arc::new(FixedClock::new(month)),
        )
        .await?;
        assert_eq!((r.files.len(), r.kept_for_readers), (9, 0), "{b:?}: {r:?}");
        assert!(
            r.readers.too_far_behind.len() == 1 && r.readers.too_far_behind[0].contains("curated"),
            "{r:?}"
        );
        let err = format!(
            "{:#}",
            run_curated(&lake.config, &l)
                .await
                .err()
                .context("the job's versions are gone: it must fail")?
        );
        assert!(
            err.contains("is gone") && err.contains("--skip-to raw/order="),
            "{b:?}: {err}"
        );
        assert_eq!(
            curated_order_ids(&l).await?,
            [0, 1, 2],
            "{b:?}: nothing half-written"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_cleanup_keeps_the_log_to_load_the_consumed_version() -> Result<()> {
    let lake = without_gold(TestLake::new(Backend::Fs, "refine-readers-log")?);
    let l = Lake::new(&lake.config.lake)?;
    let ing = lake.ingestor()?;
    ing.ingest(&[member()]).await?;
    for id in 0..3 {
        ing.ingest(&[order(id)]).await?;
    }
    assert_eq!(
        run_curated(&lake.config, &l).await?,
        3,
        "consumed raw/order v2"
    );
    let now = FixedClock::new(Utc::now());
    ing.ingest(&[order(3)]).await?;
    checkpoint(&l, "raw/order", true, &now, &[]).await?; // a checkpoint at v3
    for id in 4..7 {
        ing.ingest(&[order(id)]).await?;
    }
    // Commits 0..2 look 40 days old: past the log retention, and older than the checkpoint.
    let log = std::path::Path::new(&lake.config.lake.root).join("raw/order/_delta_log");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(40 * 86_400);
    for v in 0..3 {
        std::fs::File::options()
            .write(true)
            .open(log.join(format!("{v:020}.json")))?
            .set_modified(old)?;
    }
    let readers = order_readers(&l, &lake.config).await?;
    let r = checkpoint(&l, "raw/order", true, &now, &readers).await?;
    assert_eq!(
        (r.logs_removed, r.kept_for_readers_from),
        (0, Some(2)),
        "the job needs v2 loadable: {r:?}"
    );
    assert!(log.join(format!("{:020}.json", 2)).exists());
    // Maintenance that does not pass the readers (before the fix) removes them; the job then
    // fails with what to do instead of reading on without its state.
    let r = checkpoint(&l, "raw/order", true, &now, &[]).await?;
    assert_eq!(r.logs_removed, 3, "{r:?}");
    let err = format!(
        "{:#}",
        run_curated(&lake.config, &l)
            .await
            .err()
            .context("the consumed version cannot be loaded: the job must fail")?
    );
    assert!(
        err.contains("version 2") && err.contains("--skip-to raw/order="),
        "{err}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vacuumed_join_state_fails_the_job_with_what_to_do() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "refine-readers-state")?;
    let l = Lake::new(&lake.config.lake)?;
    let ing = lake.ingestor()?;
    ing.ingest(&[member()]).await?;
    for id in 0..3 {
        ing.ingest(&[order(id)]).await?;
    }
    assert_eq!(
        run_curated(&lake.config, &l).await?,
        3,
        "consumed raw/order v2"
    );
    // The job's state (the files live at v2) is compacted away and vacuumed by maintenance that
    // does not know the job; the version it reads next is intact.
    let opts = CompactOptions {
        min_small_files: 2,
        ..Default::default()
    };
    compact(&l, "raw/order", &opts, Utc::now(), &|_, _| {}).await?;
    ing.ingest(&[order(3)]).await?;
    let month = Arc::new(FixedClock::new(Utc::now() + Duration::days(8)));
    let r = vacuum(&l, "raw/order", &VacuumOptions::default(), month).await?;
    assert_eq!(r.files.len(), 3, "{r:?}");
    let err = run_curated(&lake.config, &l)
        .await
        .err()
        .context("the join state is gone: the job must fail")?;
    let text = format!("{err:#}");
    assert!(
        text.contains("version 2") && text.contains("is gone") && text.contains("--skip-to"),
        "a gone version with what to do, not a storage error retried forever: {text}"
    );
    let lakestream_testkit::Error::Core(core) = &err else {
        anyhow::bail!("not a core error: {err:?}");
    };
    assert!(!core.is_retryable(), "{core:?}");
    Ok(())
}

/// A job that has not run yet reads its source from version 0, so maintenance keeps that for
/// it like for a lagging job: a CDC family's bronze compacted and vacuumed (window 0) before the
/// first apply loses none of its changes (found by the model-checked schedules).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_never_ran_is_kept_for_from_version_0() -> Result<()> {
    use deltalake::arrow::datatypes::{DataType, Field, Schema};
    use lakestream_core::commit::CommitSettings;
    use lakestream_core::refine::{RunContext, run_job};
    use lakestream_testkit::cdc::append_bronze;
    for b in backends() {
        let lake = TestLake::new(b, "never-ran")?;
        let mut cfg = PipelineConfig::from_toml(&format!(
            "{}\n[[cdc]]\nfamily = \"crm\"\nsource = \"debezium\"\ntopics = [\"crm.public.*\"]\n",
            lakestream_testkit::EXAMPLE
        ))?;
        cfg.lake = lake.config.lake.clone();
        cfg.commit = lake.config.commit.clone();
        let l = Lake::new(&cfg.lake)?;
        let bronze = "bronze/crm/public/orders";
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
        ]));
        let rows: Vec<(String, String)> = (0..3)
            .map(|i| (format!(r#"{{"id":{i},"v":"a"}}"#), format!("s{i}")))
            .collect();
        for (json, seq) in &rows {
            append_bronze(&l, bronze, Some("id"), &[("c", seq, json)], &schema).await?;
        }
        let opts = CompactOptions {
            min_small_files: 2,
            ..Default::default()
        };
        let c = compact(&l, bronze, &opts, Utc::now(), &|_, _| {}).await?;
        assert_eq!((c.files_before, c.files_after), (3, 1), "{b:?}");
        let readers = refine_readers(&l, &cfg)
            .await?
            .remove(bronze)
            .unwrap_or_default();
        assert_eq!(
            readers.len(),
            1,
            "{b:?}: the family's apply job reads bronze"
        );
        let forced = VacuumOptions {
            retention: Some(Duration::zero()),
            force: true,
            readers,
            ..Default::default()
        };
        let later = Arc::new(FixedClock::new(Utc::now() + Duration::hours(2)));
        let r = vacuum(&l, bronze, &forced, later).await?;
        assert_eq!((r.files.len(), r.kept_for_readers), (0, 3), "{b:?}: {r:?}");
        let jobs = lakestream_core::refine::cdc::family::all_jobs(&l, &cfg).await?;
        let job = jobs
            .iter()
            .find(|j| j.output == "silver/crm/public/orders")
            .context("the apply job")?;
        let s = CommitSettings::from(&cfg.commit);
        let ctx = RunContext::new(&cfg, &l, &s, Utc::now());
        run_job(&ctx, job, 10).await?;
        let silver =
            lakestream_core::read::read_table(&l, "silver/crm/public/orders", None).await?;
        assert_eq!(silver.num_rows(), 3, "{b:?}");
    }
    Ok(())
}
