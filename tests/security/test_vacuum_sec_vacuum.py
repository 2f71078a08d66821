"""What `lakestream vacuum` must never delete (issue 24 defects 3 and 11), walked on the lake:
another table stored below the vacuumed table's root (a table `raw` created by hand next to
`raw/order`), and a writer's staged file under `--force --retention-hours 0`."""
import os
import pathlib
import subprocess

import pyarrow as pa
from deltalake import write_deltalake

from lake_support import BIN, files_under


def cli(lake, *args):
    return subprocess.run([BIN, *args, "--config", str(lake.config)], capture_output=True, text=True, check=False)


def listing(lake, table):
    """Every object under `table` (relative keys), on either backend."""
    if lake.backend == "fs":
        return files_under(pathlib.Path(lake.root) / table)
    import boto3

    s3 = boto3.client("s3", endpoint_url=os.environ["LAKESTREAM_TEST_S3_ENDPOINT"], region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    bucket, prefix = lake.root.removeprefix("s3://").split("/", 1)
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/{table}/"):
        keys += [o["Key"].removeprefix(f"{prefix}/{table}/") for o in page.get("Contents", [])]
    return sorted(keys)


def rows(lake, table):
    t = lake.delta(table)
    return sorted((r["kafka_partition"], r["kafka_offset"]) for r in t.to_pyarrow_table().to_pylist())


def test_vacuum_refuses_a_table_with_another_table_below_its_root(lake):
    lake.invoke("msk-orders.json")
    write_deltalake(lake.table_uri("raw"), pa.table({"x": [1]}), storage_options=lake.storage_options or None)
    before, data = listing(lake, "raw/order"), rows(lake, "raw/order")
    assert any(k.startswith("_delta_log/") for k in before) and any(k.endswith(".parquet") for k in before)
    for extra in (["--dry-run"], [], ["--retention-hours", "0", "--force"]):
        out = cli(lake, "vacuum", "raw", *extra)
        assert out.returncode != 0, f"vacuum raw {extra} must be refused: {out.stdout}"
        assert "`raw/order`" in out.stderr and "nothing was deleted" in out.stderr, out.stderr
        assert listing(lake, "raw/order") == before, f"vacuum raw {extra} deleted objects of raw/order"
    assert rows(lake, "raw/order") == data
    # The nested table itself vacuums as usual (nothing below it).
    assert cli(lake, "vacuum", "raw/order", "--retention-hours", "0", "--force").returncode == 0
    assert rows(lake, "raw/order") == data


def test_a_forced_window_0_vacuum_keeps_a_staged_file(lake):
    if lake.backend != "fs":
        return  # the Rust test covers S3 (tests/it/vacuum_guards.rs); here the CLI's report
    lake.invoke("msk-orders.json")
    table = pathlib.Path(lake.root) / "raw/order"
    partition = next(p.parent for p in table.rglob("*.parquet"))
    staged = partition / "part-00000-staged-by-a-writer-c000.snappy.parquet"
    staged.write_bytes(b"PAR1 a writer's file, not committed yet")
    out = cli(lake, "vacuum", "raw/order", "--retention-hours", "0", "--force")
    assert out.returncode == 0, out.stderr
    assert staged.exists(), out.stdout
    assert "kept 1 untracked file(s) younger than 1 h" in out.stdout, out.stdout
