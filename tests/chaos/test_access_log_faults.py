"""Access-log ingestion under faults, driven through a real SQS queue on the emulator the way
Lambda's event source mapping drives it: receive, invoke, delete what succeeded, let failures
and lost acknowledgements reappear after the visibility timeout. S3 reads and table writes go
through the fault proxy; notifications are duplicated, one object is overwritten after its
first notification, one notified object does not exist. Every line is then compared."""
import json
import time
import uuid

import boto3

from chaoslib import MOTO, ChaosLake, record, rng, scaled

OBSERVED = "shop-assets"  # the bucket whose accesses are logged (the table access_logs/shop-assets)


def client(kind):
    return boto3.client(kind, endpoint_url=MOTO, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


def line(request_id, n):
    return (f"79a59df900b949e55d96a1e698fbaced {OBSERVED} [30/Nov/2026:10:{n % 60:02}:{n * 7 % 60:02} +0000] "
            f"192.0.2.3 arn:aws:iam::123456789012:user/chaos {request_id} REST.GET.OBJECT img/{n}.png "
            f'"GET /{OBSERVED}/img/{n}.png HTTP/1.1" 200 - {n * 31} 4096 {n % 90} {n % 40} "-" '
            '"chaos/1.0" - hostid= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader '
            f"{OBSERVED}.s3.us-east-1.amazonaws.com TLSv1.3 - -")


def notification(bucket, key, etag):
    return json.dumps({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": "2026-11-30T10:00:00.000Z", "eventName": "ObjectCreated:Put",
        "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
               "object": {"key": key, "size": 1, "eTag": etag}}}]})


def test_access_logs_under_faults_commit_every_line_once(tmp_path, faulty):
    lake = ChaosLake(tmp_path, faulty.url, "logs")
    r = rng("logs")
    s3, sqs = client("s3"), client("sqs")
    src = f"chaos-logs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=src)
    expected, bad_lines, bodies = {}, set(), []
    n = 0
    for i in range(scaled(14)):
        key = f"logs/2026-11-30-10-{i:02}-00-{uuid.uuid4().hex[:16].upper()}"
        lines = []
        for _ in range(25):
            n += 1
            rid = f"REQ{n:06}"
            lines.append(line(rid, n))
            expected[rid] = f"s3://{src}/{key}"
        if i % 4 == 1:  # a line no parser accepts: a dead letter with its object and line number
            lines.insert(3, "garbage that is not an access log line")
            bad_lines.add((f"s3://{src}/{key}", 4))
        etag = s3.put_object(Bucket=src, Key=key, Body="\n".join(lines).encode())["ETag"].strip('"')
        bodies.append(notification(src, key, etag))
        if r.random() < 0.3:
            bodies.append(notification(src, key, etag))  # S3 delivers notifications at least once
    # Overwritten after its notification: the old version's notification is superseded.
    key = "logs/2026-11-30-11-00-00-OVERWRITTEN0000"
    old = s3.put_object(Bucket=src, Key=key, Body=line("OLD000001", 1).encode())["ETag"].strip('"')
    new_lines = [line(f"NEW{k:06}", k) for k in range(1, 6)]
    new = s3.put_object(Bucket=src, Key=key, Body="\n".join(new_lines).encode())["ETag"].strip('"')
    expected.update({f"NEW{k:06}": f"s3://{src}/{key}" for k in range(1, 6)})
    bodies += [notification(src, key, old), notification(src, key, new)]
    missing = f"s3://{src}/logs/never-written"
    bodies.append(notification(src, "logs/never-written", "0123456789abcdef0123456789abcdef"))
    r.shuffle(bodies)

    queue = sqs.create_queue(QueueName=f"chaos-{uuid.uuid4().hex[:8]}",
                             Attributes={"VisibilityTimeout": "2"})["QueueUrl"]
    for b in bodies:
        sqs.send_message(QueueUrl=queue, MessageBody=b)
    lost_acks = batches = receives = 0
    deadline = time.monotonic() + 600
    idle_since = time.monotonic()
    while time.monotonic() < deadline:
        msgs = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=3, WaitTimeSeconds=1,
                                   VisibilityTimeout=2).get("Messages", [])
        if not msgs:
            # Drained once nothing came back for longer than the visibility timeout.
            if time.monotonic() - idle_since > 4:
                break
            continue
        idle_since = time.monotonic()
        batches += 1
        receives += len(msgs)
        event = {"Records": [{
            "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1795939205000",
                           "SenderId": "AIDAEXAMPLE", "ApproximateFirstReceiveTimestamp": "1795939205100"},
            "messageAttributes": {}, "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:chaos", "awsRegion": "us-east-1",
        } for m in msgs]}
        path = lake.write_event(f"sqs-{batches}", event)
        out = lake.run(["invoke", "s3-logs", "--event", str(path)], env={"LAKESTREAM_LOG_BUCKETS": src})
        if out.returncode != 0:
            continue  # the whole batch reappears after the visibility timeout
        failed = {f["itemIdentifier"] for f in json.loads(out.stdout)["response"]["batchItemFailures"]}
        for m in msgs:
            if m["MessageId"] in failed:
                continue
            if r.random() < 0.2:
                lost_acks += 1  # the function succeeded but the delete never happened
                continue
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
    else:
        raise AssertionError("the queue did not drain in 10 minutes")

    with faulty.paused():
        rows = lake.rows(f"access_logs/{OBSERVED}")
        letters = lake.rows("dead_letters")
    got = [x["request_id"] for x in rows]
    dup = len(got) - len(set(got))
    assert dup == 0, f"{dup} duplicate lines"
    assert set(got) == set(expected), (f"{len(set(expected) - set(got))} lines lost, "
                                       f"{len(set(got) - set(expected))} unexpected (e.g. the superseded version)")
    assert all(x["log_object"] == expected[x["request_id"]] for x in rows)
    line_letters = [(x["object_uri"], x["line_number"]) for x in letters if x["line_number"] is not None]
    assert sorted(line_letters) == sorted(bad_lines)
    whole = {x["object_uri"]: x["error"] for x in letters if x["line_number"] is None}
    assert "overwritten" in whole.pop(f"s3://{src}/{key}")
    assert missing in whole and len(whole) == 1, whole
    assert receives > len(bodies), "nothing was redelivered: lost acknowledgements should reappear"
    record("access_log_faults", notifications=len(bodies), sqs_batches=batches, sqs_receives=receives, invocations=lake.invocations,
           failed_invocations=lake.failed, lost_acks=lost_acks, requests=faulty.counts["requests"],
           **faulty.faults(), lines_sent=len(expected) + len(bad_lines), rows_read_back=len(got),
           dead_letters=len(letters), duplicates=dup)
