"""Issue 24 audit follow-up (sec-etag): what marks an access-log object as ingested is the object
actually read (its key as stored, the ETag S3 answered with), not the notification's text. After
an object is ingested, a notification without an eTag (S3 always sends one: dead-lettered with the
reason), one with a quoted eTag, and the EventBridge form with a percent-encoded key add no rows.
Runs the real binary on a filesystem lake (`--objects`) and on the emulator (S3 GETs)."""
import json
import uuid

from secnames import invoke_s3_logs, log_line, put_objects, rows, s3_client

SOURCE = "raw-logs"


def s3_record(bucket, key, etag):
    obj = {"key": key, "size": 1}
    if etag is not None:
        obj["eTag"] = etag
    return {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
                         "eventTime": "2026-11-29T10:00:05.000Z", "eventName": "ObjectCreated:Put",
                         "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": bucket}, "object": obj}}]}


def eventbridge(bucket, key, etag):
    return {"version": "0", "detail-type": "Object Created", "source": "aws.s3",
            "detail": {"bucket": {"name": bucket}, "object": {"key": key, "size": 1, "etag": etag}}}


def event(path, bodies):
    path.write_text(json.dumps({"Records": [
        {"messageId": f"msg-{i}", "receiptHandle": f"rh-{i}", "body": json.dumps(b), "attributes": {},
         "messageAttributes": {}, "eventSource": "aws:sqs", "awsRegion": "us-east-1",
         "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:raw-logs-notifications"}
        for i, b in enumerate(bodies)]}))
    return path


def test_forged_notifications_do_not_ingest_an_object_again(lake, tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    name = uuid.uuid4().hex[:8]
    key = f"logs/my logs/{name}+a.log"  # a space and a plus: S3 and EventBridge encode both
    bucket_field = f"etag-{name}"
    text = "".join(log_line(bucket_field, n) + "\n" for n in range(1, 4))
    if lake.backend == "fs":
        objects = put_objects(work / "objects", {(SOURCE, key): text})
        etag = "0123456789abcdef0123456789abcdef"  # the directory has no versions: not checked
    else:
        objects = None
        s3 = s3_client()
        s3.create_bucket(Bucket=SOURCE)
        etag = s3.put_object(Bucket=SOURCE, Key=key, Body=text.encode())["ETag"].strip('"')
    form_key = key.replace("+", "%2B").replace(" ", "+")  # as S3 notifications send it
    code, out, err = invoke_s3_logs(lake, event(work / "first.json", [s3_record(SOURCE, form_key, etag)]), objects)
    assert code == 0, err
    table = f"access_logs/{bucket_field}"
    assert len(rows(lake, table)) == 3

    forged = [
        s3_record(SOURCE, form_key, None),                               # no eTag
        s3_record(SOURCE, form_key, f'"{etag}"'),                        # quoted eTag
        eventbridge(SOURCE, key.replace(" ", "%20").replace("+", "%2B"), etag),  # percent-encoded key
    ]
    code, out, err = invoke_s3_logs(lake, event(work / "forged.json", forged), objects)
    assert code == 0, err
    assert out["response"]["batchItemFailures"] == [], out
    assert out["report"]["objects"]["rows_written"] == 0, out
    got = rows(lake, table)
    assert len(got) == 3, "each line of the object once"
    assert sorted(r["request_id"] for r in got) == ["REQ0001", "REQ0002", "REQ0003"]
    assert all(r["log_object"] == f"s3://{SOURCE}/{key}" for r in got)
    # Counts add up: 3 lines -> 3 rows; the notification without an eTag is a dead letter.
    letters = rows(lake, "dead_letters")
    assert len(letters) == 1, letters
    assert "eTag" in letters[0]["error"] and letters[0]["object_uri"] == "sqs-message:msg-0", letters[0]
