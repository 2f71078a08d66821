//! Hostile configs (issue 24, defects 3 and 4): tables inside other tables, two writers of one
//! table, outputs inside the access-log or `_lakestream/` directories. Each must be refused
//! with an error naming both keys.

use super::PipelineConfig;

fn topic(name: &str, table: &str) -> String {
    format!(
        "[[topics]]\ntopic = \"{name}\"\ntable = \"{table}\"\ncolumns = [{{ name = \"x\", type = \"int32\" }}]\n"
    )
}

fn join(job: &str, output: &str) -> String {
    format!(
        "[[refine]]\njob = \"{job}\"\noutput = \"{output}\"\n[refine.join]\nupper = \"1h\"\n\
         left = {{ table = \"raw/order\", key = \"k\", time = \"t\", delay = \"3h\", columns = [\"a\"] }}\n\
         right = {{ table = \"raw/member\", key = \"k\", time = \"t\", delay = \"2h\", columns = [\"b\"] }}\n"
    )
}

fn upsert(job: &str, output: &str, op: bool) -> String {
    format!(
        "[[refine]]\njob = \"{job}\"\noutput = \"{output}\"\n[refine.upsert]\nsource = \"raw/cdc\"\n\
         key = [\"k\"]\norder_by = [\"t\"]\n{}",
        if op { "op = { column = \"op\" }\n" } else { "" }
    )
}

/// The error of a config with `head` (top-level keys and sections) before `[lake]` and `body`
/// (topics, refine jobs) after it, or "parsed".
fn err_of(head: &str, body: &str) -> String {
    let text = format!("pipeline = \"p\"\n{head}\n[lake]\nroot = \"/tmp/l\"\n{body}");
    match PipelineConfig::from_toml(&text) {
        Ok(_) => "parsed".into(),
        Err(e) => e.to_string(),
    }
}

/// `e` names every one of `keys` (as `` `key` ``).
fn names(e: &str, keys: &[&str]) -> bool {
    keys.iter().all(|k| e.contains(&format!("`{k}`")))
}

#[test]
fn a_table_inside_another_is_refused() {
    // The case: vacuuming `raw` would delete `raw/order`'s log and data.
    let e = err_of(
        "",
        &format!("{}{}", topic("a", "raw"), topic("b", "raw/order")),
    );
    assert!(names(&e, &["topics[0].table", "topics[1].table"]), "{e}");
    assert!(e.contains("inside"), "{e}");
    // Either order.
    let e = err_of(
        "",
        &format!("{}{}", topic("b", "raw/order/eu"), topic("a", "raw")),
    );
    assert!(names(&e, &["topics[0].table", "topics[1].table"]), "{e}");
    // Segment-wise: `raw` is not a prefix of `rawx`.
    let ok = err_of(
        "",
        &format!("{}{}", topic("a", "raw"), topic("b", "rawx/order")),
    );
    assert_eq!(ok, "parsed");
    // The dead-letter table above a topic table, and below one.
    let e = err_of("dead_letter_table = \"raw\"", &topic("b", "raw/order"));
    assert!(names(&e, &["dead_letter_table", "topics[0].table"]), "{e}");
    let e = err_of(
        "dead_letter_table = \"raw/order/dl\"",
        &topic("b", "raw/order"),
    );
    assert!(names(&e, &["dead_letter_table", "topics[0].table"]), "{e}");
}

#[test]
fn names_differing_only_in_case_are_one_table() {
    let e = err_of(
        "",
        &format!("{}{}", topic("a", "Raw"), topic("b", "raw/order")),
    );
    assert!(names(&e, &["topics[0].table", "topics[1].table"]), "{e}");
    let e = err_of(
        "",
        &format!("{}{}", topic("a", "raw/Order"), topic("b", "raw/order")),
    );
    assert!(names(&e, &["topics[0].table", "topics[1].table"]), "{e}");
}

#[test]
fn reserved_and_hidden_segments_are_refused() {
    for table in [
        "raw/_delta_log",
        "_lakestream/x",
        "raw/_symlink_format_manifest",
        "raw/.hidden",
    ] {
        let e = err_of("", &topic("a", table));
        assert!(names(&e, &["topics[0].table"]), "{table}: {e}");
    }
    let e = err_of("", &join("j", "_lakestream/j/tombstones"));
    assert!(names(&e, &["refine[0].output"]), "{e}");
    let e = err_of("dead_letter_table = \"_lakestream\"", "");
    assert!(names(&e, &["dead_letter_table"]), "{e}");
}

#[test]
fn the_access_log_directory_holds_only_access_logs() {
    // Per-bucket layout: `access_logs/<bucket>` tables live under the prefix.
    let e = err_of("", &topic("a", "access_logs/raw-logs"));
    assert!(
        names(&e, &["access_logs.table_prefix", "topics[0].table"]),
        "{e}"
    );
    let e = err_of("", &join("j", "access_logs/curated"));
    assert!(
        names(&e, &["access_logs.table_prefix", "refine[0].output"]),
        "{e}"
    );
    // A table above the prefix.
    let e = err_of(
        "[access_logs]\ntable_prefix = \"logs/s3\"",
        &topic("a", "logs"),
    );
    assert!(
        names(&e, &["access_logs.table_prefix", "topics[0].table"]),
        "{e}"
    );
    // The single layout's table is the prefix itself: nothing inside or above it either.
    let single = "[access_logs]\ntable_prefix = \"logs\"\nlayout = \"single\"";
    let e = err_of(single, &topic("a", "logs/x"));
    assert!(
        names(&e, &["access_logs.table_prefix", "topics[0].table"]),
        "{e}"
    );
    // The prefix equal to the dead-letter table or to a topic table.
    let e = err_of(
        "dead_letter_table = \"dl\"\n[access_logs]\ntable_prefix = \"dl\"",
        "",
    );
    assert!(
        names(&e, &["access_logs.table_prefix", "dead_letter_table"]),
        "{e}"
    );
    let e = err_of(
        "[access_logs]\ntable_prefix = \"raw/order\"\nlayout = \"single\"",
        &topic("a", "raw/order"),
    );
    assert!(
        names(&e, &["access_logs.table_prefix", "topics[0].table"]),
        "{e}"
    );
    let e = err_of(
        "[access_logs]\ntable_prefix = \"raw\"",
        &topic("a", "raw/order"),
    );
    assert!(
        names(&e, &["access_logs.table_prefix", "topics[0].table"]),
        "{e}"
    );
}

#[test]
fn refine_outputs_collide_with_nothing() {
    // Two jobs writing one output.
    let e = err_of(
        "",
        &format!(
            "{}{}",
            join("a", "curated/order"),
            upsert("b", "curated/order", false)
        ),
    );
    assert!(names(&e, &["refine[0].output", "refine[1].output"]), "{e}");
    // One output inside another.
    let e = err_of(
        "",
        &format!(
            "{}{}",
            join("a", "curated"),
            upsert("b", "curated/order", false)
        ),
    );
    assert!(names(&e, &["refine[0].output", "refine[1].output"]), "{e}");
    // An output inside a topic table.
    let e = err_of(
        "",
        &format!("{}{}", topic("t", "raw/order"), join("a", "raw/order/x")),
    );
    assert!(names(&e, &["topics[0].table", "refine[0].output"]), "{e}");
    // An output above the dead-letter table.
    let e = err_of("dead_letter_table = \"silver/dl\"", &join("a", "silver"));
    assert!(names(&e, &["dead_letter_table", "refine[0].output"]), "{e}");
}

#[test]
fn tombstone_tables_are_derived_names_that_must_not_collide() {
    // A CDC upsert writes `_lakestream/<job>/tombstones`; the probe owns `_lakestream/probe/`.
    let e = err_of("", &upsert("probe", "silver/cdc", true));
    assert!(names(&e, &["refine[0].upsert.op"]), "{e}");
    assert!(e.contains("_lakestream/probe"), "{e}");
    // Without `op` no tombstone table is written: a job may be called `probe`.
    assert_eq!(err_of("", &upsert("probe", "silver/cdc", false)), "parsed");
    assert_eq!(err_of("", &upsert("cdc", "silver/cdc", true)), "parsed");
}

#[test]
fn two_topics_on_one_table_must_declare_the_same_shape() {
    let same = format!("{}{}", topic("us", "raw/multi"), topic("eu", "raw/multi"));
    assert_eq!(err_of("", &same), "parsed");
    let other_columns = same.replacen("type = \"int32\"", "type = \"int64\"", 1);
    let e = err_of("", &other_columns);
    assert!(
        names(&e, &["topics[0].columns", "topics[1].columns"]),
        "{e}"
    );
    let extra_column = format!(
        "{}{}",
        topic("us", "raw/multi"),
        topic("eu", "raw/multi").replace(
            "columns = [{ name = \"x\", type = \"int32\" }]",
            "columns = [{ name = \"x\", type = \"int32\" }, { name = \"y\", type = \"string\" }]"
        )
    );
    let e = err_of("", &extra_column);
    assert!(
        names(&e, &["topics[0].columns", "topics[1].columns"]),
        "{e}"
    );
    let parted = format!(
        "{}{}partition_by = \"processing_time\"\n",
        topic("us", "raw/multi"),
        topic("eu", "raw/multi")
    );
    let e = err_of("", &parted);
    assert!(
        names(&e, &["topics[0].partition_by", "topics[1].partition_by"]),
        "{e}"
    );
    let meta = format!(
        "{}{}kafka_metadata = [\"offset\"]\n",
        topic("us", "raw/multi"),
        topic("eu", "raw/multi")
    );
    let e = err_of("", &meta);
    assert!(
        names(
            &e,
            &["topics[0].kafka_metadata", "topics[1].kafka_metadata"]
        ),
        "{e}"
    );
    let merge = format!(
        "{}{}schema_mode = \"merge\"\n",
        topic("us", "raw/multi"),
        topic("eu", "raw/multi")
    );
    let e = err_of("", &merge);
    assert!(
        names(&e, &["topics[0].schema_mode", "topics[1].schema_mode"]),
        "{e}"
    );
}

#[test]
fn the_example_config_claims_no_table_twice() {
    let text = include_str!("../../../../lakestream.toml");
    assert!(PipelineConfig::from_toml(text).is_ok());
}

#[test]
fn the_table_list_names_every_table_once_with_its_kind_and_key() -> anyhow::Result<()> {
    use crate::tables::TableKind::*;
    let text = format!(
        "pipeline = \"p\"\n[lake]\nroot = \"/tmp/l\"\n[access_logs]\nlayout = \"single\"\n{}{}{}{}{}",
        topic("us", "raw/multi"),
        topic("eu", "raw/multi"),
        join("curated", "curated/order"),
        upsert("cdc", "silver/cdc", true),
        upsert("latest", "silver/latest", false),
    );
    let cfg = PipelineConfig::from_toml(&text)?;
    let got: Vec<(String, crate::tables::TableKind, String)> = cfg
        .tables()
        .into_iter()
        .map(|t| (t.name, t.kind, t.key))
        .collect();
    let want = [
        ("raw/multi", Topic, "topics[0].table"),
        ("dead_letters", DeadLetters, "dead_letter_table"),
        ("access_logs", AccessLogs, "access_logs.table_prefix"),
        ("curated/order", RefineOutput, "refine[0].output"),
        ("silver/cdc", RefineOutput, "refine[1].output"),
        ("silver/latest", RefineOutput, "refine[2].output"),
        (
            "_lakestream/cdc/tombstones",
            Tombstones,
            "refine[1].upsert.op",
        ),
    ];
    let want: Vec<(String, crate::tables::TableKind, String)> = want
        .iter()
        .map(|(n, k, key)| (n.to_string(), *k, key.to_string()))
        .collect();
    assert_eq!(got, want);
    // The per-bucket layout lists the directory of the bucket tables.
    let cfg = PipelineConfig::from_toml("pipeline = \"p\"\n[lake]\nroot = \"/tmp/l\"\n")?;
    assert!(
        cfg.tables()
            .iter()
            .any(|t| t.name == "access_logs" && t.kind == AccessLogDirectory)
    );
    Ok(())
}

#[test]
fn errors_say_what_to_change() {
    let e = err_of(
        "",
        &format!("{}{}", topic("a", "raw"), topic("b", "raw/order")),
    );
    assert_eq!(
        e,
        "config: `topics[1].table` = \"raw/order\" is inside `topics[0].table` = \"raw\": a table \
         may not hold another (vacuuming \"raw\" would delete \"raw/order\"'s log and data, as \
         files its log does not reference); move one of them, e.g. \"raw\" -> \"raw/main\" next \
         to it"
    );
    let e = err_of("", &format!("{}{}", join("a", "out"), join("b", "out")));
    assert_eq!(
        e,
        "config: `refine[0].output` = \"out\" and `refine[1].output` = \"out\" are one table: a \
         table has one writer, or its rows mix; give one of them another name"
    );
}
