"""`lakestream history` and `lakestream show --version` on the lake `lakestream demo` builds,
checked against Python `deltalake` (its own log replay): the same commits and operations, the
compaction with dataChange=false, and the same rows at the version before it and after it."""
import json
import subprocess

from deltalake import DeltaTable

from lake_support import BIN, cli


def run(*args, cwd):
    return cli(*args, cwd=cwd)


def offsets(rows):
    return sorted((r["kafka_partition"], r["kafka_offset"]) for r in rows)


def test_history_and_time_travel_agree_with_an_independent_reader(tmp_path):
    lake = str(tmp_path / "lake")
    run("demo", "--lake", lake, "--records", "400", cwd=tmp_path)
    uri = f"{lake}/raw/order"
    h = json.loads(run("history", "raw/order", "--json", "--lake", lake, cwd=tmp_path))
    theirs = {e["version"]: e["operation"] for e in DeltaTable(uri).history()}
    assert {e["version"]: e["operation"] for e in h["entries"]} == theirs
    assert [e["version"] for e in h["entries"]] == sorted(theirs, reverse=True)

    [compaction] = [e for e in h["entries"] if e["operation"] == "OPTIMIZE"]
    assert compaction["data_change"] is False
    v = compaction["version"]
    assert compaction["rows_added"] == DeltaTable(uri, version=v).to_pyarrow_table().num_rows
    appends = [e for e in h["entries"] if e["version"] < v]  # CREATE TABLE, then WRITEs
    assert appends and all(e["data_change"] and e["txns"] and e["commit_id"] for e in appends)
    assert sum(e["rows_added"] for e in appends) == compaction["rows_added"]

    before = [json.loads(line) for line in run(
        "show", "raw/order", "--version", str(v - 1), "--json", "--limit", "100000", "--lake", lake,
        cwd=tmp_path).splitlines()]
    independent = DeltaTable(uri, version=v - 1).to_pyarrow_table().to_pylist()
    assert offsets(before) == offsets(independent)
    after = [json.loads(line) for line in run(
        "show", "raw/order", "--version", str(v), "--json", "--limit", "100000", "--lake", lake,
        cwd=tmp_path).splitlines()]
    assert offsets(after) == offsets(before), "a compaction changes no rows"
    first = [json.loads(line) for line in run(
        "show", "raw/order", "--version", "0", "--json", "--limit", "100000", "--lake", lake,
        cwd=tmp_path).splitlines()]
    assert offsets(first) == offsets(DeltaTable(uri, version=0).to_pyarrow_table().to_pylist())
    assert 0 < len(first) < len(after)


def test_changes_net_of_a_rewrite_by_another_writer(lake, tmp_path):
    """Inserts by lakestream, a delete by Python deltalake (it rewrites the file: remove + add,
    both dataChange=true), a compaction: `changes` reports the two inserts, the one deleted row,
    and nothing for the compaction."""
    lake.invoke("msk-orders.json")  # v0: 6 rows
    lake.invoke("msk-replay.json")  # v1: 2 new rows
    t = lake.delta("raw/order")
    t.delete("kafka_offset = 1204310")  # v2
    out = subprocess.run([BIN, "optimize", "raw/order", "--min-files", "2", "--config", str(lake.config)],
                         capture_output=True, text=True, check=False)  # v3
    assert out.returncode == 0, out.stderr
    t = lake.delta("raw/order")
    ops = [h["operation"] for h in t.history()]
    assert ops[:2] == ["OPTIMIZE", "DELETE"], ops
    out = subprocess.run([BIN, "changes", "raw/order", "--from", "1", "--json", "--config", str(lake.config)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    got = sorted((r["_commit_version"], r["_change_type"], r["kafka_partition"], r["kafka_offset"]) for r in rows)
    assert got == [
        (1, "insert", 1, 1205209),
        (1, "insert", 2, 1206120),
        (2, "delete", 0, 1204310),
    ]
    [deleted] = [r for r in rows if r["_change_type"] == "delete"]
    assert (deleted["order_id"], deleted["order_owner"], deleted["order_value"]) == (3, "carol", 33)


def test_ddl_names_the_table_location_and_its_exact_columns(lake):
    lake.invoke("msk-orders.json")
    out = subprocess.run([BIN, "ddl", "raw/order", "--manifest", "--config", str(lake.config)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    ddl = out.stdout
    t = lake.delta("raw/order")
    parts = t.metadata().partition_columns
    cols = [line.strip().rstrip(",)").split(" ", 1) for line in ddl.splitlines() if line.startswith("  `")]
    names = [c[0].strip("`") for c in cols]
    assert names == [f.name for f in t.schema().fields if f.name not in parts]
    assert dict((c[0].strip("`"), c[1]) for c in cols)["kafka_offset"] == "bigint"
    assert "PARTITIONED BY (`year` string, `month` string, `day` string, `hour` string)" in ddl
    if lake.backend == "s3":
        assert f"LOCATION '{lake.table_uri('raw/order')}/_symlink_format_manifest/';" in ddl
        assert not ddl.startswith("--")
    native = subprocess.run([BIN, "ddl", "raw/order", "--config", str(lake.config)],
                            capture_output=True, text=True, check=False).stdout
    assert "TBLPROPERTIES ('table_type' = 'DELTA');" in native and "CREATE EXTERNAL TABLE `raw_order`" in native


def test_lag_matches_what_the_tables_hold(tmp_path):
    lake = str(tmp_path / "lake")
    run("demo", "--lake", lake, "--records", "400", cwd=tmp_path)
    lag = json.loads(run("lag", "--json", "--lake", lake, cwd=tmp_path))
    orders = DeltaTable(f"{lake}/raw/order").to_pyarrow_table().to_pylist()
    highest = {}
    for r in orders:
        if r["kafka_partition"] == -1:
            continue  # the demo's back-fill (`lakestream load`): no Kafka partition
        highest[r["kafka_partition"]] = max(highest.get(r["kafka_partition"], -1), r["kafka_offset"])
    [k] = [k for k in lag["kafka"] if k["topic"] == "orders"]
    # The committed offset is at least the highest row (a dead-lettered record can be last).
    assert {int(p): o for p, o in k["partitions"].items()}.keys() == highest.keys()
    assert all(o >= highest[int(p)] for p, o in k["partitions"].items())
    assert all(r["behind"] == 0 for r in lag["refine"]), lag["refine"]
    [a] = [a for a in lag["access_logs"] if a["table"] == "access_logs/datalake-prod"]
    logs = DeltaTable(f"{lake}/access_logs/datalake-prod").to_pyarrow_table().to_pylist()
    assert a["objects_last_24h"] == len({r["log_object"] for r in logs})
    newest = max(r["time"] for r in logs)
    assert a["newest_log_time"].replace("Z", "+00:00").startswith(newest.isoformat()[:19])


def test_every_time_history_prints_is_that_version_for_show_as_of(tmp_path):
    """Issue 24, 11b: the time `history` prints for a version, given to `show --as-of`, reads
    that version (one notion of commit time for both, even for commits within one second)."""
    lake = str(tmp_path / "lake")
    run("demo", "--lake", lake, "--records", "400", cwd=tmp_path)
    text = run("history", "raw/order", "--lake", lake, cwd=tmp_path).splitlines()[1:]
    assert len(text) >= 3, text
    times = []
    for line in text:
        version, day, clock = line.split()[:3]
        printed = f"{day} {clock}"  # exactly as printed
        times.append(printed)
        out = run("show", "raw/order", "--as-of", printed, "--limit", "1", "--lake", lake, cwd=tmp_path)
        assert out.startswith(f"raw/order as of version {version[1:]}:"), (line, out.splitlines()[0])
    assert len(set(times)) == len(times), f"one time per version: {times}"


COLLIDING_TOPICS = """
[[topics]]
topic = "orders-underscore"
table = "raw_order"
columns = [{ name = "id", type = "int64" }]

[[topics]]
topic = "orders-dash"
table = "raw-order"
columns = [{ name = "id", type = "int64" }]
"""


def test_ddl_refuses_two_tables_with_one_athena_name(lake):
    """Issue 24, 11c: `raw/order`, `raw_order` and `raw-order` (and the access-log tables of
    buckets `logs.prod` and `logs-prod`) would all get one Athena name; `ddl` refuses, naming
    the other table, and `--name` chooses a name instead."""
    import pyarrow as pa
    from deltalake import write_deltalake

    lake.config.write_text(lake.config.read_text() + COLLIDING_TOPICS)
    opts = lake.storage_options or None
    for t in ["raw/order", "raw_order", "raw-order", "access_logs/logs.prod", "access_logs/logs-prod"]:
        write_deltalake(lake.table_uri(t), pa.table({"id": [1]}), storage_options=opts)

    def ddl(*args):
        return subprocess.run([BIN, "ddl", *args, "--manifest", "--config", str(lake.config)],
                              capture_output=True, text=True, check=False)

    for table, others in [("raw/order", {"raw_order", "raw-order"}), ("raw_order", {"raw/order", "raw-order"}),
                          ("raw-order", {"raw/order", "raw_order"}),
                          ("access_logs/logs.prod", {"access_logs/logs-prod"})]:
        out = ddl(table)
        assert out.returncode != 0, f"{table}: {out.stdout}"
        assert f"`{table}`" in out.stderr and any(f"`{o}`" in out.stderr for o in others), out.stderr
        assert "--name" in out.stderr, out.stderr
    out = ddl("raw-order", "--name", "raw_order_dash")
    assert out.returncode == 0, out.stderr
    assert "CREATE EXTERNAL TABLE `raw_order_dash_manifest`" in out.stdout
    assert ddl("raw/order", "--name", "Raw Order").returncode != 0, "an Athena name is [a-z0-9_]"
    # A name no other table takes is printed as before.
    write_deltalake(lake.table_uri("raw/member"), pa.table({"id": [1]}), storage_options=opts)
    ok = ddl("raw/member")
    assert ok.returncode == 0 and "CREATE EXTERNAL TABLE `raw_member_manifest`" in ok.stdout, ok.stderr
