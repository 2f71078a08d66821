"""CDC families end to end against a plain Python reference (tests/cdc_reference.py), read back
with Python `deltalake` (rows and `load_cdf`) and DuckDB, on the filesystem and the emulator:

- random Debezium change streams (snapshot rows, inserts, updates, deletes with tombstones,
  re-inserts, a new column, a position reset of the source (declared), changes re-sent and delivered late across batches, batches
  delivered twice, compactions in between) through `lakestream invoke msk` into bronze and
  `lakestream refine` into silver (sometimes two at once, or racing a compaction), SCD1 and SCD2: after every apply run silver equals the
  reference row by row, and its change feed replayed onto the previous reference gives it;
- a family of 70 Debezium tables and a family of 70 AWS DMS tables (full load, then CDC files
  notified out of order and twice), each declared in one `[[cdc]]` block: a scale test, run on
  one backend only (the emulator when the run has one)."""
import base64
import datetime as dt
import json
import os
import pathlib
import random
import shutil

import pytest

from cdc_reference import (DMS_COLS, EPOCH, LSN0, STREAMS_CONF, Checker, DmsStream, LsnClock, Stream, etag, msk_event,
                           random_schedule, silver_name, sqs_event, two_families)
from lake_support import S3_BUCKET, backends, run_all
from test_duckdb import connect

SEED = int(os.environ.get("CHAOS_SEED", "20261202"))



def test_random_debezium_streams_match_the_reference_scd1_scd2_and_change_feed(lake, tmp_path):
    lake.config.write_text(lake.config.read_text() + STREAMS_CONF)
    rng = random.Random(f"{SEED}/cdc-streams/{lake.backend}")
    families = two_families(rng)
    checker = Checker(lake.delta)

    sent_letters = []

    def deliver(path, new, letters):
        out = lake.invoke(path)
        assert (out["written"], out["dead_lettered"]) == (new, len(letters)), out
        sent_letters.extend(letters)

    raced = {"two applies": 0, "apply and compaction": 0}

    def refine():
        """Two apply runs at once, then one racing a compaction of every table, then one alone,
        in turn."""
        turn = sum(raced.values()) + refine.alone
        if turn % 3 == 0:
            raced["two applies"] += 1
            run_all([lambda: lake.cli("refine"), lambda: lake.cli("refine")])
        elif turn % 3 == 1:
            raced["apply and compaction"] += 1
            run_all([lambda: lake.cli("refine"), lambda: lake.cli("optimize", "--all", "--min-files", "2")])
            lake.cli("refine")  # what the compaction's race left for the next run
        else:
            refine.alone += 1
            lake.cli("refine")

    refine.alone = 0

    rounds = random_schedule(rng, families, tmp_path, checker, deliver=deliver, refine=refine,
                             optimize=lambda: lake.cli("optimize", "--all", "--min-files", "2"))
    # Each forged record is one dead letter with its raw value and reason, and nothing else.
    letters = {(r["topic"], r["offset"]): r for r in lake.read("dead_letters").to_pylist()}
    assert len(letters) == len(sent_letters) > 0, (len(letters), len(sent_letters))
    for st, offset, h in sent_letters:
        letter = letters[(st.topic, offset)]
        assert h.why in letter["error"], (h, letter["error"])
        assert base64.b64decode(letter["raw_base64"]) == st.value_bytes(offset), h
    assert all(raced.values()), raced
    # Bronze kept every change once, no duplicates, and the tombstones that did not follow
    # their delete in their batch (as deletes without a position).
    streams = [s for _, _, ss in families for s in ss]
    for s in streams:
        bronze = lake.read(f"bronze/{s.prefix}/{s.schema}/{s.table}").to_pylist()
        assert sorted(r["__offset"] for r in bronze) == s.bronze_offsets(), s.topic
        assert {r["__offset"] for r in bronze if r["__seq"] == ""} == s.tomb_rows, s.topic
    # Log compaction removed some deletes: their tombstones alone deleted the keys.
    assert any(o - 1 not in s.delivered or s.delivered[o - 1].op != "d" for s in streams for o in s.tomb_rows)
    assert checker.checks >= 2 * len(streams) and rounds >= 4
    # The shop database restarted its positions within one table's life (`position_resets`).
    restarted = [s.topic for s in streams
                 if {c.lsn < LSN0 for c in s.delivered.values()} == {True, False}]
    assert restarted, "no stream has changes from both sides of its source's position reset"
    duckdb_agrees(lake, [silver_name(f, s) for f, _, ss in families for s in ss])


def duckdb_agrees(lake, tables):
    """DuckDB (delta-kernel-rs) reads each silver table with the rows Python `deltalake` reads."""
    con = connect(lake)
    for t in tables:
        py = sorted((r["id"], r["__seq"]) for r in lake.read(t).to_pylist())
        duck = sorted(con.execute(f"SELECT id, __seq FROM delta_scan('{lake.table_uri(t)}')").fetchall())
        assert duck == py, t


FAMILIES_70 = '''
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*"]

[[cdc]]
family = "erp"
source = "dms"
location = "s3://{bucket}/dms/"
scd = 2
timestamp_column = "commit_ts"
keys = {{ "*" = ["id"] }}
columns = {{ "*" = ["commit_ts timestamp", "id int64", "v string", "n int64"] }}
'''


@pytest.fixture
def landing(lake, tmp_path):
    """Where DMS writes: a directory standing in for the bucket (fs), or an emulator bucket."""
    bucket = "landing-" + os.urandom(4).hex()
    if lake.backend == "fs":
        root = tmp_path / "objects"

        def put(key, body):
            """Write the object; returns when it was written (µs), as the ingest reads it."""
            p = root / bucket / key
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(body)
            return p.stat().st_mtime_ns // 1000
        return bucket, put, ["--objects", str(root)], None
    import boto3

    endpoint = os.environ["LAKESTREAM_TEST_S3_ENDPOINT"]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    s3.create_bucket(Bucket=bucket)
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint}

    def put(key, body):
        """Put the object; returns its `Last-Modified` (µs), as the ingest reads it."""
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        written = s3.head_object(Bucket=bucket, Key=key)["LastModified"]
        return (written - EPOCH) // dt.timedelta(microseconds=1)
    return bucket, put, [], env


# A scale test: one backend is enough (the emulator when the run has one, else the filesystem);
# the random streams above cover both backends.
@pytest.mark.parametrize("lake", backends()[-1:], indirect=True)
def test_a_family_of_70_debezium_tables_and_one_of_70_dms_tables_apply_end_to_end(lake, tmp_path, landing):
    bucket, put, objects_arg, env = landing
    lake.config.write_text(lake.config.read_text() + FAMILIES_70.format(bucket=bucket))
    rng = random.Random(f"{SEED}/cdc-70/{lake.backend}")
    clock = LsnClock(rng)
    crm = [Stream(rng, clock, "crm", "public", f"t{i:02}", changes=4, keys=3) for i in range(70)]
    erp = [DmsStream(rng, "dms/", "dbo", f"t{i:02}", files=2, keys=4) for i in range(70)]
    checker = Checker(lake.delta)
    dms = Checker(lake.delta, cols=DMS_COLS)

    # Debezium: the first half of every topic's messages in one event, refine, then the rest.
    for n, half in enumerate((lambda s: s.take(len(s.messages) // 2), lambda s: s.take(len(s.messages)))):
        batch = [(s, half(s)) for s in crm]
        path = tmp_path / f"crm-{n}.json"
        path.write_text(json.dumps(msk_event(batch)))
        lake.invoke(path)
        for s, messages in batch:
            s.landed(messages)
        out = json.loads(lake.cli("refine", "--json"))
        assert out, "refine ran no job"
        for s in crm:
            checker.check("crm", 1, s, f"after event {n}")

    # DMS: every full load in one SQS event, then every CDC file, shuffled, delivered twice,
    # then a task reload of every table (the full load written again, later).
    for s in erp:
        for key, body, _, _ in s.files:
            s.written[(key, etag(body))] = put(key, body)
    loads = [(key, body) for s in erp for key, body, _, load in s.files if load]
    cdc = [(key, body) for s in erp for key, body, _, load in s.files if not load]
    reloads = [(s.reload[0], s.reload[1]) for s in erp]
    rng.shuffle(cdc)
    for n, objs in enumerate((loads, cdc, cdc, reloads)):
        if objs is reloads:
            for s in erp:
                key, body = s.reload[0], s.reload[1]
                s.written[(key, etag(body))] = put(key, body)
        path = tmp_path / f"erp-{n}.json"
        path.write_text(json.dumps(sqs_event(bucket, objs)))
        out = lake.invoke(path, "s3-logs", objects_arg) if env is None else json.loads(
            lake.cli("invoke", "s3-logs", "--event", path, env=env))
        assert out["response"]["batchItemFailures"] == [], out
        for s in erp:
            for key, body in objs:
                s.landed(key, body)
        lake.cli("refine")
        for s in erp:
            dms.check("erp", 2, s, f"after delivery {n}")
    # Every DMS row landed once in bronze (rows in = bronze rows; nothing was bad).
    for s in erp[:5]:
        rows = lake.read(f"bronze/erp/dbo/{s.table}").to_pylist()
        assert sorted((r["__object"], r["__etag"], r["__row"]) for r in rows) == sorted(
            (f"{bucket}/{k}", tag, row[1]) for (k, tag), (rs, _) in s.delivered.items() for row in rs)
        # The reload's values are silver's current rows.
        current = {r["id"]: r["v"] for r in lake.read(f"silver/erp/dbo/{s.table}").to_pylist() if r["__END_SEQ"] is None}
        assert current == {k: v for _, _, _, k, v, _ in s.reload[2]}, s.table
    names = lake.cli("tables")
    assert sum(f"silver/crm/public/t{i:02}" in names for i in range(70)) == 70
    assert sum(f"silver/erp/dbo/t{i:02}" in names for i in range(70)) == 70
    duckdb_agrees(lake, [silver_name("crm", s) for s in crm[:3]] + [f"silver/erp/dbo/{s.table}" for s in erp[:3]])


def remove_objects(lake, relative):
    """Delete the lake's objects under `relative` (a table, or one file): what log cleanup or an
    operator deleting a table does."""
    if lake.backend == "fs":
        path = pathlib.Path(lake.root) / relative
        shutil.rmtree(path) if path.is_dir() else path.unlink()
        return
    import boto3

    s3 = boto3.client("s3", endpoint_url=os.environ["LAKESTREAM_TEST_S3_ENDPOINT"], region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    prefix = f"{lake.prefix}/{relative}"
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=S3_BUCKET, Prefix=prefix)
            for o in page.get("Contents", [])]
    for k in keys:
        s3.delete_object(Bucket=S3_BUCKET, Key=k)


def test_a_family_silver_is_rebuilt_after_bronze_log_cleanup_by_the_name_lag_prints(lake, tmp_path):
    """Issue 37 (4): 30 days on, bronze's early log is gone (a checkpoint, then commits 0.. removed
    as log cleanup does). A silver deleted then, or rebuilt with `lakestream refine JOB --rebuild`
    under the job name `lag` prints, is built again from bronze's snapshot and equals the
    reference; `--skip-to` on it names the command that works."""
    lake.config.write_text(lake.config.read_text() + STREAMS_CONF)
    rng = random.Random(f"{SEED}/cdc-rebuild/{lake.backend}")
    (_, _, shop), (_, _, audit) = two_families(rng, changes=12, tables=1)
    checker = Checker(lake.delta)
    for n in range(3):  # three events: bronze gets three commits
        batch = [(s, s.take(len(s.messages) // 3 + 1)) for s in shop + audit]
        path = tmp_path / f"ev-{n}.json"
        path.write_text(json.dumps(msk_event(batch)))
        lake.invoke(path)
        for s, messages in batch:
            s.landed(messages)
    lake.cli("refine")
    for family, scd, s in (("shop", 1, shop[0]), ("audit", 2, audit[0])):
        checker.check(family, scd, s, "first apply")
    lag = lake.cli("lag")
    for family, scd, s in (("shop", 1, shop[0]), ("audit", 2, audit[0])):
        bronze = f"bronze/{family}/{s.schema}/{s.table}"
        job = f"cdc-{family}/{s.schema}.{s.table}"
        assert job in lag, lag
        dt = lake.delta(bronze)
        dt.create_checkpoint()
        for v in range(dt.version()):
            remove_objects(lake, f"{bronze}/_delta_log/{v:020}.json")
        # Deleted silver: the next apply builds it from bronze's snapshot.
        remove_objects(lake, silver_name(family, s))
        lake.cli("refine", job)
        fresh = Checker(lake.delta)
        fresh.check(family, scd, s, "silver deleted, rebuilt from the snapshot")
        # --rebuild in place, by the name `lag` prints.
        out = lake.cli("refine", job, "--rebuild")
        assert "emptied" in out, out
        Checker(lake.delta).check(family, scd, s, "after --rebuild")
        err = lake.run("refine", job, "--skip-to", f"{bronze}=0")
        assert err.returncode != 0 and f"lakestream refine {job} --rebuild" in err.stderr, err.stderr
