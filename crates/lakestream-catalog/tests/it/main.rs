//! The catalog sync against an in-memory catalog (every backend of the lake): what it
//! registers for the example pipeline, that a second run changes nothing, that a table
//! registered by someone else is left alone and one registered by hand at the table's location
//! is adopted, and the per-run partition bound. The Glue API itself (on the emulator) and an
//! independent read-back are in `tests/e2e/test_catalog.py`.

use lakestream_catalog::pipeline::Outcome;
use lakestream_catalog::{Action, Error, MemoryCatalog, SyncOptions, sync_pipeline, sync_table};
use lakestream_formats::config::CatalogForm;
use lakestream_testkit::records::{ORDER_TIME, Order};
use lakestream_testkit::{TestLake, backends};

/// Orders in `hours` distinct processing hours of raw/order (one commit per hour).
async fn lake_with_orders(
    backend: lakestream_testkit::Backend,
    hours: u32,
) -> anyhow::Result<TestLake> {
    let mut t = TestLake::new(backend, "catalog")?;
    t.config.catalog.manifest = vec!["raw/*".into()];
    for h in 0..hours {
        let clock = std::sync::Arc::new(lakestream_core::FixedClock::new(
            chrono::DateTime::from_timestamp(1_764_400_000 + i64::from(h) * 3600, 0)
                .unwrap_or_default(),
        ));
        let ing = lakestream_core::KafkaIngestor::new(t.config.clone(), clock)?;
        let order = Order {
            id: i64::from(h),
            owner: "a",
            value: 1,
            timestamp: &format!("\"{ORDER_TIME}\""),
        };
        ing.ingest(&[order.record(0, i64::from(h), 1)]).await?;
    }
    Ok(t)
}

/// Sync raw/order as `db.raw_order`.
async fn sync_order(
    catalog: &MemoryCatalog,
    lake: &lakestream_core::Lake,
    form: CatalogForm,
    max_partitions: usize,
) -> lakestream_catalog::Result<lakestream_catalog::TableSync> {
    sync_table(
        catalog,
        lake,
        "db",
        "raw/order",
        "raw_order",
        form,
        &opts(max_partitions),
    )
    .await
}

fn opts(max_partitions: usize) -> SyncOptions {
    SyncOptions {
        dry_run: false,
        write_manifests: true,
        max_partitions,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_the_pipeline_then_changes_nothing() -> anyhow::Result<()> {
    for backend in backends() {
        let t = lake_with_orders(backend, 3).await?;
        let lake = t.lake()?;
        let catalog = MemoryCatalog::default();
        let dry = SyncOptions {
            dry_run: true,
            ..opts(1000)
        };
        let planned = sync_pipeline(&catalog, &lake, &t.config, "lake_db", &dry).await?;
        assert!(planned.database_created);
        assert!(
            catalog.calls().is_empty(),
            "a dry run called {:?}",
            catalog.calls()
        );
        let report = sync_pipeline(&catalog, &lake, &t.config, "lake_db", &opts(1000)).await?;
        assert_eq!(report.failures(), None);
        let synced = |table: &str| {
            report
                .tables
                .iter()
                .find(|o| o.table == table)
                .and_then(|o| match &o.result {
                    Outcome::Synced(s) => Some(s.clone()),
                    Outcome::Failed { .. } => None,
                })
        };
        let order = synced("raw/order").expect("raw/order synced");
        assert_eq!(
            (order.action, order.form),
            (Action::Created, CatalogForm::Manifest)
        );
        assert_eq!((order.partitions, order.partitions_added), (3, 3));
        // Never written: nothing to register.
        assert_eq!(
            synced("raw/member").map(|s| s.action),
            Some(Action::Skipped)
        );
        let stored = catalog.table("lake_db", "raw_order").expect("raw_order");
        let keys: Vec<&str> = stored
            .partition_keys
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(keys, ["year", "month", "day", "hour"]);
        assert!(
            stored
                .columns
                .iter()
                .any(|c| c.name == "order_value" && c.type_name == "int"),
            "{:?}",
            stored.columns
        );
        let hours: Vec<String> = catalog
            .partitions("lake_db", "raw_order")
            .into_iter()
            .map(|p| p.values[3].clone())
            .collect();
        assert_eq!(hours.len(), 3, "{hours:?}");
        // Each partition points at a manifest the sync wrote.
        if let Some(dir) = t.table_dir("raw/order") {
            for p in catalog.partitions("lake_db", "raw_order") {
                let rel = p.location.split("/raw/order/").nth(1).unwrap_or_default();
                assert!(dir.join(rel).join("manifest").is_file(), "{}", p.location);
            }
        }
        let calls = catalog.calls().len();
        let again = sync_pipeline(&catalog, &lake, &t.config, "lake_db", &opts(1000)).await?;
        assert_eq!(again.failures(), None);
        assert_eq!(
            catalog.calls().len(),
            calls,
            "a second sync called {:?}",
            &catalog.calls()[calls..]
        );
        assert!(!again.database_created);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_beyond_the_bound_follow_on_the_next_runs() -> anyhow::Result<()> {
    let t = lake_with_orders(lakestream_testkit::Backend::Fs, 5).await?;
    let lake = t.lake()?;
    let catalog = MemoryCatalog::default();
    let mut pending = Vec::new();
    for _ in 0..3 {
        let s = sync_order(&catalog, &lake, CatalogForm::Manifest, 2).await?;
        pending.push((s.partitions_added, s.partitions_pending));
    }
    assert_eq!(pending, [(2, 3), (2, 1), (1, 0)]);
    assert_eq!(catalog.partitions("db", "raw_order").len(), 5);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_table_is_left_alone_and_a_hand_made_one_at_the_location_adopted()
-> anyhow::Result<()> {
    let t = lake_with_orders(lakestream_testkit::Backend::Fs, 1).await?;
    let lake = t.lake()?;
    let catalog = MemoryCatalog::default();
    sync_order(&catalog, &lake, CatalogForm::Delta, 10).await?;
    let mut foreign = catalog.table("db", "raw_order").expect("table");
    foreign.parameters.clear();
    foreign.location = "s3://someone-else/orders/".into();
    foreign.columns.truncate(1);
    catalog.put_table("db", foreign.clone());
    let err = sync_order(&catalog, &lake, CatalogForm::Delta, 10)
        .await
        .expect_err("foreign");
    assert!(
        matches!(err, Error::Foreign { .. }) && err.to_string().contains("[catalog.names]"),
        "{err}"
    );
    assert_eq!(
        catalog.table("db", "raw_order"),
        Some(foreign.clone()),
        "changed a foreign table"
    );
    // Registered by hand (the DDL pasted into Athena): same location, no Lakestream parameter.
    let mut by_hand = foreign;
    by_hand.location = lakestream_catalog::model::catalog_location(&lake.table_url("raw/order")?);
    by_hand.parameters.insert("comment".into(), "mine".into());
    catalog.put_table("db", by_hand);
    let s = sync_order(&catalog, &lake, CatalogForm::Delta, 10).await?;
    assert_eq!(s.action, Action::Updated, "{s:?}");
    let adopted = catalog.table("db", "raw_order").expect("table");
    assert_eq!(adopted.owner(), Some("raw/order"));
    assert_eq!(
        adopted.parameters.get("comment").map(String::as_str),
        Some("mine")
    );
    assert!(adopted.columns.len() > 1);
    Ok(())
}

/// Issue 38 (12): a new table whose catalog name collides with one already registered (a table
/// name differing only in case) fails alone; the table that owns the name keeps syncing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collision_never_freezes_the_table_that_owns_the_name() -> anyhow::Result<()> {
    let mut t = lake_with_orders(lakestream_testkit::Backend::Fs, 1).await?;
    let lake = t.lake()?;
    let catalog = MemoryCatalog::default();
    let first = sync_pipeline(&catalog, &lake, &t.config, "db", &opts(1000)).await?;
    assert_eq!(first.failures(), None);
    let mut twin = t.config.topics[0].clone();
    assert_eq!(twin.table, "raw/order");
    twin.topic = "orders-twin".into();
    twin.table = "Raw/Order".into();
    t.config.topics.push(twin);
    let report = sync_pipeline(&catalog, &lake, &t.config, "db", &opts(1000)).await?;
    let outcome = |table: &str| {
        report
            .tables
            .iter()
            .find(|o| o.table == table)
            .map(|o| o.result.clone())
    };
    assert!(
        matches!(outcome("raw/order"), Some(Outcome::Synced(_))),
        "{:?}",
        outcome("raw/order")
    );
    match outcome("Raw/Order") {
        Some(Outcome::Failed { error, .. }) => {
            assert!(
                error.contains("both have the catalog name `raw_order`"),
                "{error}"
            )
        }
        other => panic!("the newcomer was not refused: {other:?}"),
    }
    Ok(())
}
