"""Access-log tables written by the s3-log-ingest handler (through `lakestream invoke s3-logs`
with a directory standing in for the raw-logs bucket), read back by Python `deltalake`."""
import datetime as dt
import gzip
import shutil


from lake_support import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "access-logs"
EB_LINE = 'owner eventbridge-demo [29/Nov/2026:10:00:00 +0000] 1.2.3.4 req ID REST.GET.OBJECT k "GET /k HTTP/1.1" 200 - 1 1 1 1 "-" "ua" -\n'


def objects_dir(tmp_path):
    logs = tmp_path / "objects" / "raw-logs" / "logs"
    logs.mkdir(parents=True)
    shutil.copy(FIXTURES / "2026-11-29-08-00-00-A1B2C3D4E5F6.log", logs / "2026-11-29-08-00-00-A1B2C3D4E5F6")
    shutil.copy(FIXTURES / "2026-11-29-09-00-00-F6E5D4C3B2A1.log.gz", logs / "2026-11-29-09-00-00-F6E5D4C3B2A1.gz")
    (logs / "2026-11-29-10-00-00-0A1B2C3D4E5F").write_text(EB_LINE)
    return tmp_path / "objects"


def rows(lake, name):
    return lake.read(name).to_pylist()


def test_access_log_tables_read_back(lake, tmp_path):
    objs = objects_dir(tmp_path)
    out = lake.invoke("sqs-s3-notifications.json", "s3-logs", ["--objects", str(objs)])
    assert out["response"]["batchItemFailures"] == []
    assert out["report"]["test_events"] == 1

    prod = rows(lake, "access_logs/datalake-prod")
    assert len(prod) == 4
    by_line = {r["log_line"]: r for r in prod}
    assert sorted(by_line) == [1, 2, 3, 5]
    first = by_line[1]
    assert first["operation"] == "REST.GET.OBJECT"
    assert first["key"] == "sales/2026/11/part-0001.parquet"
    assert first["http_status"] == 200 and first["bytes_sent"] == 1048576
    assert first["time"] == dt.datetime(2026, 11, 29, 8, 0, 1, tzinfo=dt.timezone.utc)
    assert first["user_agent"] == "aws-cli/2.15.0 Python/3.11.6 Linux/6.1 (x86_64)"
    assert first["log_object"] == "s3://raw-logs/logs/2026-11-29-08-00-00-A1B2C3D4E5F6"
    assert by_line[3]["time"] == dt.datetime(2026, 11, 29, 8, 0, 3, tzinfo=dt.timezone.utc)  # +0100 -> UTC
    assert by_line[3]["bytes_sent"] is None and by_line[3]["http_status"] == 404
    assert by_line[5]["key"] == "raw/my+file%20name.json"  # as logged
    assert {r["date"] for r in prod} == {"2026-11-29"}

    archive = rows(lake, "access_logs/analytics-archive")
    assert sorted(r["date"] for r in archive) == ["2026-11-28", "2026-11-29"]
    transition = [r for r in archive if r["operation"] == "S3.TRANSITION_SIA.OBJECT"][0]
    assert transition["request_uri"] is None and transition["user_agent"] is None
    demo = rows(lake, "access_logs/amzn-s3-demo-bucket1")
    assert demo[0]["source_region"] == "us-east-1" and demo[0]["acl_required"] == "Yes"

    dead = rows(lake, "dead_letters")
    reasons = sorted((r["object_uri"], r["line_number"], r["error"]) for r in dead)
    assert len(reasons) == 3
    assert reasons[0][:2] == ("s3://raw-logs/logs/2026-11-29-08-00-00-A1B2C3D4E5F6", 4)
    assert "bytes_sent" in reasons[1][2]
    assert "no longer exists" in reasons[2][2]

    # Redelivery adds nothing.
    again = lake.invoke("sqs-s3-notifications.json", "s3-logs", ["--objects", str(objs)])
    assert again["response"]["batchItemFailures"] == []
    assert len(rows(lake, "access_logs/datalake-prod")) == 4
    assert len(rows(lake, "dead_letters")) == 3
