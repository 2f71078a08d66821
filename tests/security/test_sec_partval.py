"""Issue 24 follow-up: a partition value too long for the store fails its record, not the batch.

Partition values come from records and become object keys (`raw/member/order_owner=<value>/
part-....parquet`). A `members` record whose `order_owner` is 1100 characters makes a key over S3's
1024-byte limit (S3 answers 400 KeyTooLongError, which used to be retried until the batch went to
the failed-batches bucket with the good records); on a filesystem lake a 300-character value is a
single path segment over the 255-byte name limit (a permanent error that used to dead-letter every
`raw/member` record of the batch). Each test sends good and over-long records in one MSK event and
asserts: the good ones are written, only the over-long ones are dead-lettered (raw bytes and the
reason class `partition-value-too-long`), the invocation succeeds, no object or directory carries
the long value, and a redelivery of the same event writes nothing new."""
import base64
import json
import os
import subprocess
from urllib.parse import urlparse

from deltalake import DeltaTable

from lake_support import BIN, files_under

LONG_S3 = "A" * 1100  # key over S3's 1024 bytes (and a segment over 255)
LONG_FS = "B" * 300  # one path segment over the file system's 255-byte name limit


def owners(backend):
    good = ["alice", "bob"]
    bad = [LONG_S3] + ([LONG_FS] if backend == "fs" else [])
    return [good[0], bad[0], good[1], *bad[1:]], bad


def msk_event(values):
    recs = [{"topic": "members", "partition": 0, "offset": 10 + i, "timestamp": 1764547200000,
             "timestampType": "CREATE_TIME", "key": None,
             "value": base64.b64encode(json.dumps(v).encode()).decode(), "headers": []}
            for i, v in enumerate(values)]
    return {"eventSource": "aws:kafka",
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/c/x",
            "bootstrapServers": "b-1:9098", "records": {"members-0": recs}}


def invoke(lake, event_path):
    out = subprocess.run([BIN, "invoke", "msk", "--event", str(event_path), "--config", str(lake.config)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def rows(lake, table):
    return DeltaTable(lake.table_uri(table),
                      storage_options=lake.storage_options or None).to_pyarrow_table().to_pylist()


def stored_keys(lake):
    """Every file (fs) or object key (S3) under the lake root."""
    if lake.backend == "fs":
        return files_under(lake.root)
    import boto3
    url = urlparse(lake.root)
    s3 = boto3.client("s3", endpoint_url=os.environ["LAKESTREAM_TEST_S3_ENDPOINT"],
                      aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=url.netloc, Prefix=url.path.lstrip("/") + "/"):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def test_long_partition_value_dead_letters_only_its_record(lake, tmp_path):
    names, bad = owners(lake.backend)
    values = [{"order_owner": n, "membership": "gold", "timestamp": "2026-12-01T00:00:00Z"} for n in names]
    event = tmp_path / "members.json"
    event.write_text(json.dumps(msk_event(values)))

    report = invoke(lake, event)
    assert report["received"] == len(names)
    assert report["written"] == 2
    assert report["dead_lettered"] == len(bad)
    assert report["received"] == report["written"] + report["dead_lettered"] + report["duplicates"]

    written = rows(lake, "raw/member")
    assert sorted(r["order_owner"] for r in written) == ["alice", "bob"]

    letters = rows(lake, "dead_letters")
    assert len(letters) == len(bad)
    by_raw = {base64.b64decode(l["raw_base64"]): l for l in letters}
    for i, name in enumerate(names):
        if name not in bad:
            continue
        raw = json.dumps(values[i]).encode()
        assert raw in by_raw, f"the raw bytes of the {len(name)}-char owner are not dead-lettered"
        letter = by_raw[raw]
        assert letter["offset"] == 10 + i and letter["topic"] == "members"
        assert letter["target_table"] == "raw/member"
        assert "partition value too long" in letter["error"], letter["error"]
        assert name not in letter["error"], "the reason repeats the value"

    # No key or directory carries the long values; the good partitions exist.
    keys = stored_keys(lake)
    assert not [k for k in keys if "AAAAAAAAAA" in k or "BBBBBBBBBB" in k], keys
    assert any("order_owner=alice/" in k for k in keys) and any("order_owner=bob/" in k for k in keys)

    # A redelivery of the same event writes nothing new.
    again = invoke(lake, event)
    assert again["written"] == 0 and again["dead_lettered"] == 0
    assert again["duplicates"] == len(names)
    assert len(rows(lake, "raw/member")) == 2
    assert len(rows(lake, "dead_letters")) == len(bad)
    assert stored_keys(lake) == keys
