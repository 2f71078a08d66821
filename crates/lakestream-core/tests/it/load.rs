//! `lakestream load` (back-fill): files append exactly once per content, through the commit
//! path, with the ingest's column rules; what cannot be loaded is refused whole, naming why.

use anyhow::{Context, Result};
use deltalake::arrow::array::{Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use lakestream_core::commit::CommitSettings;
use lakestream_core::load::{FileFormat, LoadFile, load_file};
use lakestream_core::{Lake, read};
use lakestream_testkit::{TestLake, backends, int64s, strings};
use std::sync::Arc;

fn file(name: &str, bytes: &[u8], format: FileFormat) -> LoadFile {
    LoadFile {
        name: name.into(),
        bytes: bytes.to_vec().into(),
        format,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_load_once_with_the_ingest_rules() -> Result<()> {
    for backend in backends() {
        let lake = TestLake::new(backend, "load")?;
        let cfg = lake.config.clone();
        let l = Lake::new(&cfg.lake)?;
        let s: CommitSettings = (&cfg.commit).into();
        let now = chrono::Utc::now();
        // A byte-order mark and a quoted header; one value missing (nullable).
        let csv = file(
            "a.csv",
            b"\xEF\xBB\xBF\"order_id\",ORDER_OWNER,order_value,timestamp\r\n1,ann,5,2025-01-01T10:00:00Z\r\n2,bob,,2025-01-01T11:00:00Z\r\n",
            FileFormat::Csv,
        );
        // Two loads of the same bytes at once: one appends, the other finds its `txn`.
        let (a, b) = tokio::join!(
            load_file(&l, &cfg, &s, now, "raw/order", &csv),
            load_file(&l, &cfg, &s, now, "raw/order", &csv)
        );
        let (a, b) = (a?, b?);
        assert_eq!(
            [a.already_loaded, b.already_loaded]
                .iter()
                .filter(|x| **x)
                .count(),
            1,
            "{backend:?} {a:?} {b:?}"
        );
        assert_eq!(read::read_table(&l, "raw/order", None).await?.num_rows(), 2);
        // JSON lines: a number in a timestamp column is epoch milliseconds, as in a Kafka value.
        let json = file(
            "b.jsonl",
            b"{\"order_id\":3,\"order_owner\":\"cy\",\"order_value\":7,\"timestamp\":1735729200000}\n\n",
            FileFormat::Json,
        );
        let r = load_file(&l, &cfg, &s, now, "raw/order", &json).await?;
        assert_eq!((r.rows, r.already_loaded), (1, false));
        let t = read::read_table(&l, "raw/order", None).await?;
        let ids = int64s(&t, "order_id")?;
        let ts = strings(&t, "timestamp")?;
        let at = ids.iter().position(|i| *i == Some(3)).context("row 3")?;
        assert!(
            ts[at]
                .as_deref()
                .is_some_and(|t| t.starts_with("2025-01-01T11:00:00")),
            "{ts:?}"
        );
        // Generated columns: no Kafka partition, the row's index as offset.
        assert_eq!(int64s(&t, "kafka_partition")?[at], Some(-1));
        assert_eq!(int64s(&t, "kafka_offset")?[at], Some(0));
        // The same content under another name is the same file.
        let again = file("copy.jsonl", &json.bytes, FileFormat::Json);
        assert!(
            load_file(&l, &cfg, &s, now, "raw/order", &again)
                .await?
                .already_loaded
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_loaded_is_refused_whole() -> Result<()> {
    let lake = TestLake::new(lakestream_testkit::Backend::Fs, "load-refused")?;
    let cfg = lake.config.clone();
    let l = Lake::new(&cfg.lake)?;
    let s: CommitSettings = (&cfg.commit).into();
    let now = chrono::Utc::now();
    // A Parquet value that does not fit the table's type (int32) is refused, not nulled.
    let schema = Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, false),
        Field::new("order_owner", DataType::Utf8, false),
        Field::new("order_value", DataType::Int64, true),
        Field::new("timestamp", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(StringArray::from(vec!["ann"])),
            Arc::new(Int64Array::from(vec![Some(1i64 << 40)])),
            Arc::new(StringArray::from(vec!["2025-01-01T10:00:00Z"])),
        ],
    )?;
    let mut buf = Vec::new();
    let mut w = deltalake::parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None)?;
    w.write(&batch)?;
    w.close()?;
    let e = load_file(
        &l,
        &cfg,
        &s,
        now,
        "raw/order",
        &file("big.parquet", &buf, FileFormat::Parquet),
    )
    .await
    .err()
    .context("must fail")?
    .to_string();
    assert!(
        e.contains("order_value") && e.contains("does not cast"),
        "{e}"
    );
    let cases: [(&str, &[u8], FileFormat, &str); 4] = [
        ("x.csv", b"order_id,colour\n1,red\n", FileFormat::Csv, "column `colour` the table lacks"),
        ("y.jsonl", b"{\"order_id\":1,\"order_owner\":\"a\",\"timestamp\":\"9999-12-31T23:59:59Z\",\"extra\":1}\n", FileFormat::Json, "name no column"),
        ("z.csv", b"order_id,order_owner,timestamp\n1,a,10000-01-01T00:00:00Z\n", FileFormat::Csv, "bad CSV"),
        ("w.csv", b"order_id,Order_ID,order_owner,timestamp\n1,1,a,2025-01-01T00:00:00Z\n", FileFormat::Csv, "one table column"),
    ];
    for (name, bytes, format, want) in cases {
        let e = load_file(&l, &cfg, &s, now, "raw/order", &file(name, bytes, format))
            .await
            .err()
            .context(name)?
            .to_string();
        assert!(e.contains(want), "{name}: {e}");
    }
    assert!(
        read::summarize(&l, "raw/order").await?.is_none(),
        "nothing was written"
    );
    // Derived tables and the dead letters take no load.
    let ok = file(
        "ok.csv",
        b"order_id,order_owner,timestamp\n1,a,2025-01-01T00:00:00Z\n",
        FileFormat::Csv,
    );
    load_file(&l, &cfg, &s, now, "raw/order", &ok).await?;
    let job = cfg.refine_job("gold").context("gold")?;
    let ctx = lakestream_core::refine::RunContext::new(&cfg, &l, &s, now);
    lakestream_core::refine::run_job(&ctx, job, 10).await?;
    for table in ["gold/order_hourly", "dead_letters"] {
        let e = load_file(&l, &cfg, &s, now, table, &ok)
            .await
            .err()
            .context(table)?
            .to_string();
        assert!(
            e.contains("refine job `gold`") || e.contains("dead-letter"),
            "{table}: {e}"
        );
    }
    Ok(())
}

/// The table named on the command line is a path inside the lake: one that climbs out of it,
/// is absolute or hides in the lake's own folders is refused before anything is read or written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_name_cannot_leave_the_lake() -> Result<()> {
    let lake = TestLake::new(lakestream_testkit::Backend::Fs, "load-names")?;
    let cfg = lake.config.clone();
    let l = Lake::new(&cfg.lake)?;
    let s: CommitSettings = (&cfg.commit).into();
    let ok = file(
        "ok.csv",
        b"order_id,order_owner,timestamp\n1,a,2025-01-01T00:00:00Z\n",
        FileFormat::Csv,
    );
    for name in [
        "../outside",
        "raw/../../outside",
        "/etc/outside",
        "raw/order/_delta_log",
    ] {
        let r = load_file(&l, &cfg, &s, chrono::Utc::now(), name, &ok).await;
        assert!(r.is_err(), "{name} must be refused: {r:?}");
    }
    let dir = lake.dir().context("fs lake")?;
    let parent = dir.parent().context("parent")?;
    assert!(
        !parent.join("outside").exists() && !dir.join("raw").exists(),
        "nothing was written"
    );
    Ok(())
}
