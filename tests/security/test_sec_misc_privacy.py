"""Issue 24 follow-up (sec-misc B): partition values are record values. `raw/member` is partitioned
by `order_owner`; with card-like owners, compaction through `lakestream optimize` and the
maintenance handler (`lakestream invoke maintenance`) — a clean run and one whose storage read
fails on a data file under `order_owner=<card>/` — prints no card on stdout or stderr at the
default log level (the partition is named by index, the storage error's path segment is blanked)."""
import base64
import json
import os
import pathlib
import subprocess
import time
import urllib.parse

from lake_support import BIN
from secnames import S3_BUCKET, bucket_keys, lake_prefix, s3_client

# Card-like owners whose digits come in short runs (the 8-digit rule of scrub does not catch them).
CARDS = ["4111-1111-1111-1111", "5555-5555-5555-4444"]


def leaks(text):
    forms = set(CARDS) | {urllib.parse.quote(c) for c in CARDS} | {c.replace("-", "") for c in CARDS}
    return [f for f in forms if f in text]


def members_event(path, offset):
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600))
    recs = [{"topic": "members", "partition": 0, "offset": offset + i, "timestamp": 0,
             "timestampType": "CREATE_TIME", "headers": [],
             "value": base64.b64encode(json.dumps({"order_owner": c, "membership": "gold",
                                                    "timestamp": iso}).encode()).decode()}
            for i, c in enumerate(CARDS)]
    path.write_text(json.dumps({"eventSource": "aws:kafka", "eventSourceArn": "arn:aws:kafka:us-east-1:1:cluster/x/y",
                                "bootstrapServers": "b-1:9098", "records": {"members-0": recs}}))
    return path


def run(lake, *args):
    env = dict(os.environ)
    env.pop("RUST_LOG", None)  # the default level, as deployed
    out = subprocess.run([BIN, *args, "--config", str(lake.config)], capture_output=True, text=True,
                         check=False, env=env)
    return out.returncode, out.stdout + out.stderr


def member_files(lake, owner):
    if lake.backend == "fs":
        d = pathlib.Path(lake.root) / "raw" / "member" / f"order_owner={owner}"
        return sorted(str(p) for p in d.glob("*.parquet"))
    prefix = f"{lake_prefix(lake)}/raw/member/order_owner={owner}/"
    return sorted(k for k in bucket_keys() if k.startswith(prefix) and k.endswith(".parquet"))


def remove(lake, f):
    if lake.backend == "fs":
        os.remove(f)
    else:
        s3_client().delete_object(Bucket=S3_BUCKET, Key=f)


def test_compaction_of_card_like_partitions_prints_no_card(lake, tmp_path):
    for i in range(3):
        code, out = run(lake, "invoke", "msk", "--event", str(members_event(tmp_path / f"m{i}.json", 10 * i)))
        assert code == 0, out
    assert len(member_files(lake, CARDS[0])) == 3

    # A clean compaction of both partitions.
    code, out = run(lake, "optimize", "raw/member", "--min-files", "2")
    assert code == 0, out
    assert "2 partitions compacted" in out, out
    assert not leaks(out), out

    # A compaction whose read of a data file fails: the error names the object, not the value.
    compacted = set(member_files(lake, CARDS[0]))
    for i in range(3, 5):
        code, out = run(lake, "invoke", "msk", "--event", str(members_event(tmp_path / f"m{i}.json", 10 * i)))
        assert code == 0, out
    new = sorted(set(member_files(lake, CARDS[0])) - compacted)
    assert len(new) == 2
    remove(lake, new[0])  # a live file of the partition
    code, out = run(lake, "optimize", "raw/member", "--min-files", "2")
    assert code != 0 and "raw/member" in out, out
    assert not leaks(out), out

    event = tmp_path / "optimize.json"
    event.write_text(json.dumps({"job": "optimize", "tables": ["raw/member"], "min_files": 2}))
    code, out = run(lake, "invoke", "maintenance", "--event", str(event))
    assert "raw/member" in out, out
    assert not leaks(out), out
