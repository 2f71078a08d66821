"""Issue 24 defect 9: record values never reach the logs (CloudWatch) at the default log level.

A rejected value is kept in the dead-letter table (raw bytes and the reason); stdout and stderr of
the real binaries carry reason classes and offsets only. Each test feeds card-number-like values
through a path that rejects them and asserts: every value is in the dead-letter table, none is in
what the process printed (`lakestream invoke msk`, `lakestream invoke s3-logs`, and the
`msk-ingest` / `s3-log-ingest` function binaries served by a local Lambda Runtime API)."""
import base64
import importlib.util
import json
import os
import pathlib
import subprocess
import time

from deltalake import DeltaTable

from lake_support import BIN, ROOT

_spec = importlib.util.spec_from_file_location("warm", ROOT / "tests" / "chaos" / "warm.py")
_warm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_warm)
WarmFunction = _warm.WarmFunction

# Card-number-like values (Luhn-valid test PANs and variants), one per hostile record.
CARDS = [
    "4111111111111111",  # a string in an int32 column
    "4012888888881881",  # a number too large for int32
    "5555555555554444",  # a string in a timestamp column
    "378282246310005",  # an epoch far outside 0001-9999 in a timestamp column
    "6011111111111117",  # not JSON at all
    "3530111333300000",  # a non-numeric string (prefixed) in an int32 column
]


def msk_records():
    values = [
        {"order_id": CARDS[0], "order_owner": "bob", "order_value": 1, "timestamp": "2026-12-01T00:00:00Z"},
        {"order_id": 1, "order_owner": "bob", "order_value": int(CARDS[1]), "timestamp": "2026-12-01T00:00:00Z"},
        {"order_id": 2, "order_owner": "bob", "order_value": 2, "timestamp": CARDS[2]},
        {"order_id": 3, "order_owner": "bob", "order_value": 3, "timestamp": int(CARDS[3]) * 1000},
        None,  # replaced by invalid JSON below
        {"order_id": 5, "order_owner": "bob", "order_value": "x" + CARDS[5], "timestamp": "2026-12-01T00:00:00Z"},
    ]
    raw = [json.dumps(v).encode() if v is not None else ('{"order_id": 4, "card": "%s"' % CARDS[4]).encode()
           for v in values]
    recs = [{"topic": "orders", "partition": 0, "offset": 100 + i, "timestamp": 1764547200000,
             "timestampType": "CREATE_TIME", "key": None,
             "value": base64.b64encode(r).decode(), "headers": []} for i, r in enumerate(raw)]
    return {"eventSource": "aws:kafka",
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/c/x",
            "bootstrapServers": "b-1:9098", "records": {"orders-0": recs}}


def dead_letters(lake):
    return DeltaTable(lake.table_uri("dead_letters"),
                      storage_options=lake.storage_options or None).to_pyarrow_table().to_pylist()


def raw_of(letter):
    return base64.b64decode(letter["raw_base64"]).decode("utf-8", "replace") if letter["raw_base64"] else ""


def default_env():
    env = dict(os.environ)
    env.pop("RUST_LOG", None)  # the default level, as deployed
    return env


def assert_no_card(text, where):
    leaked = [c for c in CARDS if c in text]
    assert not leaked, f"record values {leaked} reached {where}:\n{text[-3000:]}"


def test_msk_cli_logs_no_record_values(lake, tmp_path):
    event = tmp_path / "bad-cards.json"
    event.write_text(json.dumps(msk_records()))
    out = subprocess.run([BIN, "invoke", "msk", "--event", str(event), "--config", str(lake.config)],
                         capture_output=True, text=True, env=default_env(), check=False)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["received"] == 6 and report["dead_lettered"] == 6
    letters = dead_letters(lake)
    assert sorted(l["offset"] for l in letters) == [100, 101, 102, 103, 104, 105]
    stored = "\n".join(raw_of(l) + "\n" + l["error"] for l in letters)
    for card in CARDS:
        assert card in stored, f"{card} is not in the dead-letter table"
    # The logs still say what happened, by class and offset.
    assert "dead-lettered record" in out.stderr and "offset" in out.stderr and "103" in out.stderr
    assert_no_card(out.stdout, "stdout")
    assert_no_card(out.stderr, "stderr")


ACCESS_LINE = ('owner datalake-prod [29/Nov/2026:10:00:00 +0000] 1.2.3.4 req ID REST.GET.OBJECT k '
               '"GET /k HTTP/1.1" %s - 1 1 1 1 "-" "ua" -\n')


def s3_logs_event(tmp_path):
    objs = tmp_path / "objects" / "raw-logs" / "logs"
    objs.mkdir(parents=True)
    # A line whose http_status is a card number (not an int32), and a good line.
    (objs / "2026-11-29-10-00-00-CARD").write_text(ACCESS_LINE % CARDS[0] + ACCESS_LINE % "200")
    body = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                         "s3": {"bucket": {"name": "raw-logs"},
                                "object": {"key": "logs/2026-11-29-10-00-00-CARD", "size": 10,
                                           "eTag": "0123456789abcdef0123456789abcdef"}}}]}
    messages = [
        {"messageId": "m-1", "receiptHandle": "r1", "body": json.dumps(body), "eventSource": "aws:sqs"},
        # Not a notification: an S3 record whose eventVersion is a card number.
        {"messageId": "m-2", "receiptHandle": "r2", "eventSource": "aws:sqs",
         "body": json.dumps({"Records": [{"eventVersion": CARDS[1], "eventSource": "aws:s3",
                                          "eventName": "ObjectCreated:Put"}]})},
        # Nothing to ingest (acknowledged, not stored): an event name carrying a value.
        {"messageId": "m-4", "receiptHandle": "r4", "eventSource": "aws:sqs",
         "body": json.dumps({"Records": [{"eventName": "ObjectRemoved:" + CARDS[3], "eventSource": "aws:s3"}]})},
        {"messageId": "m-3", "receiptHandle": "r3", "eventSource": "aws:sqs",
         "body": "card=%s, not json" % CARDS[2]},
    ]
    event = tmp_path / "sqs.json"
    event.write_text(json.dumps({"Records": messages}))
    return event, tmp_path / "objects"


def test_s3_logs_cli_logs_no_record_values(lake, tmp_path):
    event, objs = s3_logs_event(tmp_path)
    out = subprocess.run([BIN, "invoke", "s3-logs", "--event", str(event), "--objects", str(objs),
                          "--config", str(lake.config)],
                         capture_output=True, text=True, env=default_env(), check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["response"]["batchItemFailures"] == []
    stored = "\n".join(raw_of(l) + "\n" + l["error"] for l in dead_letters(lake))
    for card in CARDS[:3]:
        assert card in stored, f"{card} is not in the dead-letter table"
    assert "not a notification" in out.stderr
    assert_no_card(out.stdout, "stdout")
    assert_no_card(out.stderr, "stderr")


def run_function(name, lake, tmp_path, body, extra_env=None):
    """Invoke the function binary `name` once through the chaos suite's Runtime API stand-in
    (`tests/chaos/warm.py`), at the default log level; returns (kind, response, what it logged)."""
    log = tmp_path / f"{name}.log"
    fn = WarmFunction(pathlib.Path(BIN).parent / name, lake.config, None, log,
                      base_env={**default_env(), **(extra_env or {})})
    try:
        kind, response = fn.invoke(body, timeout=120)
        time.sleep(0.3)  # the last log lines
    finally:
        fn.close()
    return kind, response, log.read_text(errors="replace")


def test_msk_function_logs_no_record_values(lake, tmp_path):
    status, response, logged = run_function("msk-ingest", lake, tmp_path, msk_records())
    assert status == "response", response
    assert response["dead_lettered"] == 6
    stored = "\n".join(raw_of(l) + "\n" + l["error"] for l in dead_letters(lake))
    for card in CARDS:
        assert card in stored
    assert "dead-lettered record" in logged
    assert_no_card(logged, "the function's log (CloudWatch)")


def test_s3_log_function_logs_no_record_values(lake, tmp_path):
    event, _ = s3_logs_event(tmp_path)
    body = json.loads(event.read_text())
    # The function reads objects from S3; only the bodies that are not notifications matter here.
    body["Records"] = body["Records"][1:]
    status, response, logged = run_function(
        "s3-log-ingest", lake, tmp_path, body,
        {"AWS_ENDPOINT_URL": os.environ.get("LAKESTREAM_TEST_S3_ENDPOINT", "http://127.0.0.1:9"),
         "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"})
    assert status == "response", response
    assert response["batchItemFailures"] == []
    stored = "\n".join(raw_of(l) + "\n" + l["error"] for l in dead_letters(lake))
    for card in CARDS[1:3]:
        assert card in stored
    assert "not a notification" in logged
    assert_no_card(logged, "the function's log (CloudWatch)")
