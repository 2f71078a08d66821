"""`lakestream catalog sync` against the emulator's Glue API (moto), read back with boto3 as an
Athena user's catalog and checked against the tables as Python `deltalake` reads them: after
`lakestream demo`, every table is registered with the Delta schema's columns and types (mapped
to Hive types here, independently of the Rust mapping), the manifest tables' partitions equal
the live files' partition values; a second sync changes nothing; a schema change and a new
partition are followed; two syncs at once; the maintenance manifest job runs the sync."""
import json
import os
import re
import uuid

import boto3
import pyarrow as pa
import pytest

import lake_support

pytestmark = pytest.mark.skipif(
    not os.environ.get("LAKESTREAM_TEST_S3_ENDPOINT") and os.environ.get("LAKESTREAM_REQUIRE_S3") != "1",
    reason="needs the S3 emulator (its Glue API)",
)
HIVE_DEFAULT = "__HIVE_DEFAULT_PARTITION__"


def glue():
    return boto3.client("glue", endpoint_url=os.environ["LAKESTREAM_TEST_S3_ENDPOINT"], region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


def env():
    e = dict(os.environ)
    e.update(AWS_ENDPOINT_URL=os.environ["LAKESTREAM_TEST_S3_ENDPOINT"], AWS_ACCESS_KEY_ID="test",
             AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
    return e


def hive(t):
    """The Hive type of a pyarrow type (what Athena shows)."""
    if pa.types.is_boolean(t):
        return "boolean"
    for check, name in [(pa.types.is_int8, "tinyint"), (pa.types.is_int16, "smallint"), (pa.types.is_int32, "int"),
                        (pa.types.is_int64, "bigint"), (pa.types.is_float32, "float"), (pa.types.is_float64, "double"),
                        (pa.types.is_date, "date"), (pa.types.is_timestamp, "timestamp")]:
        if check(t):
            return name
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return f"array<{hive(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{t.field(i).name}:{hive(t.field(i).type)}" for i in range(t.num_fields)) + ">"
    if pa.types.is_map(t):
        return f"map<{hive(t.key_type)},{hive(t.item_type)}>"
    raise AssertionError(f"no Hive type for {t}")


def athena_name(table):
    return re.sub(r"[^a-z0-9]", "_", table.lower())


def lake_tables(lake):
    """Every Delta table of the lake, by listing storage (not through lakestream), without
    Lakestream's side tables."""
    if lake.backend == "fs":
        found = lake_support.delta_tables_under(lake.root)
    else:
        bucket, prefix = lake.root[len("s3://"):].split("/", 1)
        s3 = boto3.client("s3", endpoint_url=os.environ["LAKESTREAM_TEST_S3_ENDPOINT"], region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test")
        found = set()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
            for o in page.get("Contents", []):
                rel = o["Key"][len(prefix) + 1:]
                if "/_delta_log/" in rel:
                    found.add(rel.split("/_delta_log/")[0])
        found = sorted(found)
    return [t for t in found if not any(s.startswith("_") for s in t.split("/"))]


def location(lake, table):
    """Where the catalog should point: the table's URL (a filesystem lake's as file://)."""
    uri = lake.table_uri(table)
    return (uri if uri.startswith("s3://") else "file://" + uri) + "/"


def partitions(g, db, name):
    out = set()
    for page in g.get_paginator("get_partitions").paginate(DatabaseName=db, TableName=name):
        out.update(tuple(p["Values"]) for p in page["Partitions"])
    return out


def live_partitions(lake, table, keys):
    """The partition values of the live files, as Python deltalake reads them."""
    return {tuple(HIVE_DEFAULT if p.get(k) in (None, "") else str(p[k]) for k in keys)
            for p in lake.delta(table).partitions()}


def check_catalog(lake, db, manifest_prefix="raw/", only=lambda t: True):
    """Every lake table (that `only` keeps) in `db` as Athena would see it; returns the tables
    checked."""
    g = glue()
    tables = [t for t in lake_tables(lake) if only(t)]
    assert tables, "the demo wrote no table"
    names = {t["Name"] for page in g.get_paginator("get_tables").paginate(DatabaseName=db) for t in page["TableList"]}
    assert names == {athena_name(t) for t in tables}, (sorted(names), tables)
    for table in tables:
        got = g.get_table(DatabaseName=db, Name=athena_name(table))["Table"]
        schema = lake.read(table).schema
        keys = lake.delta(table).metadata().partition_columns
        sd = got["StorageDescriptor"]
        cols = [(c["Name"], c["Type"]) for c in sd["Columns"]]
        want = [(f.name.lower(), hive(f.type)) for f in schema]
        assert got["Parameters"]["lakestream.table"] == table
        if table.startswith(manifest_prefix):
            assert sd["Location"] == location(lake, table) + "_symlink_format_manifest/"
            assert cols == [c for c in want if c[0] not in [k.lower() for k in keys]], table
            assert [(c["Name"], c["Type"]) for c in got["PartitionKeys"]] == [c for c in want if c[0] in [k.lower() for k in keys]]
            assert partitions(g, db, athena_name(table)) == live_partitions(lake, table, keys), table
        else:
            assert got["Parameters"]["table_type"] == "DELTA", table
            assert sd["Location"] == location(lake, table)
            assert cols == want, table
            assert got.get("PartitionKeys", []) == []
    return tables


def with_catalog(lake):
    lake.config.write_text(lake.config.read_text() + '\n[catalog]\nmanifest = ["raw/*"]\n')


def test_demo_then_sync_registers_every_table_and_follows_changes(lake, cli):
    cli("demo", "--records", "400", config=lake.config)
    with_catalog(lake)
    db = "it_" + uuid.uuid4().hex[:10]
    dry = json.loads(lake.cli("catalog", "sync", "--database", db, "--dry-run", "--json", env=env()))
    assert dry["database_created"]
    with pytest.raises(glue().exceptions.EntityNotFoundException):
        glue().get_database(Name=db)
    report = json.loads(lake.cli("catalog", "sync", "--database", db, "--json", env=env()))
    assert {t["table"]: t["action"] for t in report["tables"]} == {t["table"]: "created" for t in dry["tables"]}
    tables = check_catalog(lake, db)
    assert "raw/order" in tables and "curated/order" in tables
    assert partitions(glue(), db, "raw_order"), "raw/order registered no partition"

    # Nothing new: nothing changes, in the report or in the catalog.
    before = {t: glue().get_table(DatabaseName=db, Name=athena_name(t))["Table"] for t in tables}
    again = json.loads(lake.cli("catalog", "sync", "--database", db, "--json", env=env()))
    assert {t["action"] for t in again["tables"] if t["table"] in tables} == {"unchanged"}
    assert sum(t["partitions_added"] + t["partitions_removed"] for t in again["tables"]) == 0
    assert {t: glue().get_table(DatabaseName=db, Name=athena_name(t))["Table"] for t in tables} == before

    # Another writer adds a column and a new hour partition to raw/order: both follow.
    from deltalake import write_deltalake
    order = lake.read("raw/order").slice(0, 1)
    order = order.set_column(order.schema.get_field_index("hour"), "hour", pa.array(["99"], order.schema.field("hour").type))
    order = order.append_column("note", pa.array(["late"], pa.string()))
    write_deltalake(lake.table_uri("raw/order"), order, mode="append", schema_mode="merge",
                    partition_by=lake.delta("raw/order").metadata().partition_columns,
                    storage_options=lake.storage_options or None)
    third = json.loads(lake.cli("catalog", "sync", "--database", db, "--json", env=env()))
    entry = next(t for t in third["tables"] if t["table"] == "raw/order")
    assert entry["action"] == "updated" and entry["partitions_added"] == 1, entry
    assert any("+ note string" in c for c in entry["changes"]), entry
    check_catalog(lake, db)
    assert ("note", "string") in [(c["Name"], c["Type"]) for c in
                                  glue().get_table(DatabaseName=db, Name="raw_order")["Table"]["StorageDescriptor"]["Columns"]]


def test_two_syncs_at_once_and_the_maintenance_manifest_job(lake, cli):
    cli("demo", "--records", "200", config=lake.config)
    with_catalog(lake)
    db = "it_" + uuid.uuid4().hex[:10]
    outs = []
    lake_support.run_all([lambda: outs.append(lake.run("catalog", "sync", "--database", db, env=env()))
                          for _ in range(2)])
    for o in outs:
        assert o.returncode == 0, o.stderr
    check_catalog(lake, db)

    # The maintenance function's manifest job syncs too (the database from the environment).
    db2 = "it_" + uuid.uuid4().hex[:10]
    e = env()
    e["LAKESTREAM_CATALOG_DATABASE"] = db2
    out = lake.cli("invoke", "maintenance", "--event", lake_support.EVENTS / "maintenance-manifest.json", env=e)
    results = json.loads(out.strip().splitlines()[-1])
    synced = [r for r in results if isinstance(r.get("outcome"), dict) and "Ok" in r["outcome"]
              and "catalog" in r["outcome"]["Ok"]]
    assert synced, results
    # The function's config has no `[[cdc]]`: the demo's CDC families are the CLI's addition.
    check_catalog(lake, db2, only=lambda t: not t.startswith(("bronze/", "silver/")))


def test_syncs_racing_appends_and_a_new_column_settle_on_the_next_run(lake):
    """Two syncs while batches land (one adds a column): whatever each saw, the next sync makes
    the catalog equal to the lake, and the one after changes nothing."""
    with_catalog(lake)
    db = "it_" + uuid.uuid4().hex[:10]
    lake.invoke("msk-orders.json")

    def appends():
        for event in ("msk-replay.json", "msk-self-managed.json", "msk-new-field.json", "msk-members.json"):
            lake.invoke(event)

    outs = []
    lake_support.run_all([appends] + [lambda: outs.append(lake.run("catalog", "sync", "--database", db, env=env()))
                                      for _ in range(2)])
    for o in outs:
        assert o.returncode == 0, o.stderr
    lake.cli("catalog", "sync", "--database", db, env=env())
    check_catalog(lake, db)
    last = json.loads(lake.cli("catalog", "sync", "--database", db, "--json", env=env()))
    assert [t for t in last["tables"] if t["action"] not in ("unchanged", "skipped")
            or t["partitions_added"] or t["partitions_removed"]] == []
