//! A failed batch of a CDC family's Debezium topic: a redrive looks each record up in its bronze
//! table by `__topic` / `__partition` / `__offset`, so what landed before the batch failed is
//! not written twice, and the rest lands once; `lag` shows the topic's committed offsets.

use anyhow::Result;
use lakestream_core::Redrive;
use lakestream_formats::config::{PipelineConfig, bronze};
use lakestream_formats::record::{RecordValue, SourceRecord};
use lakestream_testkit::{TestLake, assert_accounted, backends, example_config_with, int64s};

const TOPIC: &str = "crm.public.customers";
const BRONZE: &str = "bronze/crm/public/customers";

fn config() -> Result<PipelineConfig> {
    Ok(example_config_with(
        "[[cdc]]\nfamily = \"crm\"\nsource = \"debezium\"\ntopics = [\"crm.public.*\"]\n",
    )?)
}

fn rec(offset: i64, key: &[u8], value: Option<&[u8]>) -> SourceRecord {
    let mut r = SourceRecord::new(TOPIC, 0, offset, 1_764_412_400_000, value.unwrap_or(b""));
    if value.is_none() {
        r.value = RecordValue::Null;
    }
    r.with_key(key)
}

/// Snapshot, insert, update, delete and its tombstone (offsets 10..=14).
fn failed_batch() -> Vec<SourceRecord> {
    let k1004 = include_bytes!("../../../../tests/fixtures/debezium/pg_customers_1004.key.json");
    let k1005 = include_bytes!("../../../../tests/fixtures/debezium/pg_customers_1005.key.json");
    let fx = |n: &str| -> &'static [u8] {
        match n {
            "r" => include_bytes!("../../../../tests/fixtures/debezium/pg_customers_r.json"),
            "c" => include_bytes!("../../../../tests/fixtures/debezium/pg_customers_c.json"),
            "u" => include_bytes!("../../../../tests/fixtures/debezium/pg_customers_u.json"),
            _ => include_bytes!("../../../../tests/fixtures/debezium/pg_customers_d.json"),
        }
    };
    vec![
        rec(10, k1004, Some(fx("r"))),
        rec(11, k1005, Some(fx("c"))),
        rec(12, k1004, Some(fx("u"))),
        rec(13, k1005, Some(fx("d"))),
        rec(14, k1005, None),
    ]
}

async fn offsets(lake: &TestLake) -> Result<Vec<i64>> {
    let b = lake.read(BRONZE).await?;
    let mut o: Vec<i64> = int64s(&b, bronze::OFFSET)?.into_iter().flatten().collect();
    o.sort();
    Ok(o)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_debezium_batch_lands_once_in_bronze() -> Result<()> {
    for b in backends() {
        let lake = TestLake::with_config(b, "cdc-redrive", config()?)?;
        let ing = lake.ingestor()?;
        let batch = failed_batch();
        // The batch landed its first three records before it failed; the partition moved on.
        ing.ingest(&batch[..3]).await?;
        let insert = include_bytes!("../../../../tests/fixtures/debezium/pg_customers_c.json");
        let later = rec(20, b"{\"id\":1005}", Some(insert));
        ing.ingest(&[later]).await?;
        let r = ing
            .redrive(Redrive {
                records: &batch,
                id: "req-1",
                allow_duplicates: false,
            })
            .await?;
        assert_eq!(
            (r.found_in_table, r.written, r.tombstones_skipped),
            (3, 1, 1),
            "{b:?}: {r:?}"
        );
        assert_accounted(batch.len() - 3, &r.redriven);
        assert_eq!(offsets(&lake).await?, [10, 11, 12, 13, 20], "{b:?}");
        // Again: everything is found.
        let again = ing
            .redrive(Redrive {
                records: &batch,
                id: "req-1",
                allow_duplicates: false,
            })
            .await?;
        assert_eq!((again.found_in_table, again.written), (4, 0), "{b:?}");
        assert_eq!(offsets(&lake).await?, [10, 11, 12, 13, 20], "{b:?}");
        // `lag` lists the family topic with the offset its bronze committed.
        let l = lakestream_core::Lake::new(&lake.config.lake)?;
        let lag = lakestream_core::inspect::lag(&l, &lake.config, chrono::Utc::now()).await?;
        let row = lag.kafka.iter().find(|k| k.topic == TOPIC);
        let row = row.ok_or_else(|| anyhow::anyhow!("no lag row for {TOPIC}: {lag:?}"))?;
        assert_eq!(row.table, BRONZE);
        assert_eq!(row.partitions.get(&0), Some(&20), "{b:?}: {row:?}");
    }
    Ok(())
}
