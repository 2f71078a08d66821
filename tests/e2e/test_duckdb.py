"""DuckDB's Delta extension (delta-kernel-rs: no code shared with us or with Python `deltalake`)
reads every kind of table Lakestream writes and returns the same rows as Python `deltalake` and
as `lakestream sql` (DataFusion over our reader):
raw orders (processing-time partitions) through replays, members after schema evolution, dead
letters, access logs, the curated join and the processed upsert, after compaction, after
vacuum, past a checkpoint, and an old version by number. On the filesystem and on the S3
emulator (DuckDB's httpfs + an S3 secret). The extensions come from PyPI
(`duckdb-ext-delta`, `duckdb-ext-httpfs`): DuckDB cannot download them here."""
import datetime as dt
import json
import os
import pathlib

import duckdb
import duckdb_ext

from lake_support import checkpointed_version
from test_access_logs import objects_dir

EXTENSIONS = str(pathlib.Path(list(duckdb_ext.__path__)[0]) / "extensions")
TABLES = ["raw/order", "raw/member", "dead_letters", "access_logs/datalake-prod", "curated/order",
          "processed/order"]


def cli(lake, *args):
    return lake.cli(*args)


def connect(lake):
    con = duckdb.connect(config={"extension_directory": EXTENSIONS})
    con.execute("LOAD delta")
    con.execute("SET TimeZone = 'UTC'")
    if lake.backend == "s3":
        con.execute("LOAD httpfs")
        endpoint = os.environ["LAKESTREAM_TEST_S3_ENDPOINT"].removeprefix("http://")
        con.execute(f"CREATE SECRET moto (TYPE S3, KEY_ID 'test', SECRET 'test', REGION 'us-east-1', "
                    f"ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false)")
    return con


def norm(value):
    if isinstance(value, str) and len(value) >= 10 and value[4:5] == "-" and value[7:8] == "-":
        try:  # a timestamp as JSON text (lakestream sql --format json)
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def canonical(rows):
    """Rows as sorted JSON objects (column order, container types and absent-vs-null do not
    matter)."""
    return sorted(json.dumps({k: norm(v) for k, v in r.items() if v is not None}, sort_keys=True, default=str)
                  for r in rows)


def sql_rows(lake, query, *extra):
    out = cli(lake, "sql", query, "--format", "json", *extra)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def duck_rows(con, uri, version=None):
    if version is None:
        rel = con.execute(f"SELECT * FROM delta_scan('{uri}')")
    else:
        name = f"v{version}_{abs(hash(uri))}"
        con.execute(f"ATTACH '{uri}' AS {name} (TYPE delta, VERSION {version})")
        rel = con.execute(f"SELECT * FROM {name}")
    return rel.fetch_arrow_table().to_pylist()


def deltalake_rows(lake, name, version=None):
    t = lake.delta(name, version=version)
    return t.to_pyarrow_table().to_pylist()


def assert_same(con, lake, name, version=None):
    ours = canonical(deltalake_rows(lake, name, version))
    theirs = canonical(duck_rows(con, lake.table_uri(name), version))
    assert theirs == ours, f"{name} v{version}: DuckDB {len(theirs)} rows, deltalake {len(ours)}"
    sql_name = name.replace("/", "_").replace("-", "_")
    if version is None:
        mine = canonical(sql_rows(lake, f"SELECT * FROM {sql_name}"))
    else:
        mine = canonical(sql_rows(lake, f"SELECT * FROM {sql_name}_v{version}", "--at", f"{name}={version}"))
    assert mine == theirs, f"{name} v{version}: lakestream sql {len(mine)} rows, DuckDB {len(theirs)}"
    return len(ours)


def test_duckdb_reads_every_table_kind_like_python_deltalake(lake, tmp_path):
    for ev in ["msk-orders.json", "msk-replay.json", "msk-self-managed.json", "msk-bad-records.json",
               "msk-members.json", "msk-new-field.json"]:
        lake.invoke(ev)
    out = lake.invoke("sqs-s3-notifications.json", "s3-logs", ["--objects", str(objects_dir(tmp_path))])
    assert out["response"]["batchItemFailures"] == []
    cli(lake, "refine")
    con = connect(lake)
    counts = {name: assert_same(con, lake, name) for name in TABLES}
    assert counts["raw/order"] == 11 and counts["dead_letters"] > 0 and counts["access_logs/datalake-prod"] == 4
    assert counts["curated/order"] > 0 and counts["processed/order"] > 0
    members = lake.delta("raw/member")
    assert "points" in [f.name for f in members.schema().fields], "msk-new-field.json added a column"

    # An old version by number, then compaction, vacuum and a checkpoint: the same rows.
    assert assert_same(con, lake, "raw/order", version=0) == 6
    cli(lake, "optimize", "raw/order", "--min-files", "2")
    # The refine jobs read on past the compaction first: until then vacuum keeps the compacted-
    # away files, the curated job's join state at the version it consumed.
    cli(lake, "refine")
    cli(lake, "vacuum", "raw/order", "--retention-hours", "0", "--force")
    out = cli(lake, "checkpoint", "raw/order")
    t = lake.delta("raw/order")
    assert checkpointed_version(out) == t.version(), out
    assert [h["operation"] for h in t.history(3)] == ["VACUUM END", "VACUUM START", "OPTIMIZE"]
    con = connect(lake)  # a fresh reader: past the checkpoint, after the vacuum
    assert assert_same(con, lake, "raw/order") == 11
    assert assert_same(con, lake, "raw/order", version=t.version()) == 11
