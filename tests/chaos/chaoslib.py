"""Shared pieces of the fault, crash and concurrency suite: lakes on the S3 emulator (reached
through the fault proxy or directly), generated MSK batches with known content, invoking the
`lakestream` binary the way Lambda would (redeliver until it succeeds), and reading tables back
directly from the emulator with Python `deltalake` to compare record by record."""
import base64
import json
import os
import pathlib
import random
import subprocess
import threading
import time
import uuid

from lake_support import S3_BUCKET as BUCKET, LakeBase, s3_storage, with_lake
from lake_support import run_all  # noqa: F401 - the suite's tests import it from here

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("LAKESTREAM_BIN", str(ROOT / "target/debug/lakestream"))
# The example config without its gold job: the chaos model checks raw, curated and processed
# (and their vacuum guards); gold tables have their own random schedules (tests/e2e/test_gold.py).
_GOLD = "\n# The gold table:"
EXAMPLE = (ROOT / "lakestream.toml").read_text().split(_GOLD)[0]
assert 'job = "gold"' not in EXAMPLE, "the example's gold job moved; update chaoslib"
MOTO = os.environ.get("LAKESTREAM_TEST_S3_ENDPOINT", "")
MOTO_PORT = int(MOTO.rsplit(":", 1)[-1]) if MOTO else 0
SEED = int(os.environ.get("CHAOS_SEED", "20261130"))
SCALE = float(os.environ.get("CHAOS_SCALE", "1"))
# Short client timeouts and retry budgets: a delayed request times out after 0.6 s instead of 30 s,
# and a request gives up after 4 retries instead of ~3 minutes, so the suite stays in minutes.
CLIENT = ('storage_options = { timeout = "600ms", connect_timeout = "1s", max_retries = "4", '
          'retry_timeout = "15s", "backoff_config.init_backoff" = "20ms", '
          '"backoff_config.max_backoff" = "300ms" }\n')
STORAGE = s3_storage(MOTO)
ORDERS_TS = "2026-11-30T10:00:00Z"

# Figures per scenario, printed at the end of the run (conftest) and saved as JSON.
FIGURES = {}


def scaled(n):
    return max(1, int(round(n * SCALE)))


def rng(name):
    """A generator per scenario, derived from the run's seed (fixed in CI, random in `make chaos`)."""
    return random.Random(f"{SEED}/{name}")


class ChaosLake(LakeBase):
    """A fresh lake prefix on the emulator; the config sends lakestream through `endpoint`
    (Python `deltalake` reads the emulator directly)."""

    def __init__(self, tmp, endpoint, name="lake", prefix=None, client=CLIENT):
        super().__init__(f"s3://{BUCKET}/{prefix or f'chaos-{name}-{uuid.uuid4().hex[:10]}'}", endpoint,
                         reader_endpoint=MOTO, client=client)
        self.tmp = tmp
        self.config = tmp / f"{self.prefix}-{uuid.uuid4().hex[:6]}.toml"
        self.config.write_text(with_lake(EXAMPLE, self.lake_toml))
        self.invocations = 0
        self.failed = 0
        self.lock = threading.Lock()

    uri = LakeBase.table_uri

    def run(self, args, crash_at=None, timeout=300, env=None):
        """One process: `lakestream <args> --config <cfg>`; returns the CompletedProcess."""
        cmd = [BIN, *args, "--config", str(self.config)]
        if crash_at:
            cmd += ["--crash-at", crash_at]
        full_env = {**os.environ, "AWS_ENDPOINT_URL": self.endpoint, "AWS_MAX_ATTEMPTS": "3",
                    "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                    "AWS_REGION": "us-east-1", **(env or {})}
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, check=False)
        with self.lock:
            self.invocations += 1
            self.failed += out.returncode != 0
        return out

    def deliver(self, args, max_attempts=40):
        """Lambda's at-least-once delivery: invoke until the function succeeds."""
        for _ in range(max_attempts):
            out = self.run(args)
            if out.returncode == 0:
                return out
            time.sleep(0.05)
        raise AssertionError(f"`{' '.join(args)}` never succeeded; last error:\n{out.stderr[-3000:]}")

    def write_event(self, name, event):
        path = self.tmp / f"{self.prefix}-{name}.json"
        path.write_text(json.dumps(event))
        return path

    table = LakeBase.delta

    def rows(self, table):
        return self.read(table).to_pylist()


def order(partition, offset):
    """The order carried by (partition, offset); every 13th offset is not JSON (a dead letter)."""
    if offset % 13 == 7:
        return None
    oid = partition * 1_000_000 + offset
    return {"order_id": oid, "order_owner": f"owner-{oid % 17}", "order_value": (oid * 7919) % 10_000,
            "timestamp": ORDERS_TS}


def raw_value(partition, offset):
    o = order(partition, offset)
    return json.dumps(o).encode() if o else f"not json #{partition}/{offset}".encode()


def msk_event(partition, offsets, topic="orders"):
    records = [{
        "topic": topic, "partition": partition, "offset": off, "timestamp": 1764496800000 + off,
        "timestampType": "CREATE_TIME", "value": base64.b64encode(raw_value(partition, off)).decode(),
        "headers": [],
    } for off in offsets]
    return {"eventSource": "aws:kafka",
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/chaos/abc",
            "bootstrapServers": "b-1.chaos:9098", "records": {f"{topic}-{partition}": records}}


def check_orders(lake, sent):
    """Compare raw/order and the dead letters with what was sent (a set of (partition, offset)),
    record by record. Returns the figures."""
    rows = lake.rows("raw/order")
    got = [(r["kafka_partition"], r["kafka_offset"]) for r in rows]
    good = {k for k in sent if order(*k) is not None}
    bad = sent - good
    dup = len(got) - len(set(got))
    assert dup == 0, f"{dup} duplicate rows in raw/order"
    assert set(got) == good, (f"raw/order: {len(good - set(got))} records lost, "
                              f"{len(set(got) - good)} never sent")
    for r in rows:
        want = order(r["kafka_partition"], r["kafka_offset"])
        assert (r["order_id"], r["order_owner"], r["order_value"]) == (
            want["order_id"], want["order_owner"], want["order_value"]), r
    letters = lake.rows("dead_letters") if bad else []
    dl = [(r["partition"], r["offset"]) for r in letters if r["topic"] == "orders"]
    assert len(dl) == len(set(dl)), f"{len(dl) - len(set(dl))} duplicate dead letters"
    assert set(dl) == bad, f"dead letters: {len(bad - set(dl))} missing, {len(set(dl) - bad)} unexpected"
    for r in letters:
        assert base64.b64decode(r["raw_base64"]) == raw_value(r["partition"], r["offset"])
        assert "JSON" in r["error"] or "json" in r["error"], r["error"]
    return {"records_sent": len(sent), "rows_read_back": len(got), "dead_letters": len(dl),
            "duplicates": dup, "lost": len(good - set(got)) + len(bad - set(dl))}


def record(scenario, **figures):
    FIGURES.setdefault(scenario, {}).update(figures)


def s3_keys(lake, table):
    """Every object under a table, read directly from the emulator."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=MOTO, region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{lake.prefix}/{table}/"):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys, s3


def manifest_files(lake, table):
    """The data files the symlink manifests list (what Athena/Presto would read)."""
    keys, s3 = s3_keys(lake, table)
    files = []
    for k in keys:
        if "/_symlink_format_manifest/" in k and k.endswith("/manifest"):
            body = s3.get_object(Bucket=BUCKET, Key=k)["Body"].read().decode()
            files += [line for line in body.splitlines() if line]
    return sorted(files)


def good_offsets(k, n=7):
    """Offsets of batch k that all carry valid orders (offset % 13 in 0..6)."""
    return list(range(k * 13, k * 13 + min(n, 7)))


def append(lake, partition, k, sent):
    """Deliver batch k of valid orders on `partition` until it succeeds; add it to `sent`."""
    offsets = good_offsets(k)
    path = lake.write_event(f"p{partition}-k{k}", msk_event(partition, offsets))
    lake.deliver(["invoke", "msk", "--event", str(path)])
    sent.update((partition, o) for o in offsets)
