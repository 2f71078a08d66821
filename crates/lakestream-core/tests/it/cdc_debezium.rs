//! Debezium topics into bronze (issue 26), on every backend: rows and lineage equal what was
//! sent, replays are no-ops, a tombstone after its delete is skipped (any other is a delete),
//! bad records are dead-lettered
//! with their bytes, new columns evolve the table, two ingests of one batch land once, and a
//! table that appears later is created with the bronze properties.

use anyhow::{Context, Result};
use base64::Engine as _;
use lakestream_core::table::TableHandle;
use lakestream_core::{IngestReport, KafkaIngestor, Lake};
use lakestream_formats::config::{PipelineConfig, bronze};
use lakestream_formats::record::{RecordValue, SourceRecord};
use lakestream_testkit::{
    Backend, INGEST_TIME, TestLake, assert_accounted, backends, example_config_with, int64s,
    strings,
};

macro_rules! fx {
    ($name:literal) => {
        include_bytes!(concat!("../../../../tests/fixtures/debezium/", $name)).as_slice()
    };
}

const FAMILY: &str = r#"
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*", "crm.inventory.*"]
columns = { "public.orders" = ["created_at timestamp", "amount decimal(10,2)", "ship_by date"] }
"#;

const CUSTOMERS: &str = "crm.public.customers";
const BRONZE: &str = "bronze/crm/public/customers";

fn config() -> Result<PipelineConfig> {
    Ok(example_config_with(FAMILY)?)
}

fn rec(topic: &str, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> SourceRecord {
    let mut r = SourceRecord::new(topic, 0, offset, 1_764_412_400_000, value.unwrap_or(b""));
    if value.is_none() {
        r.value = RecordValue::Null;
    }
    match key {
        Some(k) => r.with_key(k),
        None => r,
    }
}

/// r, c, u, d, its tombstone, t: the PostgreSQL fixtures at offsets 10..=15.
fn customers() -> Vec<SourceRecord> {
    let (k1004, k1005) = (
        fx!("pg_customers_1004.key.json"),
        fx!("pg_customers_1005.key.json"),
    );
    vec![
        rec(CUSTOMERS, 10, Some(k1004), Some(fx!("pg_customers_r.json"))),
        rec(CUSTOMERS, 11, Some(k1005), Some(fx!("pg_customers_c.json"))),
        rec(CUSTOMERS, 12, Some(k1004), Some(fx!("pg_customers_u.json"))),
        rec(CUSTOMERS, 13, Some(k1005), Some(fx!("pg_customers_d.json"))),
        rec(CUSTOMERS, 14, Some(k1005), None),
        rec(CUSTOMERS, 15, None, Some(fx!("pg_customers_t.json"))),
    ]
}

/// Rows of `table` as (offset, column values) sorted by `__offset`.
async fn by_offset(
    lake: &TestLake,
    table: &str,
    cols: &[&str],
) -> Result<Vec<Vec<Option<String>>>> {
    let b = lake.read(table).await?;
    let offsets = int64s(&b, bronze::OFFSET)?;
    let columns: Vec<Vec<Option<String>>> = cols
        .iter()
        .map(|c| strings(&b, c))
        .collect::<lakestream_testkit::Result<_>>()?;
    let mut rows: Vec<(Option<i64>, Vec<Option<String>>)> = (0..b.num_rows())
        .map(|i| (offsets[i], columns.iter().map(|c| c[i].clone()).collect()))
        .collect();
    rows.sort();
    Ok(rows.into_iter().map(|r| r.1).collect())
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

async fn property(lake: &TestLake, table: &str, key: &str) -> Result<Option<String>> {
    let h = TableHandle::open_existing(&Lake::new(&lake.config.lake)?, table).await?;
    Ok(h.property(key)?)
}

/// `r` accounts for the `sent` records (the test's count of its input) as these counts.
fn check(
    sent: usize,
    r: &IngestReport,
    written: usize,
    tombstones: usize,
    dead: usize,
    dup: usize,
) {
    assert_accounted(sent, r);
    assert_eq!(
        (
            r.written,
            r.tombstones_skipped,
            r.dead_lettered,
            r.duplicates
        ),
        (written, tombstones, dead, dup),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bronze_rows_and_lineage_equal_what_was_sent_and_replays_are_no_ops() -> Result<()> {
    for b in backends() {
        let lake = TestLake::with_config(b, "dbz-rows", config()?)?;
        let ing = lake.ingestor()?;
        let batch = customers();
        check(batch.len(), &ing.ingest(&batch).await?, 5, 1, 0, 0);
        let rows = by_offset(
            &lake,
            BRONZE,
            &[
                "__op",
                "__seq",
                "__key",
                "__topic",
                "__partition",
                "id",
                "first_name",
                "balance",
            ],
        )
        .await?;
        assert_eq!(
            rows,
            vec![
                vec![
                    s("r"),
                    s("00000000000024023119"),
                    s(r#"{"id":1004}"#),
                    s(CUSTOMERS),
                    s("0"),
                    s("1004"),
                    s("Ada"),
                    s("1234.50")
                ],
                vec![
                    s("c"),
                    s("00000000000024023200"),
                    s(r#"{"id":1005}"#),
                    s(CUSTOMERS),
                    s("0"),
                    s("1005"),
                    s("Bob"),
                    None
                ],
                vec![
                    s("u"),
                    s("00000000000024023344"),
                    s(r#"{"id":1004}"#),
                    s(CUSTOMERS),
                    s("0"),
                    s("1004"),
                    s("Augusta"),
                    s("-19.95")
                ],
                vec![
                    s("d"),
                    s("00000000000024023480"),
                    s(r#"{"id":1005}"#),
                    s(CUSTOMERS),
                    s("0"),
                    s("1005"),
                    None,
                    None
                ],
                vec![
                    s("t"),
                    s("00000000000024023600"),
                    None,
                    s(CUSTOMERS),
                    s("0"),
                    None,
                    None,
                    None
                ],
            ],
            "{b:?}"
        );
        let all = lake.read(BRONZE).await?;
        let ingested = int64s(&all, bronze::INGESTED_AT)?;
        assert!(
            ingested.iter().all(|t| *t == Some(INGEST_TIME * 1_000_000)),
            "{ingested:?}"
        );
        let mut src: Vec<i64> = int64s(&all, bronze::SOURCE_TS)?
            .into_iter()
            .flatten()
            .collect();
        src.sort();
        assert_eq!(
            src,
            [
                1_764_412_400_000_000,
                1_764_413_000_000_000,
                1_764_414_000_000_000,
                1_764_415_000_000_000,
                1_764_416_000_000_000
            ]
        );
        assert_eq!(
            property(&lake, BRONZE, bronze::FAMILY_PROPERTY).await?,
            s("crm")
        );
        assert_eq!(
            property(&lake, BRONZE, bronze::TABLE_PROPERTY).await?,
            s("public.customers")
        );
        assert_eq!(
            property(&lake, BRONZE, bronze::KEYS_PROPERTY).await?,
            s("id")
        );
        assert!(
            property(&lake, BRONZE, "delta.checkpointInterval")
                .await?
                .is_some()
        );
        let v = lake.version(BRONZE).await?;
        // A replay: everything committed is a duplicate, the tombstone skipped again.
        check(batch.len(), &ing.ingest(&batch).await?, 0, 1, 0, 5);
        assert_eq!(
            lake.version(BRONZE).await?,
            v,
            "a replay must not commit ({b:?})"
        );
        assert_eq!(lake.count(BRONZE).await?, 5);
        assert_eq!(
            lake.count("dead_letters").await?,
            0,
            "tombstones are never dead-lettered"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_are_dead_lettered_with_their_bytes_and_new_columns_evolve() -> Result<()> {
    for b in backends() {
        let lake = TestLake::with_config(b, "dbz-bad", config()?)?;
        let ing = lake.ingestor()?;
        let first = [rec(
            CUSTOMERS,
            0,
            Some(fx!("pg_customers_1005.key.json")),
            Some(fx!("pg_customers_c.json")),
        )];
        check(first.len(), &ing.ingest(&first).await?, 1, 0, 0, 0);
        let batch = [
            rec(
                CUSTOMERS,
                1,
                Some(fx!("pg_customers_1006.key.json")),
                Some(fx!("pg_customers_c_new_column.json")),
            ),
            rec(
                CUSTOMERS,
                2,
                Some(fx!("pg_customers_1007.key.json")),
                Some(fx!("pg_customers_c_conflict.json")),
            ),
            rec(CUSTOMERS, 3, None, Some(b"not json")),
            // Names that cannot be a table: dead-lettered, never a path outside the family.
            rec(
                "crm.public.%2e%2e",
                0,
                None,
                Some(fx!("pg_customers_c.json")),
            ),
            rec(
                "crm.public._delta_log",
                0,
                None,
                Some(fx!("pg_customers_c.json")),
            ),
            // A tombstone there that does not follow its delete is a delete: kept with the
            // topic's other records for a redrive once the name is fixed.
            rec(
                "crm.public._delta_log",
                1,
                Some(fx!("pg_customers_1005.key.json")),
                None,
            ),
        ];
        let r = ing.ingest(&batch).await?;
        check(batch.len(), &r, 1, 0, 5, 0);
        let t = r
            .tables
            .iter()
            .find(|t| t.table == BRONZE)
            .context("bronze report")?;
        assert_eq!(t.columns_added, ["loyalty_tier"], "{b:?}");
        let rows = by_offset(&lake, BRONZE, &["id", "email", "loyalty_tier"]).await?;
        assert_eq!(
            rows,
            vec![
                vec![s("1005"), s("bob@example.com"), None],
                vec![s("1006"), s("cy@example.com"), s("gold")]
            ],
            "{b:?}"
        );
        let dl = lake.read("dead_letters").await?;
        let mut letters: Vec<(String, String, String)> = strings(&dl, "topic")?
            .into_iter()
            .zip(strings(&dl, "raw_base64")?)
            .zip(strings(&dl, "error")?)
            .map(|((t, raw), e)| {
                (
                    t.unwrap_or_default(),
                    raw.unwrap_or_default(),
                    e.unwrap_or_default(),
                )
            })
            .collect();
        letters.sort();
        assert_eq!(letters.len(), 5, "{letters:?}");
        let b64 = |v: &[u8]| base64::engine::general_purpose::STANDARD.encode(v);
        let conflict = letters
            .iter()
            .find(|l| l.1 == b64(fx!("pg_customers_c_conflict.json")))
            .context("conflict letter")?;
        assert!(conflict.2.contains("column `email`"), "{conflict:?}");
        assert!(
            letters
                .iter()
                .any(|l| l.1 == b64(b"not json") && l.2.contains("not JSON"))
        );
        for topic in ["crm.public.%2e%2e", "crm.public._delta_log"] {
            let l = letters
                .iter()
                .find(|l| l.0 == topic)
                .context("bad table letter")?;
            assert!(l.2.contains("cannot name a table"), "{l:?}");
        }
        // The orphan tombstone is kept: its raw value is empty (a null value).
        assert!(
            letters
                .iter()
                .any(|l| l.0 == "crm.public._delta_log" && l.1.is_empty())
        );
        if let Some(dir) = lake.dir() {
            let files = lakestream_testkit::files_under(dir);
            assert!(
                files.iter().all(|f| !f.to_string_lossy().contains("%2e")
                    && !f.to_string_lossy().contains("public/_delta_log")),
                "{files:?}"
            );
        }
        // Redelivered: nothing twice.
        let again = ing.ingest(&batch).await?;
        check(batch.len(), &again, 0, 0, 0, 6);
        assert_eq!(lake.count("dead_letters").await?, 5);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ingests_of_one_batch_at_once_land_once() -> Result<()> {
    for b in backends() {
        let lake = TestLake::with_config(b, "dbz-race", config()?)?;
        let (one, two) = (lake.ingestor()?, lake.ingestor()?);
        let batch = customers();
        let (r1, r2) = tokio::join!(one.ingest(&batch), two.ingest(&batch));
        let (r1, r2) = (r1?, r2?);
        assert_accounted(batch.len(), &r1);
        assert_accounted(batch.len(), &r2);
        assert_eq!(r1.written + r2.written, 5, "{r1:?} {r2:?}");
        assert_eq!(lake.count(BRONZE).await?, 5, "{b:?}");
        let offsets = int64s(&lake.read(BRONZE).await?, bronze::OFFSET)?;
        let mut offsets: Vec<i64> = offsets.into_iter().flatten().collect();
        offsets.sort();
        assert_eq!(offsets, [10, 11, 12, 13, 15]);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_appearing_later_are_created() -> Result<()> {
    for b in backends() {
        let lake = TestLake::with_config(b, "dbz-later", config()?)?;
        let ing = KafkaIngestor::new(
            lake.config.clone(),
            lakestream_testkit::fixed_clock(lakestream_testkit::ingest_time()),
        )?;
        let batch = customers();
        check(batch.len(), &ing.ingest(&batch).await?, 5, 1, 0, 0);
        let orders = "crm.public.orders";
        let products = "crm.inventory.products";
        let (ko, kp) = (
            fx!("plain_orders_2001.key.json"),
            fx!("mysql_products_101.key.json"),
        );
        let later = [
            rec(orders, 0, Some(ko), Some(fx!("plain_orders_c.json"))),
            rec(orders, 1, Some(ko), Some(fx!("plain_orders_u.json"))),
            rec(
                orders,
                2,
                Some(ko),
                Some(fx!("plain_orders_u_base64_decimal.json")),
            ),
            rec(products, 7, Some(kp), Some(fx!("mysql_products_c.json"))),
            rec(
                products,
                8,
                Some(kp),
                Some(fx!("mysql_products_u_row1.json")),
            ),
            rec(
                products,
                9,
                Some(kp),
                Some(fx!("mysql_products_u_rollover.json")),
            ),
        ];
        let r = ing.ingest(&later).await?;
        check(later.len(), &r, 5, 0, 1, 0);
        let rows = by_offset(
            &lake,
            "bronze/crm/public/orders",
            &["__op", "amount", "ship_by", "meta"],
        )
        .await?;
        assert_eq!(
            rows,
            vec![
                vec![
                    s("c"),
                    s("1234.50"),
                    s("2026-12-03"),
                    s(r#"{"channel":"web","tags":["a"]}"#)
                ],
                vec![s("u"), s("99.90"), s("2026-12-04"), None],
            ],
            "{b:?}"
        );
        let created = int64s(&lake.read("bronze/crm/public/orders").await?, "created_at")?;
        let mut created: Vec<i64> = created.into_iter().flatten().collect();
        created.sort();
        // ISO text, then epoch milliseconds.
        assert_eq!(created, [1_764_412_441_123_000, 1_795_948_441_123_456]);
        let rows = by_offset(
            &lake,
            "bronze/crm/inventory/products",
            &["__seq", "name", "weight"],
        )
        .await?;
        assert_eq!(
            rows,
            vec![
                vec![
                    s("0000000003.00000000000000004696.0000000000"),
                    s("scooter"),
                    s("3.14")
                ],
                vec![
                    s("0000000003.00000000000000004696.0000000001"),
                    s("scooter"),
                    s("3.5")
                ],
                vec![
                    s("0000000004.00000000000000000154.0000000000"),
                    s("e-scooter"),
                    s("3.5")
                ],
            ],
            "{b:?}"
        );
        assert_eq!(
            property(
                &lake,
                "bronze/crm/inventory/products",
                bronze::TABLE_PROPERTY
            )
            .await?,
            s("inventory.products")
        );
        assert_eq!(
            property(&lake, "bronze/crm/public/orders", bronze::KEYS_PROPERTY).await?,
            s("id")
        );
        let dl = lake.read("dead_letters").await?;
        let err = strings(&dl, "error")?;
        assert!(
            err.iter()
                .flatten()
                .any(|e| e.contains("decimal.handling.mode=string")),
            "{err:?}"
        );
        assert_eq!(
            strings(&dl, "target_table")?,
            [s("bronze/crm/public/orders")]
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_msk_event_of_debezium_records_decodes_keys_and_tombstones() -> Result<()> {
    let b64 = |v: &[u8]| base64::engine::general_purpose::STANDARD.encode(v);
    let event = serde_json::json!({
        "eventSource": "aws:kafka",
        "records": { "crm.public.customers-0": [
            {"topic": CUSTOMERS, "partition": 0, "offset": 1, "timestamp": 1_764_412_400_000i64, "timestampType": "CREATE_TIME",
             "key": b64(fx!("pg_customers_1005.key.json")), "value": b64(fx!("pg_customers_c.json")), "headers": []},
            {"topic": CUSTOMERS, "partition": 0, "offset": 2, "timestamp": 1_764_412_400_000i64, "timestampType": "CREATE_TIME",
             "key": b64(fx!("pg_customers_1005.key.json")), "value": null, "headers": []}
        ]}
    });
    let records = lakestream_formats::kafka::KafkaEvent::from_json(event.to_string().as_bytes())?
        .into_source_records();
    let lake = TestLake::with_config(Backend::Fs, "dbz-msk", config()?)?;
    let r = lake.ingestor()?.ingest(&records).await?;
    // A tombstone that does not follow its delete (log compaction removed the delete event)
    // is a delete of its key with no position: `__seq` empty, the key's fields as its row.
    check(records.len(), &r, 2, 0, 0, 0);
    assert_eq!(
        by_offset(&lake, BRONZE, &["__key", "email", "__op", "__seq", "id"]).await?,
        vec![
            vec![
                s(r#"{"id":1005}"#),
                s("bob@example.com"),
                s("c"),
                s("00000000000024023200"),
                s("1005")
            ],
            vec![s(r#"{"id":1005}"#), None, s("d"), s(""), s("1005")]
        ]
    );
    Ok(())
}

/// Issue 37 (5): a change whose value does not fit its column (the source column changed type:
/// `email` text -> int) is dead-lettered with its bytes, bronze records the type change (also
/// when every record of the batch was refused), and the table's apply job stops loudly instead
/// of applying the other changes around the missing one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_type_change_stops_the_tables_apply_instead_of_diverging() -> Result<()> {
    use lakestream_core::refine::cdc::family::all_jobs;
    use lakestream_core::refine::{RunContext, run_job};
    for b in backends() {
        let cfg = config()?;
        let lake = TestLake::with_config(b, "dbz-type-change", cfg)?;
        let cfg = lake.config.clone();
        let ing = lake.ingestor()?;
        let l = Lake::new(&cfg.lake)?;
        let s: lakestream_core::commit::CommitSettings = (&cfg.commit).into();
        let apply = async || -> lakestream_core::Result<()> {
            let jobs = all_jobs(&l, &cfg).await?;
            let job = jobs
                .iter()
                .find(|j| j.job == "cdc-crm/public.customers")
                .ok_or_else(|| lakestream_core::Error::Config("no job".into()))?;
            let ctx = RunContext::new(&cfg, &l, &s, chrono::Utc::now());
            run_job(&ctx, job, 10).await.map(|_| ())
        };
        let first = [rec(
            CUSTOMERS,
            0,
            Some(fx!("pg_customers_1005.key.json")),
            Some(fx!("pg_customers_c.json")),
        )];
        check(first.len(), &ing.ingest(&first).await?, 1, 0, 0, 0);
        apply().await?;
        assert_eq!(
            property(&lake, BRONZE, bronze::TYPE_CHANGE_PROPERTY).await?,
            None
        );
        // A batch of only the changed-type record: refused, and still recorded.
        let conflict = [rec(
            CUSTOMERS,
            1,
            Some(fx!("pg_customers_1007.key.json")),
            Some(fx!("pg_customers_c_conflict.json")),
        )];
        let r = ing.ingest(&conflict).await?;
        check(conflict.len(), &r, 0, 0, 1, 0);
        let recorded = property(&lake, BRONZE, bronze::TYPE_CHANGE_PROPERTY).await?;
        let recorded = recorded.context("the type change is recorded on bronze")?;
        assert!(
            recorded.contains("email") && recorded.contains("Utf8") && !recorded.contains("42"),
            "{b:?}: {recorded}"
        );
        let dead = lake.read("dead_letters").await?;
        let reasons = strings(&dead, "error")?;
        assert!(
            reasons
                .iter()
                .flatten()
                .any(|r| r.contains("changed type") && r.contains("CDC: schema changes")),
            "{b:?}: {reasons:?}"
        );
        // The apply stops, naming the fix, whatever else bronze gains.
        ing.ingest(&[rec(
            CUSTOMERS,
            2,
            Some(fx!("pg_customers_1005.key.json")),
            Some(fx!("pg_customers_d.json")),
        )])
        .await?;
        let e = apply().await.err().context("the apply must stop")?;
        assert!(
            e.to_string().contains("CDC: schema changes") && e.to_string().contains("email"),
            "{b:?}: {e}"
        );
    }
    Ok(())
}
