//! Issue 26: DMS and plain file deliveries into bronze (`cdc::files`), on fs and the S3
//! emulator: a full load then CDC land with the ops, `__seq` order and lineage the files hold;
//! a redelivery adds nothing; a read that fails after some chunks resumes where it stopped; a
//! superseded version is recorded, not read; bad rows are dead-lettered with object and row; a
//! 200k-row file lands in several chunks, every row once; Parquet and JSON lines.

use anyhow::Result;
use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use lakestream_core::access_log::{
    Fetched, LocalObjects, ObjectOutcome, ObjectSource, ObjectVersion, Opened,
};
use lakestream_core::cdc::files::{CdcFileIngestor, FileSettings};
use lakestream_core::table::TableHandle;
use lakestream_formats::config::bronze;
use lakestream_formats::notification::LogObject;
use lakestream_testkit::{
    Backend, TestLake, backends, example_config_with, fixed_clock, int64s, strings,
};
use std::ops::Range;
use std::sync::Arc;

const LOAD: &[u8] = include_bytes!("../../../../tests/fixtures/dms/LOAD00000001.csv");
const LOAD_HEADER: &[u8] = include_bytes!("../../../../tests/fixtures/dms/header/LOAD00000001.csv");
const LOAD_PARQUET: &[u8] = include_bytes!("../../../../tests/fixtures/dms/LOAD00000001.parquet");
const CDC: &[u8] = include_bytes!("../../../../tests/fixtures/dms/20261129-113401000.csv");
const ORDERS: &[u8] = include_bytes!("../../../../tests/fixtures/dms/orders.jsonl");

const FAMILIES: &str = r#"
[[cdc]]
family = "erp"
source = "dms"
location = "s3://landing/dms/"
timestamp_column = "ts"
keys = { "dbo.items" = ["id"] }
columns = { "dbo.items" = ["ts timestamp", "id int64", "name string", "amount decimal(10,2)", "active boolean"] }

[[cdc]]
family = "erph"
source = "dms"
location = "s3://landing/dmsh/"
csv_header = true
timestamp_column = "ts"
columns = { "dbo.items" = ["id int64", "amount decimal(10,2)"] }

[[cdc]]
family = "shop"
source = "files"
location = "s3://landing/files/"
columns = { "shop.orders" = ["order_id int64", "total float64"] }
"#;

const ITEMS: &str = "bronze/erp/dbo/items";
const LOAD_KEY: &str = "dms/dbo/items/LOAD00000001.csv";
const CDC_KEY: &str = "dms/dbo/items/20261129-113401000.csv";

struct Setup {
    lake: TestLake,
    objects: tempfile::TempDir,
}

impl Setup {
    fn new(backend: Backend, name: &str) -> Result<Self> {
        Self::with(backend, name, "")
    }

    /// With `extra` config after the families (e.g. `[cdc_limits]`).
    fn with(backend: Backend, name: &str, extra: &str) -> Result<Self> {
        let cfg = example_config_with(&format!("{FAMILIES}{extra}"))?;
        Ok(Self {
            lake: TestLake::with_config(backend, name, cfg)?,
            objects: tempfile::tempdir()?,
        })
    }

    fn put(&self, key: &str, body: &[u8]) -> Result<LogObject> {
        let path = self.objects.path().join("landing").join(key);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p)?;
        }
        std::fs::write(path, body)?;
        Ok(LogObject {
            bucket: "landing".into(),
            key: key.into(),
            alt_key: None,
            etag: None,
            event_time: chrono::DateTime::from_timestamp(1_795_953_600, 0),
        })
    }

    /// When the object at `key` was written (µs): its file's modification time.
    fn written(&self, key: &str) -> Result<i64> {
        let path = self.objects.path().join("landing").join(key);
        let t = std::fs::metadata(path)?.modified()?;
        Ok(i64::try_from(
            t.duration_since(std::time::UNIX_EPOCH)?.as_micros(),
        )?)
    }

    fn source(&self) -> LocalObjects {
        LocalObjects(self.objects.path().to_path_buf())
    }

    fn ingestor(&self, chunk_rows: usize) -> Result<CdcFileIngestor> {
        let clock = fixed_clock(lakestream_testkit::ingest_time());
        Ok(
            CdcFileIngestor::with_lake(self.lake.config.clone(), self.lake.lake()?, clock)
                .with_files(FileSettings {
                    chunk_rows,
                    chunk_bytes: 64 << 20,
                }),
        )
    }

    /// `column` of `table`, rows ordered by `__seq`.
    async fn sorted(&self, table: &str, column: &str) -> Result<Vec<Option<String>>> {
        let batch = self.lake.read(table).await?;
        let seqs = strings(&batch, bronze::SEQ)?;
        let vals = strings(&batch, column)?;
        let mut pairs: Vec<_> = seqs.into_iter().zip(vals).collect();
        pairs.sort();
        Ok(pairs.into_iter().map(|(_, v)| v).collect())
    }
}

fn md5(b: &[u8]) -> String {
    use md5::Digest;
    format!("{:x}", md5::Md5::digest(b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_load_then_cdc_lands_as_the_files_hold_it_once() -> Result<()> {
    for backend in backends() {
        let s = Setup::new(backend, "cdc-files-dms")?;
        let load = s.put(LOAD_KEY, LOAD)?;
        let cdc = s.put(CDC_KEY, CDC)?;
        let ing = s.ingestor(1000)?;
        // CDC delivered first: order comes from `__seq`, not from arrival.
        let r = ing
            .ingest(&[cdc.clone(), load.clone()], &s.source())
            .await?;
        assert_eq!(r.rows_written, 7, "{r:?}");
        assert_eq!(
            r.objects[1].1,
            ObjectOutcome::Committed {
                rows: 3,
                dead_lettered: 0
            }
        );
        let ops = s.sorted(ITEMS, bronze::OP).await?;
        let ops: Vec<&str> = ops.iter().map(|o| o.as_deref().unwrap_or("")).collect();
        assert_eq!(ops, ["r", "r", "r", "c", "u", "d", "u"]);
        let ids = s.sorted(ITEMS, "id").await?;
        let ids: Vec<&str> = ids.iter().map(|o| o.as_deref().unwrap_or("")).collect();
        assert_eq!(ids, ["1", "2", "3", "4", "1", "2", "3"]);
        let seqs = s.sorted(ITEMS, bronze::SEQ).await?;
        // Ordered by when each object was written (DMS writes in commit order), then row.
        assert_eq!(
            seqs[0],
            Some(format!(
                "2|{:020}|0|dms/dbo/items/LOAD00000001.csv|000000000001",
                s.written(LOAD_KEY)?
            ))
        );
        assert_eq!(
            seqs[3],
            Some(format!(
                "2|{:020}|1|dms/dbo/items/20261129-113401000.csv|000000000001",
                s.written(CDC_KEY)?
            ))
        );
        let objects = s.sorted(ITEMS, bronze::OBJECT).await?;
        assert_eq!(
            objects[0].as_deref(),
            Some("landing/dms/dbo/items/LOAD00000001.csv")
        );
        let etags = s.sorted(ITEMS, bronze::ETAG).await?;
        assert_eq!(etags[6].as_deref(), Some(md5(CDC).as_str()));
        let rows = s.sorted(ITEMS, bronze::ROW).await?;
        assert_eq!(rows[6].as_deref(), Some("4"));
        let names = s.sorted(ITEMS, "name").await?;
        assert_eq!(names[1].as_deref(), Some("Gadget, large"));
        let amounts = s.sorted(ITEMS, "amount").await?;
        assert_eq!(amounts[4].as_deref(), Some("10.00"));
        let ts = s.sorted(ITEMS, bronze::SOURCE_TS).await?;
        assert_eq!(ts[3].as_deref(), Some("2026-11-29T11:34:01.000001Z"));
        // Bronze properties, set at creation.
        let mut h = TableHandle::open(&s.lake.lake()?, ITEMS)?;
        h.refresh().await?;
        assert_eq!(h.property(bronze::FAMILY_PROPERTY)?.as_deref(), Some("erp"));
        assert_eq!(
            h.property(bronze::TABLE_PROPERTY)?.as_deref(),
            Some("dbo.items")
        );
        assert_eq!(h.property(bronze::KEYS_PROPERTY)?.as_deref(), Some("id"));
        assert!(
            h.property("delta.setTransactionRetentionDuration")?
                .is_some_and(|v| v.contains("days"))
        );
        // A redelivery (any ETag text, either order) adds nothing and reads nothing new.
        let v = s.lake.version(ITEMS).await?;
        let again = ing.ingest(&[load, cdc], &s.source()).await?;
        assert_eq!(again.rows_written, 0, "{again:?}");
        assert!(
            again
                .objects
                .iter()
                .all(|(_, o)| *o == ObjectOutcome::AlreadyCommitted)
        );
        assert_eq!(s.lake.version(ITEMS).await?, v);
        assert_eq!(s.lake.count(ITEMS).await?, 7);
        assert_eq!(s.lake.count("dead_letters").await?, 0);
    }
    Ok(())
}

/// A version whose stream fails after `cut` bytes (a read that dies mid-file).
struct Cut {
    inner: Arc<dyn ObjectVersion>,
    bytes: Bytes,
    cut: usize,
}

impl ObjectVersion for Cut {
    fn key(&self) -> &str {
        self.inner.key()
    }
    fn etag(&self) -> &str {
        self.inner.etag()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_range(&self, range: Range<u64>) -> BoxFuture<'static, lakestream_core::Result<Bytes>> {
        self.inner.read_range(range)
    }
    fn stream(&self) -> BoxStream<'static, lakestream_core::Result<Bytes>> {
        let head = self.bytes.slice(..self.cut);
        futures::stream::iter([
            Ok(head),
            Err(lakestream_core::Error::Fetch {
                object: "test".into(),
                message: "connection reset".into(),
                retryable: true,
            }),
        ])
        .boxed()
    }
}

/// A source that opens versions through [`Cut`], or answers `Superseded`.
struct Faulty {
    inner: LocalObjects,
    cut: Option<usize>,
}

impl ObjectSource for Faulty {
    async fn fetch(&self, o: &LogObject, max: u64) -> lakestream_core::Result<Fetched> {
        self.inner.fetch(o, max).await
    }
    async fn open(&self, o: &LogObject) -> lakestream_core::Result<Opened> {
        let Some(cut) = self.cut else {
            return Ok(Opened::Superseded);
        };
        let Fetched::Object(read) = self.inner.fetch(o, u64::MAX).await? else {
            return Ok(Opened::Missing);
        };
        let Opened::Version(inner) = self.inner.open(o).await? else {
            return Ok(Opened::Missing);
        };
        Ok(Opened::Version(Arc::new(Cut {
            inner,
            bytes: read.bytes.into(),
            cut,
        })))
    }
}

fn generated(rows: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 1..=rows {
        out.extend_from_slice(
            format!(
                "2026-11-29 11:30:00.000000,{i},item {i},{}.25,true\n",
                i % 1000
            )
            .as_bytes(),
        );
    }
    out
}

/// Issue 37 (6): DMS writes a table's full load again on a reload (same `LOAD*` names, new
/// content): its rows are newer than every change before them, and no two different rows share
/// one `__seq`, whatever the files' timestamp columns say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_ranks_after_every_change_before_it() -> Result<()> {
    for backend in backends() {
        let s = Setup::new(backend, "cdc-files-reload")?;
        let ing = s.ingestor(1000)?;
        let load = s.put(LOAD_KEY, LOAD)?;
        ing.ingest(&[load], &s.source()).await?;
        let cdc = s.put(CDC_KEY, CDC)?;
        ing.ingest(&[cdc], &s.source()).await?;
        // The reload: id 1 renamed after the CDC file; its transfer time is even earlier than
        // the CDC file's commit times (DMS's timestamp column on a full load).
        let reload = b"2026-11-29 11:20:00.000000,1,Widget v3,11.00,true\n\
2026-11-29 11:20:00.000000,3,Gizmo,1.25,false\n";
        let again = s.put(LOAD_KEY, reload)?;
        let r = ing.ingest(&[again], &s.source()).await?;
        assert_eq!(r.rows_written, 2, "{r:?}");
        let ids = s.sorted(ITEMS, "id").await?;
        let names = s.sorted(ITEMS, "name").await?;
        let last_of_1 = ids
            .iter()
            .zip(&names)
            .filter(|(i, _)| i.as_deref() == Some("1"))
            .map(|(_, n)| n.clone())
            .next_back()
            .flatten();
        assert_eq!(last_of_1.as_deref(), Some("Widget v3"), "{ids:?} {names:?}");
        let seqs = s.sorted(ITEMS, bronze::SEQ).await?;
        let distinct: std::collections::BTreeSet<_> = seqs.iter().collect();
        assert_eq!(
            distinct.len(),
            seqs.len(),
            "two rows share a __seq: {seqs:?}"
        );
    }
    Ok(())
}

/// Issue 37 (5): DMS without a header (its default) writes a column added at the source as one
/// more field. The file stops at the first longer row instead of dead-lettering the rest and
/// finishing: the rows before it land, the object is not finished (its message is retried),
/// and once the family declares the column it resumes at that row, every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_at_the_source_stops_a_headerless_file_until_it_is_declared() -> Result<()> {
    for backend in backends() {
        let s = Setup::new(backend, "cdc-files-drift")?;
        let body = b"U,2026-11-29 11:34:01.000000,1,Widget,10.00,true\n\
I,2026-11-29 11:34:02.000000,5,Sprocket,2.00,true\n\
U,2026-11-29 11:34:03.000000,5,Sprocket,2.50,true,EUR\n\
D,2026-11-29 11:34:04.000000,1,Widget,10.00,true,EUR\n";
        let obj = s.put(CDC_KEY, body)?;
        for _ in 0..2 {
            let r = s
                .ingestor(1000)?
                .ingest(std::slice::from_ref(&obj), &s.source())
                .await?;
            assert!(
                matches!(&r.objects[0].1, ObjectOutcome::Failed { reason }
                    if reason.contains("row 3") && reason.contains("cdc.erp.columns.\"dbo.items\"")),
                "{r:?}"
            );
        }
        assert_eq!(s.lake.count(ITEMS).await?, 2, "rows 1-2 landed once");
        assert_eq!(s.lake.count("dead_letters").await?, 0);
        // The family declares the new column: the object resumes at row 3.
        let fixed = FAMILIES.replace(
            r#""active boolean"]"#,
            r#""active boolean", "currency string"]"#,
        );
        let mut cfg = example_config_with(&fixed)?;
        cfg.lake = s.lake.config.lake.clone();
        cfg.commit = s.lake.config.commit.clone();
        let clock = fixed_clock(lakestream_testkit::ingest_time());
        let ing = CdcFileIngestor::with_lake(cfg, s.lake.lake()?, clock);
        let r = ing.ingest(std::slice::from_ref(&obj), &s.source()).await?;
        assert_eq!(
            r.objects[0].1,
            ObjectOutcome::Committed {
                rows: 2,
                dead_lettered: 0
            },
            "{r:?}"
        );
        let ops = s.sorted(ITEMS, bronze::OP).await?;
        let ops: Vec<&str> = ops.iter().map(|o| o.as_deref().unwrap_or("")).collect();
        assert_eq!(ops, ["u", "c", "u", "d"]);
        let currency = s.sorted(ITEMS, "currency").await?;
        assert_eq!(
            currency,
            [None, None, Some("EUR".to_string()), Some("EUR".to_string())]
        );
        let again = ing.ingest(&[obj], &s.source()).await?;
        assert_eq!(again.objects[0].1, ObjectOutcome::AlreadyCommitted);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_fails_after_some_chunks_resumes_where_it_stopped() -> Result<()> {
    for backend in backends() {
        let s = Setup::new(backend, "cdc-files-resume")?;
        let body = generated(10);
        let obj = s.put("dms/dbo/items/LOAD00000002.csv", &body)?;
        let ing = s.ingestor(2)?;
        // The stream dies in row 6: chunks 1-2 and 3-4 land, then the read fails (retryable).
        let cut = body
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(4)
            .map_or(0, |(i, _)| i + 5);
        let faulty = Faulty {
            inner: s.source(),
            cut: Some(cut),
        };
        let r = ing.ingest(std::slice::from_ref(&obj), &faulty).await?;
        assert!(r.failed(&obj), "{r:?}");
        assert_eq!(s.lake.count(ITEMS).await?, 4);
        // Redelivered: the rest, each row once.
        let r = ing.ingest(std::slice::from_ref(&obj), &s.source()).await?;
        assert_eq!(
            r.objects[0].1,
            ObjectOutcome::Committed {
                rows: 6,
                dead_lettered: 0
            }
        );
        let batch = s.lake.read(ITEMS).await?;
        let mut rows: Vec<i64> = int64s(&batch, bronze::ROW)?.into_iter().flatten().collect();
        rows.sort_unstable();
        assert_eq!(rows, (1..=10).collect::<Vec<_>>());
        let again = ing.ingest(std::slice::from_ref(&obj), &s.source()).await?;
        assert_eq!(again.objects[0].1, ObjectOutcome::AlreadyCommitted);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_version_is_recorded_not_read() -> Result<()> {
    let s = Setup::new(Backend::Fs, "cdc-files-etag")?;
    let mut obj = s.put(LOAD_KEY, LOAD)?;
    obj.etag = Some("0123456789abcdef".into());
    let src = Faulty {
        inner: s.source(),
        cut: None,
    };
    let r = s
        .ingestor(100)?
        .ingest(std::slice::from_ref(&obj), &src)
        .await?;
    assert_eq!(r.objects[0].1, ObjectOutcome::Superseded);
    assert!(!r.failed(&obj));
    assert_eq!(s.lake.count(ITEMS).await?, 0);
    let letters = s.lake.read("dead_letters").await?;
    let errors = strings(&letters, "error")?;
    assert!(
        errors[0]
            .as_deref()
            .is_some_and(|e| e.contains("overwritten")),
        "{errors:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rows_are_dead_lettered_with_object_and_row() -> Result<()> {
    for backend in backends() {
        let s = Setup::new(backend, "cdc-files-bad")?;
        let text = "I,2026-11-29 11:34:01.000000,10,ok,1.00,true\n\
                    X,2026-11-29 11:34:01.000000,11,bad op,1.00,true\n\
                    U,2026-11-29 11:34:01.000000,twelve,bad id,1.00,true\n\
                    D,2026-11-29 11:34:01.000000,13,too few\n\
                    U,2026-11-29 11:34:02.000000,14,ok,2.50,false\n";
        let obj = s.put("dms/dbo/items/20261129-120000000.csv", text.as_bytes())?;
        let r = s
            .ingestor(2)?
            .ingest(std::slice::from_ref(&obj), &s.source())
            .await?;
        assert_eq!(
            r.objects[0].1,
            ObjectOutcome::Committed {
                rows: 2,
                dead_lettered: 3
            }
        );
        // Rows in (5) = bronze (2) + dead letters (3).
        assert_eq!(s.lake.count(ITEMS).await?, 2);
        let letters = s.lake.read("dead_letters").await?;
        let mut got: Vec<(Option<i64>, Option<String>, Option<String>)> =
            int64s(&letters, "line_number")?
                .into_iter()
                .zip(strings(&letters, "object_uri")?)
                .zip(strings(&letters, "error")?)
                .map(|((l, u), e)| (l, u, e))
                .collect();
        got.sort();
        let lines: Vec<Option<i64>> = got.iter().map(|g| g.0).collect();
        assert_eq!(lines, [Some(2), Some(3), Some(4)]);
        assert!(
            got.iter().all(
                |g| g.1.as_deref() == Some("s3://landing/dms/dbo/items/20261129-120000000.csv")
            )
        );
        assert!(
            got[0]
                .2
                .as_deref()
                .is_some_and(|e| e.contains("unknown Op")),
            "{got:?}"
        );
        assert!(
            got[1].2.as_deref().is_some_and(|e| e.contains("`id`")),
            "{got:?}"
        );
        assert!(
            got[2].2.as_deref().is_some_and(|e| e.contains("field(s)")),
            "{got:?}"
        );
        // Redelivered: no letter twice.
        let again = s
            .ingestor(2)?
            .ingest(std::slice::from_ref(&obj), &s.source())
            .await?;
        assert_eq!(again.objects[0].1, ObjectOutcome::AlreadyCommitted);
        assert_eq!(s.lake.count("dead_letters").await?, 3);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_lands_in_several_chunks_every_row_once() -> Result<()> {
    for backend in backends() {
        let s = Setup::new(backend, "cdc-files-large")?;
        let n = 200_000;
        let obj = s.put("dms/dbo/items/LOAD00000003.csv", &generated(n))?;
        let r = s
            .ingestor(60_000)?
            .ingest(std::slice::from_ref(&obj), &s.source())
            .await?;
        assert_eq!(r.rows_written, n, "{r:?}");
        // 4 chunks (60k, 60k, 60k, 20k) + the table's first commit = versions 0..=3.
        assert_eq!(s.lake.version(ITEMS).await?, 3);
        let batch = s.lake.read(ITEMS).await?;
        let mut rows: Vec<i64> = int64s(&batch, bronze::ROW)?.into_iter().flatten().collect();
        rows.sort_unstable();
        rows.dedup();
        assert_eq!(rows.len(), n);
        assert_eq!(rows.last(), Some(&(n as i64)));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_header_csv_and_json_lines() -> Result<()> {
    for backend in backends() {
        let s = Setup::new(backend, "cdc-files-formats")?;
        let pq = s.put("dms/dbo/items/LOAD00000001.parquet", LOAD_PARQUET)?;
        let hdr = s.put("dmsh/dbo/items/LOAD00000001.csv", LOAD_HEADER)?;
        let jl = s.put("files/shop/orders/orders.jsonl", ORDERS)?;
        let ing = s.ingestor(2)?;
        let r = ing.ingest(&[pq, hdr, jl], &s.source()).await?;
        assert_eq!(r.rows_written, 3 + 3 + 2, "{r:?}");
        let names = s.sorted(ITEMS, "name").await?;
        assert_eq!(names[1].as_deref(), Some("Gadget, large"));
        let ts = s.sorted(ITEMS, bronze::SOURCE_TS).await?;
        assert_eq!(ts[0].as_deref(), Some("2026-11-29T11:30:00Z"));
        let amounts = s.sorted("bronze/erph/dbo/items", "amount").await?;
        assert_eq!(
            amounts,
            [
                Some("9.50".into()),
                Some("120.00".into()),
                Some("0.99".into())
            ]
        );
        let orders = "bronze/shop/shop/orders";
        let ops = s.sorted(orders, bronze::OP).await?;
        assert_eq!(ops, [Some("r".into()), Some("r".into())]);
        // Plain files: when the object was written orders rows; a new field is a new nullable
        // column.
        let seqs = s.sorted(orders, bronze::SEQ).await?;
        assert_eq!(
            seqs[1],
            Some(format!(
                "0|{:020}|files/shop/orders/orders.jsonl|000000000002",
                s.written("files/shop/orders/orders.jsonl")?
            ))
        );
        assert_eq!(s.sorted(orders, "note").await?, [None, Some("rush".into())]);
        assert_eq!(
            s.sorted(orders, "total").await?,
            [Some("12.5".into()), Some("3.0".into())]
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_objects_are_dead_lettered_once_with_the_fix() -> Result<()> {
    let s = Setup::new(Backend::Fs, "cdc-files-refused")?;
    let corrupt = s.put(
        "dms/dbo/items/LOAD00000009.parquet",
        b"PAR1 not really parquet",
    )?;
    let undeclared = s.put("dms/dbo/other/LOAD00000001.csv", LOAD)?;
    let ing = s.ingestor(100)?;
    for _ in 0..2 {
        let r = ing
            .ingest(&[corrupt.clone(), undeclared.clone()], &s.source())
            .await?;
        assert!(
            matches!(&r.objects[0].1, ObjectOutcome::Refused { reason } if reason.contains("Parquet")),
            "{r:?}"
        );
        assert!(
            matches!(&r.objects[1].1, ObjectOutcome::Refused { reason } if reason.contains("cdc.erp.columns.\"dbo.other\"")),
            "{r:?}"
        );
    }
    assert_eq!(s.lake.count("dead_letters").await?, 2);
    Ok(())
}

/// Issue 37 (8): a CSV header or a Parquet schema with two columns that differ only in case
/// (`a`, `A`) refuses the object naming both, instead of shifting one column's values into
/// another; a JSON line with such twins is a dead letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_only_twin_columns_are_refused_not_merged() -> Result<()> {
    let s = Setup::new(Backend::Fs, "cdc-files-twins")?;
    let csv = s.put(
        "dmsh/dbo/items/LOAD00000002.csv",
        b"id,a,A,amount\n1,x,y,2.00\n",
    )?;
    let json = s.put(
        "files/shop/orders/o.jsonl",
        b"{\"order_id\":1,\"Total\":2.0,\"total\":3.0}\n{\"order_id\":2,\"total\":4.0}\n",
    )?;
    let r = s.ingestor(100)?.ingest(&[csv, json], &s.source()).await?;
    assert!(
        matches!(&r.objects[0].1, ObjectOutcome::Refused { reason } if reason.contains("`a` and `A`")),
        "{r:?}"
    );
    assert_eq!(
        r.objects[1].1,
        ObjectOutcome::Committed {
            rows: 1,
            dead_lettered: 1
        },
        "{r:?}"
    );
    let letters = s.lake.read("dead_letters").await?;
    let errors = strings(&letters, "error")?;
    assert!(
        errors
            .iter()
            .flatten()
            .any(|e| e.contains("`Total` and `total`")),
        "{errors:?}"
    );
    Ok(())
}

/// Issue 37 (5): a value that no longer parses as its declared column type (the source column
/// changed type, e.g. a decimal now text) is dead-lettered with its row, and bronze records the
/// type change in the same commit; the table's apply job then stops loudly instead of applying
/// the other rows around the missing one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_type_change_stops_the_tables_apply() -> Result<()> {
    use lakestream_core::refine::cdc::family::all_jobs;
    use lakestream_core::refine::{RunContext, run_job};
    for backend in backends() {
        let s = Setup::new(backend, "cdc-files-type-change")?;
        let body = b"U,2026-11-29 11:34:01.000000,1,Widget,10.00,true\n\
U,2026-11-29 11:34:02.000000,5,Sprocket,ten,true\n";
        let obj = s.put(CDC_KEY, body)?;
        let r = s
            .ingestor(1000)?
            .ingest(std::slice::from_ref(&obj), &s.source())
            .await?;
        assert_eq!(
            r.objects[0].1,
            ObjectOutcome::Committed {
                rows: 1,
                dead_lettered: 1
            },
            "{r:?}"
        );
        let h = TableHandle::open_existing(&s.lake.lake()?, ITEMS).await?;
        let recorded = h.property(bronze::TYPE_CHANGE_PROPERTY)?;
        assert!(
            recorded
                .as_deref()
                .is_some_and(|t| t.contains("amount") && !t.contains("ten")),
            "{backend:?}: {recorded:?}"
        );
        let cfg = s.lake.config.clone();
        let l = s.lake.lake()?;
        let settings: lakestream_core::commit::CommitSettings = (&cfg.commit).into();
        let jobs = all_jobs(&l, &cfg).await?;
        let job = jobs
            .iter()
            .find(|j| j.job == "cdc-erp/dbo.items")
            .ok_or_else(|| anyhow::anyhow!("no job in {jobs:?}"))?;
        let ctx = RunContext::new(&cfg, &l, &settings, chrono::Utc::now());
        let e = run_job(&ctx, job, 10).await.err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.to_string().contains("CDC: schema changes")),
            "{backend:?}: {e:?}"
        );
    }
    Ok(())
}

/// Issue 38 (2): a JSON line refused (here for its `Op`) adds none of its columns: before, the
/// keys sorted before `Op` were added to the chunk first, so a refused row still widened bronze
/// with all-null columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_json_line_adds_no_column() -> Result<()> {
    let s = Setup::new(Backend::Fs, "cdc-files-refused-width")?;
    let json = s.put(
        "dms/dbo/items/20261129-120000000.jsonl",
        b"{\"AA_forged\":1,\"Op\":\"X\",\"id\":5}\n{\"Op\":\"I\",\"id\":6,\"ts\":\"2026-11-29 12:00:00\"}\n",
    )?;
    let r = s.ingestor(100)?.ingest(&[json], &s.source()).await?;
    assert_eq!(
        r.objects[0].1,
        ObjectOutcome::Committed {
            rows: 1,
            dead_lettered: 1
        },
        "{r:?}"
    );
    let bronze = s.lake.read(ITEMS).await?;
    let names: Vec<String> = bronze
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().to_lowercase())
        .collect();
    assert!(!names.contains(&"aa_forged".to_string()), "{names:?}");
    Ok(())
}

/// Review of issue 38: the width bounds count the columns an object's earlier chunks brought
/// (committed with them), so an object in many chunks cannot widen its table by a table's
/// worth per chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_chunk_of_an_object_counts_the_columns_before_it() -> Result<()> {
    let limits = "\n[cdc_limits]\nmax_table_columns = 50\nmax_new_columns = 100\n";
    let s = Setup::with(Backend::Fs, "cdc-files-chunk-width", limits)?;
    let line = |id: usize| {
        let cols: Vec<String> = (0..30).map(|i| format!("\"k{id}_{i}\":{i}")).collect();
        format!("{{\"order_id\":{id},{}}}\n", cols.join(","))
    };
    let body = format!("{}{}", line(1), line(2));
    let obj = s.put("files/shop/orders/wide.jsonl", body.as_bytes())?;
    let r = s.ingestor(1)?.ingest(&[obj], &s.source()).await?;
    assert_eq!(
        r.objects[0].1,
        ObjectOutcome::Committed {
            rows: 1,
            dead_lettered: 1
        },
        "{r:?}"
    );
    let width = s
        .lake
        .read("bronze/shop/shop/orders")
        .await?
        .schema()
        .fields()
        .len();
    assert!(width < 50 + 12, "bronze has {width} columns");
    Ok(())
}

/// Review of issue 38: a DMS file's `Op` is no column of the table, so it does not count
/// against `max_table_columns` (a table exactly at the bound refused its CDC files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dms_op_column_does_not_count_against_the_width() -> Result<()> {
    let limits = "\n[cdc_limits]\nmax_table_columns = 3\n";
    let s = Setup::with(Backend::Fs, "cdc-files-op-width", limits)?;
    let obj = s.put(
        "dms/dbo/items/20261129-130000000.jsonl",
        b"{\"Op\":\"I\",\"id\":7,\"ts\":\"2026-11-29 13:00:00\",\"name\":\"x\"}\n",
    )?;
    let r = s.ingestor(10)?.ingest(&[obj], &s.source()).await?;
    assert_eq!(
        r.objects[0].1,
        ObjectOutcome::Committed {
            rows: 1,
            dead_lettered: 0
        },
        "{r:?}"
    );
    Ok(())
}
