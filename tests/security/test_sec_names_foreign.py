"""Issue 24 defect 2: a notification names the object s3-log-ingest reads. Only the configured
raw-logs bucket(s) (`access_logs.source_buckets`, or `LAKESTREAM_LOG_BUCKETS`, which the template
sets to the raw-logs bucket) are read; a notification naming another bucket — the lake's own,
with its config object and the credentials in it — is dead-lettered without a GET, the reason
naming the bucket and the setting. The CLI's `--objects` directory refuses absolute keys and `..`.
Runs the real binary on a filesystem lake (the sandbox around it walked) and on the emulator."""
import base64
import uuid

from lake_support import delta_tables_under
from secnames import (bucket_keys, invoke_s3_logs, lake_prefix, log_line, put_objects, rows, s3_client,
                      sqs_event)

SOURCE = "raw-logs"  # the example config's source bucket


def every_value(lake, sandbox=None):
    """Every value of every table of the lake (raw bytes of dead letters decoded), as one text."""
    if lake.backend == "fs":
        tables = delta_tables_under(sandbox / "lake")
    else:
        prefix = lake_prefix(lake) + "/"
        tables = sorted({k[len(prefix):k.index("/_delta_log/")] for k in bucket_keys()
                         if k.startswith(prefix) and "/_delta_log/" in k})
    text = []
    for t in tables:
        for r in rows(lake, t):
            text.append(repr(r))
            if r.get("raw_base64"):
                text.append(base64.b64decode(r["raw_base64"]).decode("utf-8", "replace"))
    return tables, "\n".join(text)


def test_a_notification_naming_a_foreign_bucket_is_dead_lettered_without_a_get(lake, sandbox, tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    secret = f"SECRET-{uuid.uuid4().hex}"
    ok_key = f"logs/{uuid.uuid4().hex}.log"
    valid = log_line("observed-bucket", 1) + "\n"
    # The foreign object is a valid log (its lines would land) with a secret in it.
    foreign_text = (log_line("stolen-bucket", 1).replace(" k1 ", f" {secret} ") + "\n"
                    f'aws_secret_access_key = "{secret}"\n')
    if lake.backend == "fs":
        objects = put_objects(work / "objects", {(SOURCE, ok_key): valid,
                                                 ("lake-bucket", "lake/_config/lakestream.toml"): foreign_text})
        foreign, etags = [("lake-bucket", "lake/_config/lakestream.toml")], {}
    else:
        objects, etags = None, {}
        s3 = s3_client()
        s3.create_bucket(Bucket=SOURCE)
        etags[(SOURCE, ok_key)] = s3.put_object(Bucket=SOURCE, Key=ok_key, Body=valid.encode())["ETag"].strip('"')
        # The lake's own config object, and a bucket that does not exist: a GET of it would fail
        # (retryable: the message would be listed for retry), so an acknowledged letter shows no GET.
        config_key = f"{lake_prefix(lake)}/_config/lakestream.toml"
        s3.put_object(Bucket="lakestream-test", Key=config_key, Body=foreign_text.encode())
        foreign = [("lakestream-test", config_key), (f"no-such-bucket-{uuid.uuid4().hex[:8]}", "x.log")]
    event = sqs_event(work / "event.json", [(SOURCE, ok_key), *foreign], etags)

    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0, err
    assert out["response"]["batchItemFailures"] == [], "nothing to retry: a foreign object is refused for good"
    outcomes = dict(out["report"]["objects"]["objects"])
    assert outcomes[f"s3://{SOURCE}/{ok_key}"]["outcome"] == "committed"
    for bucket, key in foreign:
        assert outcomes[f"s3://{bucket}/{key}"]["outcome"] == "refused", outcomes
    assert rows(lake, "access_logs/observed-bucket")[0]["log_object"] == f"s3://{SOURCE}/{ok_key}"

    tables, text = every_value(lake, sandbox)
    assert secret not in text, "no copy of the foreign object in any table"
    assert sorted(tables) == ["access_logs/observed-bucket", "dead_letters"]
    letters = {r["object_uri"]: r for r in rows(lake, "dead_letters")}
    assert sorted(letters) == sorted(f"s3://{b}/{k}" for b, k in foreign)
    for bucket, key in foreign:
        error = letters[f"s3://{bucket}/{key}"]["error"]
        assert f"`{bucket}`" in error and "source_buckets" in error and "LAKESTREAM_LOG_BUCKETS" in error, error


def test_the_cli_honours_log_buckets_from_the_environment(lake, tmp_path_factory):
    """`LAKESTREAM_LOG_BUCKETS` (what the template sets) replaces `access_logs.source_buckets`."""
    work = tmp_path_factory.mktemp("work")
    objects = put_objects(work / "objects", {("other-logs", "a.log"): log_line("seen-by-other", 1) + "\n",
                                             (SOURCE, "b.log"): log_line("seen-by-raw", 2) + "\n"})
    event = sqs_event(work / "event.json", [("other-logs", "a.log"), (SOURCE, "b.log")])
    code, out, err = invoke_s3_logs(lake, event, objects, env={"LAKESTREAM_LOG_BUCKETS": "other-logs, third-logs"})
    assert code == 0, err
    outcomes = dict(out["report"]["objects"]["objects"])
    assert outcomes["s3://other-logs/a.log"]["outcome"] == "committed"
    assert outcomes[f"s3://{SOURCE}/b.log"]["outcome"] == "refused"
    assert len(rows(lake, "access_logs/seen-by-other")) == 1
    [letter] = rows(lake, "dead_letters")
    assert letter["object_uri"] == f"s3://{SOURCE}/b.log" and "LAKESTREAM_LOG_BUCKETS" in letter["error"]


def test_objects_directory_refuses_absolute_and_parent_keys(lake, sandbox, tmp_path_factory):
    """A notification's key must not read a file outside `--objects` (`../`, absolute paths)."""
    work = tmp_path_factory.mktemp("work")
    secret = f"SECRET-{uuid.uuid4().hex}"
    outside = work / "outside.log"  # next to the objects directory, a valid log with a secret
    outside.write_text(log_line("stolen-bucket", 1).replace(" k1 ", f" {secret} ") + "\n")
    objects = put_objects(work / "objects", {(SOURCE, "logs/ok.log"): log_line("observed-bucket", 1) + "\n"})
    keys = ["../outside.log", "logs/../../outside.log", str(outside), "/etc/passwd", "logs/./../../outside.log"]
    event = sqs_event(work / "event.json", [(SOURCE, "logs/ok.log"), *((SOURCE, k) for k in keys)])
    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0, err
    assert out["response"]["batchItemFailures"] == []
    outcomes = dict(out["report"]["objects"]["objects"])
    assert outcomes[f"s3://{SOURCE}/logs/ok.log"]["outcome"] == "committed"
    tables, text = every_value(lake, sandbox)
    assert secret not in text and "root:x:0:0" not in text
    assert sorted(tables) == ["access_logs/observed-bucket", "dead_letters"]
    letters = {r["object_uri"]: r["error"] for r in rows(lake, "dead_letters")}
    for k in keys:
        assert outcomes[f"s3://{SOURCE}/{k}"]["outcome"] == "refused", outcomes
        assert "objects directory" in letters[f"s3://{SOURCE}/{k}"], letters
