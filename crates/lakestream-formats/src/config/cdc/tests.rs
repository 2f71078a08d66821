use super::*;
use crate::config::PipelineConfig;

const BASE: &str = "pipeline = \"p\"\n[lake]\nroot = \"/tmp/l\"\n";

fn parse(block: &str) -> Result<PipelineConfig> {
    PipelineConfig::from_toml(&format!("{BASE}{block}"))
}

fn err_of(block: &str) -> String {
    match parse(block) {
        Ok(_) => "parsed".into(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_debezium_family_names_its_tables() -> anyhow::Result<()> {
    let cfg = parse(
        r#"
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*"]
scd = 2
keys = { "public.orders" = ["order_id"] }
"#,
    )?;
    let (f, t) = cfg
        .cdc_topic("crm.public.orders")
        .ok_or_else(|| anyhow::anyhow!("no match"))?;
    assert_eq!(f.scd, ScdType::Two);
    assert_eq!(t.qualified(), "public.orders");
    assert_eq!(f.bronze_table(&t)?, "bronze/crm/public/orders");
    assert_eq!(f.silver_table(&t)?, "silver/crm/public/orders");
    assert_eq!(f.job_name(&t), "cdc-crm/public.orders");
    assert_eq!(f.declared_keys(&t), Some(&["order_id".to_string()][..]));
    assert_eq!(f.table_of_bronze("bronze/crm/public/orders"), Some(t));
    assert_eq!(f.table_of_bronze("bronze/crm/public"), None);
    assert!(cfg.cdc_topic("crm.other.orders").is_none());
    assert!(cfg.cdc_topic("crm.public.orders.x").is_none());
    assert_eq!(f.bronze_directory(), "bronze/crm");
    Ok(())
}

#[test]
fn topic_patterns_match_whole_segments() {
    assert!(topic_matches("crm.public.*", "crm.public.orders"));
    assert!(topic_matches("crm.*.*", "crm.sales.orders"));
    assert!(topic_matches("crm.public.order*", "crm.public.orders"));
    assert!(!topic_matches("crm.public.order*", "crm.public.order"));
    assert!(!topic_matches("crm.public.*", "crm.public."));
    assert!(!topic_matches("crm.public.*", "crm.public.a.b"));
    assert!(!topic_matches("crm.public.*", "crmx.public.a"));
}

#[test]
fn a_dms_family_maps_objects() -> anyhow::Result<()> {
    let cfg = parse(
        r#"
[[cdc]]
family = "erp"
source = "dms"
location = "s3://landing/dms/erp"
timestamp_column = "commit_ts"
columns = { "dbo.items" = ["id int64", "price decimal(10,2)", "name string"] }
keys = { "dbo.items" = ["id"] }
"#,
    )?;
    let (f, t) = cfg
        .cdc_object("landing", "dms/erp/dbo/items/LOAD00000001.csv")
        .ok_or_else(|| anyhow::anyhow!("no match"))?;
    assert_eq!(t.qualified(), "dbo.items");
    assert!(!f.has_csv_header());
    let cols = f.declared_columns(&t)?;
    assert_eq!(cols[1].data_type, CdcType::Decimal(10, 2));
    assert!(cfg.cdc_object("other", "dms/erp/dbo/items/x.csv").is_none());
    assert!(cfg.cdc_object("landing", "dms/erp/dbo/items/").is_none());
    assert!(cfg.cdc_object("landing", "dms/erp/dbo").is_none());
    Ok(())
}

#[test]
fn hostile_names_never_become_tables() {
    let f = parse("[[cdc]]\nfamily = \"crm\"\nsource = \"debezium\"\ntopics = [\"crm.*.*\"]\n")
        .ok()
        .and_then(|c| c.cdc.into_iter().next());
    let Some(f) = f else {
        panic!("family parses");
    };
    for (schema, table) in [
        ("..", "x"),
        ("_x", "y"),
        ("a", ".hidden"),
        ("a", ""),
        ("a%2f", "b"),
    ] {
        let t = FamilyTable {
            schema: schema.into(),
            table: table.into(),
        };
        assert!(f.bronze_table(&t).is_err(), "{schema}/{table}");
    }
}

#[test]
fn bad_blocks_are_refused_with_the_key() {
    let cases = [
        (
            "[[cdc]]\nfamily = \"a b\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\n",
            "cdc[0].family",
        ),
        ("[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\n", "cdc[0]"),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.*\"]\n",
            "cdc[0].topics",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"dms\"\nlocation = \"landing/x\"\n",
            "cdc[0].location",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\nscd = 3\n",
            "scd must be 1 or 2",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\nbronze = \"{schema}/{table}\"\n",
            "cdc[0].bronze",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\nbronze = \"b/{table}x\"\n",
            "cdc[0].bronze",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\nbronze = \"x/{table}\"\nsilver = \"x/{schema}/{table}\"\n",
            "share the directory",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\ncolumns = { \"b.c\" = [\"id int8\"] }\n",
            "not a type",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\n[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"c.b.*\"]\n",
            "listed twice",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\n[[cdc]]\nfamily = \"b\"\nsource = \"debezium\"\ntopics = [\"c.b.*\"]\nbronze = \"bronze/a/{table}\"\n",
            "are one table",
        ),
        (
            "[[topics]]\ntopic = \"a.b.c\"\ntable = \"raw/c\"\ncolumns = [{ name = \"x\", type = \"string\" }]\n[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\n",
            "a topic has one reader",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\n[[refine]]\njob = \"j\"\noutput = \"silver/a/b/c\"\n[refine.upsert]\nsource = \"raw/x\"\nkey = [\"k\"]\norder_by = [\"t\"]\n",
            "inside",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\nfreshness = 15\n",
            "a freshness target such as \"15m\"",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\nfreshness = { orders = \"15m\" }\n",
            "`freshness` names `orders`",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\ntables = [\"b.c\"]\nfreshness = { \"b.d\" = \"15m\" }\n",
            "`freshness` names `b.d`",
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\nfreshness = \"1s\"\n",
            "from 30s to 24h",
        ),
    ];
    for (block, want) in cases {
        let got = err_of(block);
        assert!(got.contains(want), "{block}\n-> {got}\n(want {want})");
    }
}

#[test]
fn the_example_family_config_parses() -> anyhow::Result<()> {
    let cfg = PipelineConfig::from_toml(include_str!("../../../../../examples/cdc-crm.toml"))?;
    assert_eq!(cfg.cdc.len(), 2);
    let (f, t) = cfg
        .cdc_topic("crm.public.order_items")
        .ok_or_else(|| anyhow::anyhow!("no match"))?;
    assert_eq!(
        f.declared_keys(&t),
        Some(&["order_id".to_string(), "line_no".to_string()][..])
    );
    let (legacy, acc) = cfg
        .cdc_object(
            "crm-landing",
            "dms/legacy/dbo/accounts/20261129-113401000.csv",
        )
        .ok_or_else(|| anyhow::anyhow!("no match"))?;
    assert_eq!(legacy.scd, ScdType::Two);
    assert_eq!(legacy.silver_table(&acc)?, "silver/legacy/dbo/accounts");
    assert_eq!(legacy.declared_columns(&acc)?.len(), 4);
    Ok(())
}

#[test]
fn a_star_entry_declares_keys_and_columns_for_every_table_without_its_own() -> anyhow::Result<()> {
    let cfg = parse(
        r#"
[[cdc]]
family = "erp"
source = "dms"
location = "s3://landing/dms/"
keys = { "*" = ["id"], "dbo.lines" = ["order_id", "line_no"] }
columns = { "*" = ["commit_ts timestamp", "id int64", "name string"], "dbo.lines" = ["order_id int64", "line_no int32"] }
"#,
    )?;
    let of = |key: &str| {
        cfg.cdc_object("landing", key)
            .ok_or_else(|| anyhow::anyhow!("no match for {key}"))
    };
    let (f, t) = of("dms/dbo/t07/LOAD00000001.csv")?;
    assert_eq!(f.declared_keys(&t), Some(&["id".to_string()][..]));
    let names: Vec<String> = f
        .declared_columns(&t)?
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["commit_ts", "id", "name"]);
    let (f, lines) = of("dms/dbo/lines/LOAD00000001.csv")?;
    assert_eq!(
        f.declared_keys(&lines),
        Some(&["order_id".to_string(), "line_no".to_string()][..])
    );
    assert_eq!(f.declared_columns(&lines)?.len(), 2);
    assert!(
        err_of(
            "[[cdc]]\nfamily = \"e\"\nsource = \"dms\"\nlocation = \"s3://landing/dms/\"\n\
             columns = { \"*\" = [\"id int99\"] }\n"
        )
        .contains("columns.\"*\"")
    );
    Ok(())
}

#[test]
fn a_key_of_another_source_is_refused_naming_the_key_and_the_source() {
    let cases = [
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\ncsv_header = true\n",
            ["`csv_header`", "debezium"],
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\ncsv_delimiter = \";\"\n",
            ["`csv_delimiter`", "debezium"],
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\ntimestamp_column = \"ts\"\n",
            ["`timestamp_column`", "debezium"],
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\nlocation = \"s3://landing/x/\"\n",
            ["`location`", "debezium"],
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"dms\"\nlocation = \"s3://landing/x/\"\ntopics = [\"a.b.*\"]\n",
            ["`topics`", "dms"],
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"files\"\nlocation = \"s3://landing/x/\"\ntopics = [\"a.b.*\"]\n",
            ["`topics`", "files"],
        ),
        (
            "[[cdc]]\nfamily = \"a\"\nsource = \"dms\"\nlocation = \"s3://landing/x/\"\ntoast_placeholder = \"x\"\n",
            ["`toast_placeholder`", "dms"],
        ),
    ];
    for (block, want) in cases {
        let got = err_of(block);
        for w in want {
            assert!(got.contains(w), "{block}\n-> {got}\n(want {w})");
        }
    }
}

#[test]
fn each_source_keeps_its_own_settings() -> anyhow::Result<()> {
    let cfg = parse(
        "[[cdc]]\nfamily = \"a\"\nsource = \"files\"\nlocation = \"s3://landing/f/\"\ncsv_delimiter = \";\"\n\
         [[cdc]]\nfamily = \"b\"\nsource = \"dms\"\nlocation = \"s3://landing/d/\"\ncsv_header = true\n",
    )?;
    let (files, dms) = (&cfg.cdc[0], &cfg.cdc[1]);
    assert!(files.has_csv_header());
    assert_eq!(files.source.kind(), CdcSource::Files);
    assert!(dms.has_csv_header());
    assert_eq!(dms.source.kind(), CdcSource::Dms);
    assert!(err_of("[[cdc]]\nfamily = \"a\"\nsource = \"dms\"\n").contains("location"));
    Ok(())
}

#[test]
fn a_debezium_family_has_a_toast_placeholder_that_reaches_its_apply_jobs() -> anyhow::Result<()> {
    let cfg = parse(
        "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\n\
         [[cdc]]\nfamily = \"b\"\nsource = \"debezium\"\ntopics = [\"b.b.*\"]\ntoast_placeholder = \"~toast~\"\n\
         [[cdc]]\nfamily = \"c\"\nsource = \"dms\"\nlocation = \"s3://landing/d/\"\n",
    )?;
    let t = FamilyTable {
        schema: "b".into(),
        table: "t".into(),
    };
    let placeholder = |i: usize| -> anyhow::Result<Option<String>> {
        match cfg.cdc[i].apply_job(&t)?.kind {
            crate::refine::JobKind::Cdc(a) => Ok(a.toast_placeholder),
            _ => anyhow::bail!("not a CDC job"),
        }
    };
    assert_eq!(
        placeholder(0)?.as_deref(),
        Some(super::DEFAULT_TOAST_PLACEHOLDER)
    );
    assert_eq!(placeholder(1)?.as_deref(), Some("~toast~"));
    assert_eq!(placeholder(2)?, None);
    assert!(
        err_of("[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\ntoast_placeholder = \"\"\n")
            .contains("toast_placeholder")
    );
    Ok(())
}

#[test]
fn position_resets_are_rfc3339_ascending_debezium_only_and_reach_the_apply_job()
-> anyhow::Result<()> {
    let cfg = parse(
        "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\n\
         position_resets = [\"2026-12-04T10:00:00Z\", \"2026-12-05T00:00:00+01:00\"]\n",
    )?;
    let t = FamilyTable {
        schema: "b".into(),
        table: "t".into(),
    };
    let resets = match cfg.cdc[0].apply_job(&t)?.kind {
        crate::refine::JobKind::Cdc(a) => a.position_resets,
        _ => anyhow::bail!("not a CDC job"),
    };
    assert_eq!(resets, [1_796_378_400_000_000, 1_796_425_200_000_000]);
    let family = "[[cdc]]\nfamily = \"a\"\nsource = \"debezium\"\ntopics = [\"a.b.*\"]\n";
    for (resets, want) in [
        ("[\"yesterday\"]", "RFC 3339"),
        (
            "[\"2026-12-05T00:00:00Z\", \"2026-12-04T00:00:00Z\"]",
            "ascending",
        ),
        (
            "[\"2026-12-04T00:00:00Z\", \"2026-12-04T00:00:00Z\"]",
            "ascending",
        ),
    ] {
        let got = err_of(&format!("{family}position_resets = {resets}\n"));
        assert!(got.contains(want), "{resets} -> {got}");
    }
    let dms = "[[cdc]]\nfamily = \"a\"\nsource = \"dms\"\nlocation = \"s3://landing/d/\"\n";
    let got = err_of(&format!(
        "{dms}position_resets = [\"2026-12-04T00:00:00Z\"]\n"
    ));
    assert!(
        got.contains("`position_resets`") && got.contains("debezium"),
        "{got}"
    );
    Ok(())
}

#[test]
fn a_template_without_schema_is_refused_unless_one_schema_is_possible() {
    let dms = "[[cdc]]\nfamily = \"erp\"\nsource = \"dms\"\nlocation = \"s3://landing/dms/\"\n";
    let e = err_of(&format!("{dms}bronze = \"bronze/erp/{{table}}\"\n"));
    assert!(
        e.contains("`cdc[0].bronze`") && e.contains("{schema}"),
        "{e}"
    );
    let e = err_of(&format!("{dms}silver = \"silver/erp/{{table}}\"\n"));
    assert!(e.contains("`cdc[0].silver`"), "{e}");
    let deb = "[[cdc]]\nfamily = \"crm\"\nsource = \"debezium\"\n";
    let one = format!("{deb}topics = [\"crm.public.*\"]\nbronze = \"bronze/crm/{{table}}\"\n");
    assert!(parse(&one).is_ok(), "{}", err_of(&one));
    for topics in ["[\"crm.*.*\"]", "[\"crm.public.*\", \"crm.sales.*\"]"] {
        let e = err_of(&format!(
            "{deb}topics = {topics}\nbronze = \"bronze/crm/{{table}}\"\n"
        ));
        assert!(e.contains("`cdc[0].bronze`"), "{topics}: {e}");
    }
}

#[test]
fn a_landing_location_overlapping_the_lake_is_refused() {
    let with = |root: &str, location: &str| {
        let text = format!(
            "pipeline = \"p\"\n[lake]\nroot = \"{root}\"\n[[cdc]]\nfamily = \"erp\"\nsource = \
             \"dms\"\nlocation = \"{location}\"\n"
        );
        PipelineConfig::from_toml(&text)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    for (root, location) in [
        ("s3://lake/prod", "s3://lake/prod/landing/"),
        ("s3://lake/prod/", "s3://lake/prod/"),
        ("s3://lake", "s3://lake/landing/"),
        ("s3://lake/prod/tables", "s3://lake/prod/"),
    ] {
        let e = with(root, location).unwrap_err();
        assert!(
            e.contains("`cdc[0].location`") && e.contains("overlaps"),
            "{e}"
        );
    }
    for (root, location) in [
        ("s3://lake/prod", "s3://lake/prod-landing/"),
        ("s3://lake/prod", "s3://landing/prod/"),
        ("/tmp/lake", "s3://lake/landing/"),
    ] {
        assert!(with(root, location).is_ok(), "{root} {location}");
    }
}

#[test]
fn a_table_name_with_a_dot_cannot_name_a_table() {
    let t = FamilyTable {
        schema: "a".into(),
        table: "b.c".into(),
    };
    let e = template::fill("bronze/erp/{schema}/{table}", &t)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ambiguous"), "{e}");
    let dotted_schema = FamilyTable {
        schema: "a.b".into(),
        table: "c".into(),
    };
    assert_eq!(
        template::fill("bronze/erp/{schema}/{table}", &dotted_schema).unwrap(),
        "bronze/erp/a.b/c"
    );
}
