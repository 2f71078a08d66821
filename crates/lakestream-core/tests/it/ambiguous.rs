//! The "unknown outcome" rule, fault-injected: the conditional PUT of a log entry lands, but the
//! writer sees an error (a connection reset after the upload). The engine must read the log,
//! find its own commit, report success, and not write the rows a second time.

use crate::faults::Faults;
use anyhow::Result;
use lakestream_core::commit::CommitSettings;
use lakestream_core::dead_letter::{DeadLetter, write_dead_letters};
use lakestream_core::table::TableHandle;
use lakestream_core::{Lake, read};
use lakestream_formats::record::SourceRecord;
use std::sync::Arc;
use std::sync::atomic::Ordering;

fn letters(n: i64) -> Vec<DeadLetter> {
    (0..n)
        .map(|o| {
            let record = SourceRecord::new("orders", 0, o, -1, b"{}");
            DeadLetter::kafka(&record, None, "test".into())
        })
        .collect()
}

#[tokio::test]
async fn a_commit_that_landed_but_errored_is_resolved_from_the_log() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let lake = Lake::local(dir.path())?;
    let settings = CommitSettings {
        checkpoint_interval: 10,
        max_attempts: 5,
        inner_retries: 3,
        base_backoff: std::time::Duration::from_millis(5),
        max_backoff: std::time::Duration::from_millis(20),
    };
    let now = chrono::Utc::now();
    // Version 0 normally.
    let mut plain = TableHandle::open(&lake, "dead_letters")?;
    write_dead_letters(&lake, &mut plain, "p", &settings, &letters(3), now).await?;

    // Version 1: the log PUT lands, the writer gets an error.
    let faults = Arc::new(Faults::default());
    faults.land_then_fail.store(1, Ordering::SeqCst);
    let mut faulty = TableHandle::open(&faults.install(lake.clone()), "dead_letters")?;
    let out = write_dead_letters(&lake, &mut faulty, "p", &settings, &letters(6), now).await?;
    assert_eq!(
        faults.land_then_fail.load(Ordering::SeqCst),
        0,
        "the fault was injected"
    );
    assert!(out.commit.resolved_from_log, "{:?}", out.commit);
    assert_eq!(out.commit.version, Some(1));
    assert_eq!(
        out.written.iter().filter(|w| **w).count(),
        3,
        "offsets 3..5 were new"
    );

    let rows = read::read_table(&lake, "dead_letters", None).await?;
    assert_eq!(
        rows.num_rows(),
        6,
        "written once, not retried into a duplicate"
    );
    let again = write_dead_letters(&lake, &mut plain, "p", &settings, &letters(6), now).await?;
    assert_eq!(
        again.commit.version, None,
        "a replay finds everything committed"
    );
    Ok(())
}
