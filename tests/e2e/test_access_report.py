"""`lakestream report access` over access logs the test wrote (through the s3-log-ingest handler):
the dataset read most ranks first, one never read is flagged, the age of the data read comes
from the dates in the keys, and the HTML page is self-contained and well formed (rendered by
headless Chromium when it is installed)."""
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

from lake_support import BIN

OWNER = "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be"


def line(n, op, key, requester="arn:aws:iam::123456789012:user/alice", status=200, sent=1000, day=29):
    verb = {"REST.GET.OBJECT": "GET", "REST.PUT.OBJECT": "PUT"}[op]
    return (f'{OWNER} lake-hot [{day:02d}/Nov/2026:08:{n // 60:02d}:{n % 60:02d} +0000] 203.0.113.7 {requester} '
            f'REQ{n:05d} {op} {key} "{verb} /lake-hot/{key} HTTP/1.1" {status} - {sent} {sent} 12 10 "-" '
            f'"aws-cli/2.15.0" - hostid= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader '
            f'lake-hot.s3.us-east-1.amazonaws.com TLSv1.2 - - us-east-1\n')


def notification(key):
    body = {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
                         "eventTime": "2026-11-29T09:00:00.000Z", "eventName": "ObjectCreated:Put",
                         "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": "raw-logs", "arn": "arn:aws:s3:::raw-logs"},
                                "object": {"key": key, "size": 1, "eTag": "0123456789abcdef0123456789abcdef"}}}]}
    return {"Records": [{"messageId": "m-1", "receiptHandle": "r-1", "body": json.dumps(body),
                         "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                         "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
                         "awsRegion": "us-east-1"}]}


def cli(lake, *args):
    return lake.cli(*args)


def test_the_most_read_dataset_ranks_first_and_the_unread_one_is_flagged(lake, tmp_path):
    key = "logs/2026-11-29-09-00-00-ABCDEF012345"
    lines = [line(i, "REST.GET.OBJECT", "hot/2026/11/a.parquet", requester=f"user-{i % 2}") for i in range(5)]
    lines += [line(10, "REST.PUT.OBJECT", "warm/x.parquet", day=1), line(11, "REST.GET.OBJECT", "warm/x.parquet")]
    lines += [line(12, "REST.PUT.OBJECT", "cold/2025/01/data.parquet"), line(13, "REST.GET.OBJECT", "hot/2026/11/b.parquet", status=404, sent=0)]
    obj = tmp_path / "objects" / "raw-logs" / key
    obj.parent.mkdir(parents=True)
    obj.write_text("".join(lines))
    event = tmp_path / "event.json"
    event.write_text(json.dumps(notification(key)))
    out = subprocess.run([BIN, "invoke", "s3-logs", "--event", str(event), "--objects", str(tmp_path / "objects"),
                          "--config", str(lake.config)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr

    html = tmp_path / "report.html"
    r = json.loads(cli(lake, "report", "access", "--since", "3650", "--depth", "1", "--json", "--html", str(html)))
    assert r["rows"] == 9
    first = r["datasets"][0]
    assert (first["bucket"], first["dataset"]) == ("lake-hot", "hot")
    assert (first["reads"], first["errors"], first["requesters"], first["bytes_sent"]) == (6, 1, 3, 5000)
    # hot/2026/11 read on 29 Nov: 28 days after the date in its key.
    assert first["age"] == {"new": 0, "recent": 6, "old": 0, "unknown": 0}
    warm = next(d for d in r["datasets"] if d["dataset"] == "warm")
    assert (warm["reads"], warm["writes"]) == (1, 1)
    assert warm["age"] == {"new": 0, "recent": 1, "old": 0, "unknown": 0}, "first written 1 Nov, read 29 Nov"
    assert [(b, d) for b, d, _ in r["cold"]] == [("lake-hot", "cold")]
    [bucket] = r["buckets"]
    assert (bucket["requests"], bucket["reads"], bucket["writes"]) == (9, 7, 2)

    page = html.read_text()
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page and "<script" not in page
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(svgs) == 2
    reads = ET.fromstring(svgs[0])
    assert len([e for e in reads.iter() if e.tag.endswith("rect")]) == 2  # hot, warm (cold has no reads)
    assert "<td>lake-hot</td><td>cold</td><td>no read in the window</td>" in page.split("candidates for cheaper storage")[1]
    if shutil.which("chromium"):
        dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", html.as_uri()],
                             capture_output=True, text=True, timeout=120, check=False)
        assert "Who reads the lake" in dom.stdout and "lake-hot/hot" in dom.stdout
