"""Partition values from records become symlink-manifest directories (issue 24 defect 7): a
member record's `order_owner` (raw/member is partitioned by it) carrying `/`, `..`, `=`, `:`,
`%` or non-ASCII must give one Hive-escaped directory per value, inside the table's
`_symlink_format_manifest/`, and nothing outside the lake; each manifest lists only the data
files holding that value."""
import base64
import json
import subprocess

import pyarrow.parquet as pq

from lake_support import BIN, EXAMPLE, files_under

HOSTILE = {
    "../../../outside": "..%2F..%2F..%2Foutside",
    "a/b=c": "a%2Fb%3Dc",
    "12:30": "12%3A30",
    "100%": "100%25",
    "Zoë 東京": "Zoë 東京",
    "..": "..",
}


def members_event(owners):
    records = []
    for i, owner in enumerate(owners):
        value = json.dumps({"order_owner": owner, "membership": "gold", "timestamp": "2026-11-29T08:00:00Z"})
        records.append({"topic": "members", "partition": 0, "offset": 100 + i, "timestamp": 1764403200000,
                        "timestampType": "CREATE_TIME", "key": None,
                        "value": base64.b64encode(value.encode()).decode(), "headers": []})
    return {"eventSource": "aws:kafka", "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/c/1",
            "bootstrapServers": "b-1:9098", "records": {"members-0": records}}


def test_hostile_partition_values_stay_in_one_escaped_manifest_directory_each(sandbox):
    lake = sandbox / "lake"
    config = sandbox / "lakestream.toml"
    config.write_text(EXAMPLE.replace('root = "./lake"', f'root = "{lake}"'))
    event = sandbox / "event.json"
    event.write_text(json.dumps(members_event(list(HOSTILE))))
    for args in (["invoke", "msk", "--event", str(event)], ["manifest", "raw/member"]):
        out = subprocess.run([BIN, *args, "--config", str(config)], capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr

    outside = [f for f in files_under(sandbox) if not f.startswith("lake/") and f not in ("lakestream.toml", "event.json")]
    assert outside == [], f"written outside the lake: {outside}"
    root = lake / "raw/member/_symlink_format_manifest"
    manifests = sorted(str(p.relative_to(root)) for p in root.rglob("manifest"))
    assert manifests == sorted(f"order_owner={d}/manifest" for d in HOSTILE.values()), manifests
    for owner, escaped in HOSTILE.items():
        lines = (root / f"order_owner={escaped}" / "manifest").read_text().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"file://{lake}/raw/member/"), lines
        path = lines[0][len("file://"):]
        assert pq.read_table(path).num_rows == 1, f"{owner}: {path}"
