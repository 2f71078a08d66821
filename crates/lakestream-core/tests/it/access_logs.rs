//! Access-log objects -> per-bucket tables, on every backend.

use anyhow::Result;
use lakestream_core::FixedClock;
use lakestream_core::access_log::{AccessLogIngestor, LocalObjects, ObjectOutcome};
use lakestream_formats::notification::LogObject;
use lakestream_testkit::{TestLake, backends, strings};
use std::sync::Arc;

const PLAIN: &[u8] =
    include_bytes!("../../../../tests/fixtures/access-logs/2026-11-29-08-00-00-A1B2C3D4E5F6.log");
const GZIP: &[u8] = include_bytes!(
    "../../../../tests/fixtures/access-logs/2026-11-29-09-00-00-F6E5D4C3B2A1.log.gz"
);

fn object(key: &str, etag: &str) -> LogObject {
    LogObject {
        bucket: "raw-logs".into(),
        key: key.into(),
        alt_key: None,
        etag: Some(etag.into()),
        event_time: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_land_in_per_bucket_tables_once() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "access-logs")?;
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("raw-logs/logs"))?;
        std::fs::write(dir.path().join("raw-logs/logs/a.log"), PLAIN)?;
        std::fs::write(dir.path().join("raw-logs/logs/b.log.gz"), GZIP)?;
        let source = LocalObjects(dir.path().to_path_buf());
        let clock =
            FixedClock::new(chrono::DateTime::from_timestamp(1_795_939_200, 0).unwrap_or_default());
        let ing = AccessLogIngestor::new(lake.config.clone(), Arc::new(clock))?;
        let objects = [
            object("logs/a.log", "e1"),
            object("logs/b.log.gz", "e2"),
            object("logs/gone.log", "e3"),
        ];

        let r = ing.ingest(&objects, &source).await?;
        let outcomes: Vec<&ObjectOutcome> = r.objects.iter().map(|o| &o.1).collect();
        assert_eq!(
            outcomes,
            [
                &ObjectOutcome::Committed {
                    rows: 4,
                    dead_lettered: 1
                },
                &ObjectOutcome::Committed {
                    rows: 3,
                    dead_lettered: 1
                },
                &ObjectOutcome::Missing
            ],
            "{b:?}"
        );
        let prod = lake.read("access_logs/datalake-prod").await?;
        assert_eq!(prod.num_rows(), 4);
        let mut dates = strings(&prod, "date")?;
        dates.sort();
        assert_eq!(
            dates,
            vec![Some("2026-11-29".to_string()); 4],
            "+0100 converted to UTC"
        );
        let refs = strings(&prod, "referer")?;
        assert!(refs.contains(&Some("https://console.aws.amazon.com/s3/buckets/datalake-prod?region=us-east-1&tab=objects (list), view".into())));
        let keys = strings(&prod, "key")?;
        assert!(
            keys.contains(&Some("raw/my+file%20name.json".into())),
            "key as logged"
        );
        let archive = lake.read("access_logs/analytics-archive").await?;
        let mut d = strings(&archive, "date")?;
        d.sort();
        assert_eq!(d, [Some("2026-11-28".into()), Some("2026-11-29".into())]);
        assert_eq!(
            lake.read("access_logs/amzn-s3-demo-bucket1")
                .await?
                .num_rows(),
            1
        );
        let dl = lake.read("dead_letters").await?;
        let mut errs: Vec<(Option<String>, Option<String>, Option<String>)> =
            strings(&dl, "object_uri")?
                .into_iter()
                .zip(strings(&dl, "line_number")?)
                .zip(strings(&dl, "error")?)
                .map(|((a, b), c)| (a, b, c))
                .collect();
        errs.sort();
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert_eq!(errs[0].0.as_deref(), Some("s3://raw-logs/logs/a.log"));
        assert_eq!(errs[0].1.as_deref(), Some("4"));
        assert!(
            errs[0].2.as_deref().is_some_and(|e| e.contains("bad time")),
            "{errs:?}"
        );
        assert_eq!(errs[1].1.as_deref(), Some("3"));
        assert!(
            errs[1]
                .2
                .as_deref()
                .is_some_and(|e| e.contains("bytes_sent"))
        );
        assert_eq!(errs[2].0.as_deref(), Some("s3://raw-logs/logs/gone.log"));
        assert!(
            errs[2]
                .2
                .as_deref()
                .is_some_and(|e| e.contains("no longer exists"))
        );

        // Redelivery of every notification, and a duplicate inside one batch: nothing added.
        let again = ing
            .ingest(
                &[
                    objects[0].clone(),
                    objects[0].clone(),
                    objects[1].clone(),
                    objects[2].clone(),
                ],
                &source,
            )
            .await?;
        let outcomes: Vec<&ObjectOutcome> = again.objects.iter().map(|o| &o.1).collect();
        assert_eq!(
            outcomes,
            [
                &ObjectOutcome::AlreadyCommitted,
                &ObjectOutcome::AlreadyCommitted,
                &ObjectOutcome::AlreadyCommitted,
                &ObjectOutcome::Missing
            ],
            "{b:?}"
        );
        assert_eq!(lake.read("access_logs/datalake-prod").await?.num_rows(), 4);
        assert_eq!(lake.read("dead_letters").await?.num_rows(), 3);
        // A fresh ingestor (cold container) checks the log, not memory.
        let cold = AccessLogIngestor::new(
            lake.config.clone(),
            Arc::new(FixedClock::new(chrono::Utc::now())),
        )?;
        let r = cold.ingest(&objects[..2], &source).await?;
        assert!(
            r.objects
                .iter()
                .all(|o| o.1 == ObjectOutcome::AlreadyCommitted),
            "{r:?}"
        );
        assert_eq!(lake.read("access_logs/datalake-prod").await?.num_rows(), 4);
    }
    Ok(())
}
