"""Helpers of the sec-names tests (issue 24 defects 1 and 2): access-log lines with a chosen bucket
field, SQS events naming objects, and listings of everything a lake run wrote (the directory
around a filesystem lake, the whole emulator bucket around an S3 lake)."""
import base64
import json
import os
import subprocess

from lake_support import BIN, ROOT

S3_BUCKET = "lakestream-test"


def log_line(bucket, n=1):
    """One valid access-log line whose `bucket` field is `bucket` (request id `REQ<n>`)."""
    return (f"79a59df900b949e55d96a1e698fbaced {bucket} [29/Nov/2026:10:00:{n % 60:02} +0000] 192.0.2.1 "
            f"arn:aws:iam::123456789012:user/a REQ{n:04} REST.GET.OBJECT k{n} \"GET /k{n} HTTP/1.1\" 200 - "
            f"{n} 10 1 1 \"-\" \"ua\" -")


def sqs_event(path, objects, etags=None):
    """Write a Lambda SQS event to `path`: one message per (bucket, key) in `objects`, with the
    eTag `etags[(bucket, key)]` (S3 always sends one; an `--objects` directory does not check it)."""
    records = []
    for i, (bucket, key) in enumerate(objects):
        etag = (etags or {}).get((bucket, key), "0123456789abcdef0123456789abcdef")
        body = {"Records": [{
            "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
            "eventTime": "2026-11-29T10:00:05.000Z", "eventName": "ObjectCreated:Put",
            "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                   "object": {"key": key, "size": 1, "eTag": etag}}}]}
        records.append({"messageId": f"msg-{i}", "receiptHandle": f"rh-{i}", "body": json.dumps(body),
                        "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:raw-logs-notifications",
                        "awsRegion": "us-east-1"})
    path.write_text(json.dumps({"Records": records}))
    return path


def put_objects(objects_dir, objects):
    """Write `{(bucket, key): text}` under `objects_dir/<bucket>/<key>` (the `--objects` layout)."""
    for (bucket, key), text in objects.items():
        p = objects_dir / bucket / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return objects_dir


def invoke_s3_logs(lake, event, objects_dir=None, env=None):
    """`lakestream invoke s3-logs` on `lake`; returns (returncode, parsed stdout or None, stderr)."""
    cmd = [BIN, "invoke", "s3-logs", "--event", str(event), "--config", str(lake.config)]
    if objects_dir is not None:
        cmd += ["--objects", str(objects_dir)]
    full_env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_REGION": "us-east-1", **(env or {})}
    if os.environ.get("LAKESTREAM_TEST_S3_ENDPOINT"):
        full_env["AWS_ENDPOINT_URL"] = os.environ["LAKESTREAM_TEST_S3_ENDPOINT"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=full_env, cwd=ROOT)
    body = json.loads(out.stdout) if out.returncode == 0 else None
    return out.returncode, body, out.stderr


def s3_client():
    import boto3

    return boto3.client("s3", endpoint_url=os.environ["LAKESTREAM_TEST_S3_ENDPOINT"], region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


def bucket_keys(bucket=S3_BUCKET):
    """Every key of an emulator bucket."""
    s3 = s3_client()
    keys = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys |= {o["Key"] for o in page.get("Contents", [])}
    return keys


def lake_prefix(lake):
    """`pytest-xxx` of an S3 lake root `s3://lakestream-test/pytest-xxx`."""
    return lake.root.split("/", 3)[3]


def rows(lake, table):
    return lake.read(table).to_pylist()


def raw(letter):
    """The raw bytes a dead letter kept."""
    return base64.b64decode(letter["raw_base64"]) if letter["raw_base64"] else None


def directories_under(directory):
    """Every directory below `directory` (relative, sorted): a table open may leave an empty one."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_dir())
