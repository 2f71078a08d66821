//! Re-driving failed Kafka batches (the on-failure destination's copy) after the partition's
//! `txn` moved past them: every record lands exactly once, on every backend.

use anyhow::{Context, Result};
use lakestream_core::{Redrive, RedriveReport};
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::records::{self, Order, partition_offsets as expected};
use lakestream_testkit::{TestLake, assert_accounted, backends, offsets};

/// 2026-11-30T21:13:04.835Z, the event and Kafka time of every record here.
const TIME: (&str, i64) = ("2026-11-30T21:13:04.835Z", 1_764_537_184_835);

fn order(partition: i32, offset: i64) -> SourceRecord {
    Order {
        id: offset % 1000,
        owner: &format!("o{partition}"),
        value: offset,
        timestamp: &format!("\"{}\"", TIME.0),
    }
    .record(partition, offset, TIME.1)
}

fn orders(partition: i32, offsets: std::ops::Range<i64>) -> Vec<SourceRecord> {
    offsets.map(|o| order(partition, o)).collect()
}

fn member(partition: i32, offset: i64) -> SourceRecord {
    records::member(
        partition,
        offset,
        &format!("m{offset}"),
        "gold",
        TIME.0,
        TIME.1,
    )
}

/// `r` accounts for the `sent` records (the test's count of the batch it redrove): each
/// written, dead-lettered or a duplicate; those not found in their table went through the
/// ingest path and are accounted there.
fn accounted(sent: usize, r: &RedriveReport) {
    assert_eq!(
        sent,
        r.written + r.dead_lettered + r.duplicates,
        "records sent = written + dead-lettered + duplicates: {r:?}"
    );
    assert_eq!(sent, r.received, "records sent = records received: {r:?}");
    assert_accounted(sent - r.found_in_table, &r.redriven);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_behind_the_watermark_lands_once_and_only_once() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "redrive")?;
        let ing = lake.ingestor()?;
        // Partition 0: batch 100..105 failed every retry and went to the on-failure bucket; the
        // next batch 105..110 landed, so the partition's txn (109) is past the failed one.
        let failed0 = orders(0, 100..105);
        // Partition 1: batch 200..205 landed, then its invocation failed on the way back (the
        // commit is in the log, Lambda saw an error); 205..210 landed after it.
        let failed1 = orders(1, 200..205);
        // Partition 2: batch 300..305 failed and nothing came after it.
        let failed2 = orders(2, 300..305);
        assert_eq!(ing.ingest(&failed1).await?.written, 5);
        for later in [orders(0, 105..110), orders(1, 205..210)] {
            assert_eq!(ing.ingest(&later).await?.written, 5, "{b:?}");
        }
        // The normal path cannot put the failed batch back: the txn says "committed".
        let normal = ing.ingest(&failed0).await?;
        assert_eq!((normal.written, normal.duplicates), (0, 5), "{b:?}");

        let mut batch = failed0.clone();
        batch.extend(failed1.iter().cloned());
        batch.extend(failed2.iter().cloned());
        let first = ing
            .redrive(Redrive {
                records: &batch,
                id: "req-1",
                allow_duplicates: false,
            })
            .await?;
        accounted(batch.len(), &first);
        assert_eq!(
            first.written, 10,
            "{b:?}: partitions 0 and 2 written: {first:?}"
        );
        assert_eq!(first.found_in_table, 5, "{b:?}: partition 1 had landed");
        assert_eq!(first.redriven.written, 10, "{b:?}: under the redrive's txn");

        // Re-driving the same object again (the operator re-runs the command) writes nothing.
        let again = ing
            .redrive(Redrive {
                records: &batch,
                id: "req-1",
                allow_duplicates: false,
            })
            .await?;
        accounted(batch.len(), &again);
        assert_eq!(
            (again.written, again.duplicates),
            (0, 15),
            "{b:?}: {again:?}"
        );
        // Partition 2's next batch lands; Kafka re-delivering the redriven offsets after it
        // (a consumer-group reset) is a no-op: the partition's txn covers them.
        assert_eq!(ing.ingest(&orders(2, 305..307)).await?.written, 2, "{b:?}");
        let replay = ing.ingest(&failed2).await?;
        assert_eq!((replay.written, replay.duplicates), (0, 5), "{b:?}");

        let got = offsets(&lake.read("raw/order").await?)?;
        assert_eq!(
            got,
            expected(&[(0, 100..110), (1, 200..210), (2, 300..307)]),
            "{b:?}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_redrives_of_one_batch_at_once_with_appends_running_write_it_once() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "redrive-race")?;
        let setup = lake.ingestor()?;
        let failed = orders(0, 0..20);
        assert_eq!(setup.ingest(&orders(0, 20..25)).await?.written, 5);
        // Two operators (two containers) re-drive the same object while partition 1 keeps
        // appending; each task has its own ingestor, like separate processes.
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let ing = lake.ingestor()?;
            let batch = failed.clone();
            tasks.push(tokio::spawn(async move {
                ing.redrive(Redrive {
                    records: &batch,
                    id: "req-7",
                    allow_duplicates: false,
                })
                .await
            }));
        }
        let appender = {
            let ing = lake.ingestor()?;
            tokio::spawn(async move {
                let mut written = 0;
                for c in 0..6 {
                    written += ing.ingest(&orders(1, c * 5..c * 5 + 5)).await?.written;
                }
                Ok::<_, lakestream_core::Error>(written)
            })
        };
        let mut written = 0;
        for t in tasks {
            let r = t.await??;
            accounted(failed.len(), &r);
            written += r.written;
        }
        assert_eq!(appender.await??, 30, "{b:?}");
        assert_eq!(
            written, 20,
            "{b:?}: the two redrives wrote the batch once between them"
        );
        let got = offsets(&lake.read("raw/order").await?)?;
        assert_eq!(
            got,
            expected(&[(0, 0..25), (1, 0..30)]),
            "{b:?}: every row exactly once"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_without_offset_columns_is_refused_unless_duplicates_are_accepted() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "redrive-members")?;
        let ing = lake.ingestor()?;
        // raw/member has no kafka_metadata columns in the example pipeline.
        let failed: Vec<SourceRecord> = (0..3).map(|o| member(0, o)).collect();
        let later: Vec<SourceRecord> = (3..6).map(|o| member(0, o)).collect();
        assert_eq!(ing.ingest(&later).await?.written, 3);
        let err = ing
            .redrive(Redrive {
                records: &failed,
                id: "req-9",
                allow_duplicates: false,
            })
            .await
            .expect_err("cannot be checked");
        let msg = err.to_string();
        assert!(
            msg.contains("table `raw/member`") && msg.contains("--allow-duplicates"),
            "{msg}"
        );
        assert_eq!(
            lake.read("raw/member").await?.num_rows(),
            3,
            "{b:?}: nothing written"
        );
        let r = ing
            .redrive(Redrive {
                records: &failed,
                id: "req-9",
                allow_duplicates: true,
            })
            .await?;
        accounted(failed.len(), &r);
        assert_eq!(r.written, 3, "{b:?}");
        assert_eq!(lake.read("raw/member").await?.num_rows(), 6, "{b:?}");
        // Its own txn still makes the redrive itself idempotent.
        let again = ing
            .redrive(Redrive {
                records: &failed,
                id: "req-9",
                allow_duplicates: true,
            })
            .await?;
        assert_eq!((again.written, again.duplicates), (0, 3), "{b:?}");
        assert!(
            ing.redrive(Redrive {
                records: &failed,
                id: "../x",
                allow_duplicates: true
            })
            .await
            .is_err(),
            "ids are checked"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_of_a_failed_batch_are_dead_lettered_once() -> Result<()> {
    for b in backends() {
        let lake = TestLake::new(b, "redrive-bad")?;
        let ing = lake.ingestor()?;
        let mut failed = orders(0, 0..3);
        failed.push(SourceRecord::new("orders", 0, 3, 0, b"{not json"));
        // The failed invocation had dead-lettered its bad record before the data commit failed.
        assert_eq!(
            ing.dead_letter_batch(&failed[3..], "decode")
                .await?
                .dead_lettered,
            1
        );
        assert_eq!(ing.ingest(&orders(0, 4..6)).await?.written, 2);
        let r = ing
            .redrive(Redrive {
                records: &failed,
                id: "req-3",
                allow_duplicates: false,
            })
            .await?;
        accounted(failed.len(), &r);
        // The letter is found in place (a duplicate), not written again.
        assert_eq!(
            (r.written, r.dead_lettered, r.duplicates),
            (3, 0, 1),
            "{b:?}: {r:?}"
        );
        assert_eq!(
            lake.read("dead_letters").await?.num_rows(),
            1,
            "{b:?}: not twice"
        );
        assert_eq!(
            offsets(&lake.read("raw/order").await?)?,
            expected(&[(0, 0..3), (0, 4..6)]),
            "{b:?}"
        );
    }
    Ok(())
}

const TWO_TOPICS: &str = r#"
[[topics]]
topic = "orders-us"
table = "raw/multi"
schema_mode = "enforce"
kafka_metadata = ["topic", "partition", "offset"]
columns = [
  { name = "order_id", type = "int32", nullable = false },
  { name = "order_owner", type = "string", nullable = false },
]

[[topics]]
topic = "orders-eu"
table = "raw/multi"
schema_mode = "enforce"
kafka_metadata = ["topic", "partition", "offset"]
columns = [
  { name = "order_id", type = "int32", nullable = false },
  { name = "order_owner", type = "string", nullable = false },
]
"#;

fn multi(topic: &str, partition: i32, offset: i64) -> SourceRecord {
    let json = format!(r#"{{"order_id":{offset},"order_owner":"{topic}"}}"#);
    SourceRecord::new(topic, partition, offset, TIME.1, json.as_bytes())
}

/// (topic, partition, offset) of every row of `raw/multi`, sorted.
async fn multi_rows(lake: &TestLake) -> Result<Vec<(String, i32, i64)>> {
    use deltalake::arrow::array::AsArray;
    use deltalake::arrow::datatypes::{Int32Type, Int64Type};
    let b = lake.read("raw/multi").await?;
    let topics = lakestream_testkit::strings(&b, "kafka_topic")?;
    let p = b
        .column_by_name("kafka_partition")
        .context("kafka_partition")?
        .as_primitive::<Int32Type>();
    let o = b
        .column_by_name("kafka_offset")
        .context("kafka_offset")?
        .as_primitive::<Int64Type>();
    let mut v: Vec<(String, i32, i64)> = topics
        .into_iter()
        .enumerate()
        .map(|(i, t)| (t.unwrap_or_default(), p.value(i), o.value(i)))
        .collect();
    v.sort();
    Ok(v)
}

/// Two topics write one table with the same partitions and offsets: a record of one topic is
/// only "found" by a row of that topic, whatever order the batch lists them in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_topics_into_one_table_are_told_apart_by_topic() -> Result<()> {
    for b in backends() {
        let mut lake = TestLake::new(b, "redrive-topics")?;
        let mut cfg = lakestream_formats::config::PipelineConfig::from_toml(&format!(
            "{}\n{TWO_TOPICS}",
            lakestream_testkit::EXAMPLE
        ))?;
        cfg.lake = lake.config.lake.clone();
        cfg.commit = lake.config.commit.clone();
        lake.config = cfg;
        let ing = lake.ingestor()?;
        // Topic us's records landed (a bisected retry); eu's never did. Both topics' partition
        // 0 moved past the batch.
        let us: Vec<SourceRecord> = (0..5).map(|o| multi("orders-us", 0, o)).collect();
        let eu: Vec<SourceRecord> = (0..5).map(|o| multi("orders-eu", 0, o)).collect();
        assert_eq!(ing.ingest(&us).await?.written, 5);
        let later: Vec<SourceRecord> = (5..7)
            .flat_map(|o| [multi("orders-us", 0, o), multi("orders-eu", 0, o)])
            .collect();
        assert_eq!(ing.ingest(&later).await?.written, 4);

        // A batch of topic eu alone: us's rows at those offsets are not eu's.
        let only_eu = ing
            .redrive(Redrive {
                records: &eu[..2],
                id: "req-eu",
                allow_duplicates: false,
            })
            .await?;
        accounted(2, &only_eu);
        assert_eq!(
            (only_eu.written, only_eu.found_in_table),
            (2, 0),
            "{b:?}: {only_eu:?}"
        );
        // The failed batch as Lambda kept it: both topics, eu listed first.
        let mut batch = eu.clone();
        batch.extend(us.iter().cloned());
        let r = ing
            .redrive(Redrive {
                records: &batch,
                id: "req-both",
                allow_duplicates: false,
            })
            .await?;
        accounted(batch.len(), &r);
        assert_eq!(
            (r.written, r.found_in_table),
            (3, 7),
            "{b:?}: eu 2..5 written; us 0..5 and eu 0..2 found: {r:?}"
        );
        let mut want: Vec<(String, i32, i64)> = (0..7)
            .flat_map(|o| {
                [
                    ("orders-eu".to_string(), 0, o),
                    ("orders-us".to_string(), 0, o),
                ]
            })
            .collect();
        want.sort();
        assert_eq!(multi_rows(&lake).await?, want, "{b:?}: every record once");
    }
    Ok(())
}

/// A table written by another tool, whose Kafka metadata columns have other types than ours.
struct Foreign(deltalake::arrow::record_batch::RecordBatch);

impl lakestream_core::commit::Planner for Foreign {
    fn app_ids(&self) -> Vec<String> {
        vec![]
    }
    async fn plan(
        &mut self,
        _: &lakestream_core::commit::TableState,
    ) -> lakestream_core::Result<Option<lakestream_core::commit::Planned>> {
        Ok(Some(lakestream_core::commit::Planned {
            batch: self.0.clone(),
            schema: self.0.schema(),
            partition_columns: vec![],
            txns: vec![],
            set_properties: vec![],
            table_properties: vec![],
            commit_if_empty: false,
        }))
    }
}

/// `raw/order` with rows of partition 0, offsets 0..3, `kafka_partition` of type `partition`.
async fn foreign_orders(
    lake: &TestLake,
    partition: deltalake::arrow::array::ArrayRef,
) -> Result<()> {
    use deltalake::arrow::array::{
        ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
    };
    use std::sync::Arc;
    let ts = TimestampMicrosecondArray::from(vec![1_764_537_184_835_000; 3]).with_timezone("UTC");
    let batch = deltalake::arrow::record_batch::RecordBatch::try_from_iter([
        (
            "order_id",
            Arc::new(Int32Array::from(vec![0, 1, 2])) as ArrayRef,
        ),
        (
            "order_owner",
            Arc::new(StringArray::from(vec!["o0"; 3])) as ArrayRef,
        ),
        (
            "order_value",
            Arc::new(Int32Array::from(vec![0, 1, 2])) as ArrayRef,
        ),
        ("timestamp", Arc::new(ts) as ArrayRef),
        ("kafka_partition", partition),
        (
            "kafka_offset",
            Arc::new(Int64Array::from(vec![0, 1, 2])) as ArrayRef,
        ),
    ])?;
    let l = lakestream_core::Lake::new(&lake.config.lake)?;
    let mut h = lakestream_core::table::TableHandle::open(&l, "raw/order")?;
    let settings: lakestream_core::commit::CommitSettings = (&lake.config.commit).into();
    let out = lakestream_core::commit::append(&l, &mut h, &settings, &mut Foreign(batch)).await?;
    assert!(out.version.is_some());
    Ok(())
}

/// Another writer's `kafka_partition` as a 64-bit integer is compared as a number; as text it
/// is a clear error, never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_metadata_columns_of_other_types_never_panic() -> Result<()> {
    use deltalake::arrow::array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;
    for b in backends() {
        let lake = TestLake::new(b, "redrive-types")?;
        foreign_orders(&lake, Arc::new(Int64Array::from(vec![0i64; 3])) as ArrayRef).await?;
        let ing = lake.ingestor()?;
        let r = ing
            .redrive(Redrive {
                records: &orders(0, 0..3),
                id: "req-wide",
                allow_duplicates: false,
            })
            .await?;
        accounted(3, &r);
        assert_eq!((r.written, r.found_in_table), (0, 3), "{b:?}: {r:?}");

        let lake = TestLake::new(b, "redrive-types-text")?;
        foreign_orders(&lake, Arc::new(StringArray::from(vec!["0"; 3])) as ArrayRef).await?;
        let err = lake
            .ingestor()?
            .redrive(Redrive {
                records: &orders(0, 0..3),
                id: "req-text",
                allow_duplicates: false,
            })
            .await
            .expect_err("a text partition column cannot be compared");
        let msg = err.to_string();
        assert!(
            msg.contains("kafka_partition") && msg.contains("Utf8") && !err.is_retryable(),
            "{msg}"
        );
    }
    Ok(())
}
