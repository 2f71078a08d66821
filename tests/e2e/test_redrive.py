"""`lakestream redrive`: a Kafka batch that Lambda gave up on (its S3 on-failure record,
`events/msk-failed-batch-s3.json`) is put back after later batches moved the partitions'
offsets past it; read back by Python `deltalake`: every record once, a second run writes
nothing. On the emulator the record is read from a bucket prefix, as from the stack's
failed-batches bucket."""
import json
import os
import uuid

import boto3

from lake_support import EVENTS
from test_independent_reader import ORDERS_AFTER_REPLAYS


def lakestream(lake, *args):
    env = dict(os.environ)
    if lake.backend == "s3":  # where the CLI's S3 client reads the failed-batches prefix
        env["AWS_ENDPOINT_URL"] = os.environ["LAKESTREAM_TEST_S3_ENDPOINT"]
    return lake.run(*args, env=env)


def failed_batch_source(lake, tmp_path):
    body = (EVENTS / "msk-failed-batch-s3.json").read_bytes()
    if lake.backend == "fs":
        d = tmp_path / "failed" / "aws" / "lambda" / "esm-uuid" / "0" / "2026" / "11" / "30" / "21"
        d.mkdir(parents=True)
        (d / "2026-11-30T21.14.06-316aa6d0").write_bytes(body)
        return str(tmp_path / "failed")
    endpoint = os.environ["LAKESTREAM_TEST_S3_ENDPOINT"]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    prefix = f"failed-{uuid.uuid4().hex[:8]}/aws/lambda/esm-uuid/"
    s3.put_object(Bucket="lakestream-test", Key=prefix + "0/2026/11/30/21/2026-11-30T21.14.06-316aa6d0", Body=body)
    return f"s3://lakestream-test/{prefix}"


def test_a_failed_batch_is_redriven_once_after_the_partitions_moved_on(lake, tmp_path):
    # The batch of msk-orders.json failed every retry; later batches landed after it: the
    # re-split replay (4 of its records plus 2 new) and the self-managed batch (partition 0).
    assert lake.invoke("msk-replay.json")["written"] == 6
    assert lake.invoke("msk-self-managed.json")["written"] == 2
    # The normal path cannot put it back: the partitions' txn versions are past it.
    assert lake.invoke("msk-orders.json")["written"] == 0

    source = failed_batch_source(lake, tmp_path)
    first = lakestream(lake, "redrive", source, "--json")
    again = lakestream(lake, "redrive", source, "--json")
    assert first.returncode == 0, first.stderr
    [r] = json.loads(first.stdout)
    assert r["id"] == "316aa6d0-8154-4b5e-9af7-85d5f4a6bc81"
    # 1205207 and 1206118 were never written; the other four had landed with the replay.
    assert (r["received"], r["written"], r["found_in_table"], r["duplicates"]) == (6, 2, 4, 4)
    assert again.returncode == 0, again.stderr
    [r2] = json.loads(again.stdout)
    assert (r2["written"], r2["duplicates"]) == (0, 6)

    t = lake.delta("raw/order")
    got = sorted((r["order_id"], r["order_owner"], r["order_value"], r["timestamp"], r["kafka_partition"], r["kafka_offset"])
                 for r in t.to_pyarrow_table().to_pylist())
    assert got == ORDERS_AFTER_REPLAYS
    # The redrive's own txn appIds are in the log with the data.
    txns = [a["txn"] for entry in history_actions(lake) for a in entry if "txn" in a]
    assert {x["appId"] for x in txns if "/redrive/" in x["appId"]} == {
        "orders-raw/redrive/316aa6d0-8154-4b5e-9af7-85d5f4a6bc81/orders/1",
        "orders-raw/redrive/316aa6d0-8154-4b5e-9af7-85d5f4a6bc81/orders/2",
    }


def test_a_record_that_is_not_an_on_failure_record_is_refused(lake, tmp_path):
    bad = tmp_path / "not-a-failure.json"
    bad.write_bytes((EVENTS / "msk-orders.json").read_bytes())
    out = lakestream(lake, "redrive", str(bad))
    assert out.returncode != 0
    assert "not a Lambda on-failure record" in out.stderr
    assert "1 of 1 on-failure records were not re-driven" in out.stderr


def history_actions(lake):
    """Every commit file's actions (the test reads the log as JSON, not through our code)."""
    if lake.backend == "fs":
        log_dir = os.path.join(lake.root, "raw/order/_delta_log")
        log = sorted(os.path.join(log_dir, f) for f in os.listdir(log_dir) if f.endswith(".json"))
        return [[json.loads(line) for line in open(p) if line.strip()] for p in log]
    endpoint = os.environ["LAKESTREAM_TEST_S3_ENDPOINT"]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    bucket, prefix = lake.root[len("s3://"):].split("/", 1)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/raw/order/_delta_log/")["Contents"]
                  if o["Key"].endswith(".json"))
    return [[json.loads(line) for line in s3.get_object(Bucket=bucket, Key=k)["Body"].read().decode().splitlines() if line.strip()]
            for k in keys]
