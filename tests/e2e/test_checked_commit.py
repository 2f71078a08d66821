"""The checked commit path seen from outside: tables written by Python `deltalake`, maintained by
the `lakestream` CLI, read back by Python `deltalake`.

- two `lakestream optimize` at once keep every row exactly once;
- every maintenance command's `--dry-run` leaves the version and the file listing unchanged.
"""
import os
import subprocess

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from lake_support import BIN

FILES, ROWS = 60, 100


def small_files(lake, name="py/events"):
    uri = lake.table_uri(name)
    for f in range(FILES):
        ids = list(range(f * ROWS, (f + 1) * ROWS))
        batch = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])})
        write_deltalake(uri, batch, mode="append", storage_options=lake.storage_options or None)
    return uri


def listing(lake, name):
    """Every object under the table (data, log, checkpoints, manifests)."""
    if lake.backend == "fs":
        base = os.path.join(lake.root, name)
        return sorted(os.path.relpath(os.path.join(d, f), base) for d, _, fs in os.walk(base) for f in fs)
    import boto3

    bucket, _, prefix = lake.root[len("s3://"):].partition("/")
    s3 = boto3.client("s3", endpoint_url=os.environ["LAKESTREAM_TEST_S3_ENDPOINT"], region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/{name}/"):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return sorted(keys)


def rows(lake, uri):
    t = DeltaTable(uri, storage_options=lake.storage_options or None)
    return t, t.to_pyarrow_table().column("id").to_pylist()


def test_two_optimizes_at_once_keep_every_row_once(lake):
    uri = small_files(lake)
    cmd = [BIN, "optimize", "py/events", "--min-files", "2", "--config", str(lake.config)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    t, ids = rows(lake, uri)
    assert len(ids) == FILES * ROWS, f"{len(ids)} rows, {len(set(ids))} distinct"
    assert sorted(ids) == list(range(FILES * ROWS))
    ops = [h["operation"] for h in t.history(5)]
    assert ops.count("OPTIMIZE") == 1, ops


def test_dry_runs_change_nothing(lake):
    small_files(lake)
    before = (lake.delta("py/events").version(),
              listing(lake, "py/events"))
    for args in (["optimize", "--min-files", "2"], ["vacuum", "--retention-hours", "0", "--force"],
                 ["checkpoint"], ["manifest"]):
        out = subprocess.run([BIN, args[0], "py/events", "--dry-run", *args[1:], "--config", str(lake.config)],
                             capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr
        after = (lake.delta("py/events").version(),
                 listing(lake, "py/events"))
        assert after == before, f"`{args[0]} --dry-run` changed the table: {out.stdout}"
