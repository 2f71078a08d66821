//! Issue 24 (audit follow-up): what marks an access-log object as ingested is what was read, not
//! what the notification says. A notification naming an ingested object with no ETag, a quoted
//! ETag or a percent-encoded key adds no rows (A); each kind of an object's dead letters has its
//! own idempotency key, so a refused object re-sent after raising the limit keeps its line dead
//! letters (B); an object refused by a limit is charged the bytes it read against
//! `max_round_mib`, not the whole `max_inflated_mib` (C).

use anyhow::Result;
use lakestream_core::access_log::ObjectOutcome;
use lakestream_formats::notification::{Notification, parse_body};
use lakestream_testkit::access_logs::{LOG_LINE, LocalLogs, log_object};
use lakestream_testkit::{Backend, TestLake};

const TABLE: &str = "access_logs/datalake-prod";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_notification_does_not_ingest_an_object_again() -> Result<()> {
    let lake = TestLake::new(Backend::Fs, "log-etag-forged")?;
    let logs = LocalLogs::new()?;
    let key = "logs/my logs/a+b.log";
    logs.put(key, LOG_LINE.repeat(3).as_bytes())?;
    let src = logs.source();
    let ing = lake.access_log_ingestor()?;
    let first = ing
        .ingest(&[log_object(key, Some("0123456789abcdef"))], &src)
        .await?;
    assert_eq!(first.rows_written, 3, "{first:?}");
    // The EventBridge form, key percent-encoded (tried as given, then decoded).
    let eb = r#"{"source":"aws.s3","detail-type":"Object Created","detail":{"bucket":{"name":"raw-logs"},"object":{"key":"logs/my%20logs/a%2Bb.log","etag":"0123456789abcdef"}}}"#;
    let Ok(Notification::Objects(eb)) = parse_body(eb) else {
        panic!("EventBridge body not parsed");
    };
    let variants = [
        log_object(key, None),
        log_object(key, Some("\"0123456789abcdef\"")),
        eb[0].clone(),
    ];
    for v in &variants {
        let r = ing.ingest(std::slice::from_ref(v), &src).await?;
        assert_eq!(r.rows_written, 0, "{v:?}: {r:?}");
        assert!(!r.failed(v), "{r:?}");
    }
    assert_eq!(lake.count(TABLE).await?, 3, "each line once");
    assert_eq!(lake.count("dead_letters").await?, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_object_resent_after_raising_the_limit_keeps_its_line_letters() -> Result<()> {
    let mut lake = TestLake::new(Backend::Fs, "log-etag-letters")?;
    lake.config.access_logs.max_bad_lines = 1;
    let logs = LocalLogs::new()?;
    // 2 good lines, 3 malformed: refused by max_bad_lines = 1.
    let text = format!("{LOG_LINE}not a log 1\n{LOG_LINE}not a log 2\nnot a log 3\n");
    logs.put("logs/mixed.log", text.as_bytes())?;
    let src = logs.source();
    let obj = log_object("logs/mixed.log", Some("e1"));
    let r = lake
        .access_log_ingestor()?
        .ingest(std::slice::from_ref(&obj), &src)
        .await?;
    assert!(
        matches!(&r.objects[0].1, ObjectOutcome::Refused { reason } if reason.contains("max_bad_lines")),
        "{r:?}"
    );
    assert_eq!(lake.count("dead_letters").await?, 1, "the refusal");
    lake.config.access_logs.max_bad_lines = 10;
    let r = lake.access_log_ingestor()?.ingest(&[obj], &src).await?;
    assert_eq!(
        r.objects[0].1,
        ObjectOutcome::Committed {
            rows: 2,
            dead_lettered: 3
        }
    );
    assert_eq!(lake.count(TABLE).await?, 2);
    // Lines in (5) = rows (2) + line dead letters (3); plus the earlier refusal's letter.
    assert_eq!(lake.count("dead_letters").await?, 1 + 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_objects_are_charged_what_they_read_against_the_round() -> Result<()> {
    let mut lake = TestLake::new(Backend::Fs, "log-etag-round")?;
    lake.config.access_logs.max_bad_lines = 0;
    lake.config.access_logs.max_inflated_mib = 1;
    lake.config.access_logs.max_round_mib = 1;
    let logs = LocalLogs::new()?;
    let mut objs = Vec::new();
    for i in 0..2 {
        logs.put(&format!("logs/bad{i}.log"), b"not a log\n")?;
        objs.push(log_object(&format!("logs/bad{i}.log"), Some("b")));
    }
    for i in 0..3 {
        logs.put(&format!("logs/good{i}.log"), LOG_LINE.as_bytes())?;
        objs.push(log_object(&format!("logs/good{i}.log"), Some("g")));
    }
    let r = lake
        .access_log_ingestor()?
        .ingest(&objs, &logs.source())
        .await?;
    for (uri, o) in &r.objects[..2] {
        assert!(matches!(o, ObjectOutcome::Refused { .. }), "{uri}: {o:?}");
    }
    for (uri, o) in &r.objects[2..] {
        assert_eq!(
            *o,
            ObjectOutcome::Committed {
                rows: 1,
                dead_lettered: 0
            },
            "{uri}"
        );
    }
    assert_eq!(lake.count(TABLE).await?, 3);
    Ok(())
}
