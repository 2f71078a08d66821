//! Merge-mode field names against Delta's case-insensitive column names (issue 23, defect 4):
//! a field that differs from a column only in case is that column, two new fields of one batch
//! that differ only in case become one column, names Spark cannot write without column mapping
//! are refused per record, and a redrive of such a batch works — on every backend.

use anyhow::{Context, Result};
use lakestream_core::Redrive;
use lakestream_formats::config::KafkaMetadataColumn;
use lakestream_formats::record::SourceRecord;
use lakestream_testkit::{TestLake, assert_accounted, backends, offsets, strings};

/// A member record (merge mode) with the table's offset columns, so a redrive can check it.
fn m(offset: i64, fields: &str) -> SourceRecord {
    let json = format!(r#"{{"timestamp":"2026-11-30T21:13:04.835Z",{fields}}}"#);
    SourceRecord::new("members", 0, offset, 1_764_537_184_835, json.as_bytes())
}

fn lake_with_offsets(backend: lakestream_testkit::Backend, name: &str) -> Result<TestLake> {
    let mut lake = TestLake::new(backend, name)?;
    let members = lake
        .config
        .topics
        .iter_mut()
        .find(|t| t.topic == "members")
        .context("members topic")?;
    members.kafka_metadata = vec![KafkaMetadataColumn::Partition, KafkaMetadataColumn::Offset];
    Ok(lake)
}

/// Column names of a table, lower-cased and sorted (Delta compares names case-insensitively).
async fn columns(lake: &TestLake, table: &str) -> Result<Vec<String>> {
    let batch = lake.read(table).await?;
    let mut names: Vec<String> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().to_lowercase())
        .collect();
    names.sort();
    Ok(names)
}

/// `(order_owner, column)` pairs of the table, sorted.
async fn values(lake: &TestLake, column: &str) -> Result<Vec<(String, Option<String>)>> {
    let batch = lake.read("raw/member").await?;
    let owners = strings(&batch, "order_owner")?;
    let vals = strings(&batch, column)?;
    let mut out: Vec<(String, Option<String>)> = owners
        .into_iter()
        .zip(vals)
        .map(|(o, v)| (o.unwrap_or_default(), v))
        .collect();
    out.sort();
    Ok(out)
}

/// Dead-letter `(offset, error)` pairs, by offset.
async fn letters(lake: &TestLake) -> Result<Vec<(i64, String)>> {
    let dl = lake.read("dead_letters").await?;
    let mut out: Vec<(i64, String)> = strings(&dl, "offset")?
        .into_iter()
        .zip(strings(&dl, "error")?)
        .map(|(o, e)| {
            (
                o.and_then(|o| o.parse().ok()).unwrap_or(-1),
                e.unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_differing_from_columns_only_in_case_map_to_them() -> Result<()> {
    for b in backends() {
        let lake = lake_with_offsets(b, "case")?;
        let ing = lake.ingestor()?;
        let first = ing
            .ingest(&[m(0, r#""order_owner":"alice","membership":"gold""#)])
            .await?;
        assert_eq!(first.written, 1, "{b:?}");
        let batch = [
            // `Membership` is the column `membership`.
            m(1, r#""order_owner":"bob","Membership":"silver""#),
            m(2, r#""order_owner":"carol","membership":"bronze""#),
            // Both spellings in one record: which value is meant is unknowable.
            m(
                3,
                r#""order_owner":"dave","membership":"x","MEMBERSHIP":"y""#,
            ),
            // Two new fields of one batch that differ only in case: one column.
            m(4, r#""order_owner":"erin","Tier":"a""#),
            m(5, r#""order_owner":"fred","tier":"b""#),
            // Names Spark cannot write without column mapping.
            m(6, r#""order_owner":"gus","bad name":1"#),
            m(7, r#""order_owner":"hal","x=y":1"#),
            m(8, r#""order_owner":"ida","a;b":true"#),
        ];
        let r = ing.ingest(&batch).await?;
        assert_accounted(batch.len(), &r);
        assert_eq!(
            (r.written, r.dead_lettered),
            (4, 4),
            "{b:?}: the valid records are written, the bad ones dead-lettered: {r:?}"
        );
        assert_eq!(
            columns(&lake, "raw/member").await?,
            [
                "kafka_offset",
                "kafka_partition",
                "membership",
                "order_owner",
                "tier",
                "timestamp"
            ],
            "{b:?}: no second `membership`, one `tier`"
        );
        assert_eq!(
            values(&lake, "membership").await?,
            [
                ("alice".to_string(), Some("gold".to_string())),
                ("bob".into(), Some("silver".into())),
                ("carol".into(), Some("bronze".into())),
                ("erin".into(), None),
                ("fred".into(), None),
            ],
            "{b:?}"
        );
        let tier = lake
            .read("raw/member")
            .await?
            .schema()
            .fields()
            .iter()
            .find(|f| f.name().eq_ignore_ascii_case("tier"))
            .map(|f| f.name().clone())
            .context("tier column")?;
        let tiers: Vec<Option<String>> = values(&lake, &tier)
            .await?
            .into_iter()
            .filter(|(o, _)| o == "erin" || o == "fred")
            .map(|(_, v)| v)
            .collect();
        assert_eq!(tiers, [Some("a".into()), Some("b".into())], "{b:?}");
        let dl = letters(&lake).await?;
        let offsets_dl: Vec<i64> = dl.iter().map(|l| l.0).collect();
        assert_eq!(offsets_dl, [3, 6, 7, 8], "{b:?}: {dl:?}");
        assert!(
            dl[0].1.contains("differ only in case"),
            "{b:?}: {:?}",
            dl[0].1
        );
        for (_, e) in &dl[1..] {
            assert!(e.contains("column mapping"), "{b:?}: {e}");
        }
        // A redelivery is a no-op.
        let again = ing.ingest(&batch).await?;
        assert_accounted(batch.len(), &again);
        assert_eq!(again.written, 0, "{b:?}: {again:?}");
        assert_eq!(letters(&lake).await?, dl, "{b:?}: no letter twice");

        // The same kind of batch, failed earlier and redriven after the partition moved on.
        let failed = [
            m(20, r#""order_owner":"jo","MemberShip":"gold""#),
            m(21, r#""order_owner":"kim","TIER":"c","Extra":1"#),
            m(22, r#""order_owner":"lu","extra":2"#),
        ];
        assert_eq!(
            ing.ingest(&[m(30, r#""order_owner":"max""#)])
                .await?
                .written,
            1
        );
        let rd = ing
            .redrive(Redrive {
                records: &failed,
                id: "req-case",
                allow_duplicates: false,
            })
            .await?;
        assert_eq!((rd.written, rd.dead_lettered), (3, 0), "{b:?}: {rd:?}");
        assert_eq!(
            columns(&lake, "raw/member").await?,
            [
                "extra",
                "kafka_offset",
                "kafka_partition",
                "membership",
                "order_owner",
                "tier",
                "timestamp"
            ],
            "{b:?}"
        );
        let memberships = values(&lake, "membership").await?;
        assert!(
            memberships.contains(&("jo".to_string(), Some("gold".to_string()))),
            "{b:?}: {memberships:?}"
        );
        let got = offsets(&lake.read("raw/member").await?)?;
        let want: Vec<(i32, i64)> = [0, 1, 2, 4, 5, 20, 21, 22, 30]
            .into_iter()
            .map(|o| (0, o))
            .collect();
        assert_eq!(got, want, "{b:?}");
    }
    Ok(())
}
