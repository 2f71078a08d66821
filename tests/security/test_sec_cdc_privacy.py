"""Issue 38 (4): no record value in logs or Diagnostics, by construction. A refusal reason names
the column and the types only, and no third-party error text that may quote a value is passed
through. Every refusal path of every CDC source (Debezium topics, DMS files, plain JSON lines /
CSV / Parquet files) and of the access-log path gets an e-mail-like secret, unique per case, put
into the value that causes the refusal where there is one (the bad `op`, the clashing cell, the
bad LSN), else into the refused record. Each case asserts that the refusal happened (a dead
letter with a reason, or the object stopped), that the secret (whole, a piece of 8 characters or
more, URL- or base64-encoded) is nowhere in what the process printed (stdout and stderr at the
deployed log filter: the CLI's logs and its report / Diagnostic text), and that no column of the
dead letter but `raw_base64` holds it: the dead-letter table keeps the raw bytes by design, the
reason does not quote them."""
import base64
import dataclasses
import hashlib
import io
import json
import os
import re
import subprocess
import time
import urllib.parse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_support import BIN, ROOT
from secnames import log_line, rows, sqs_event

# The deployed functions' filter (template.yaml): info from our crates, not only warnings.
LOG_FILTER = "info,buoyant_kernel=warn,deltalake_core=warn"
TOPIC = "crm.public.people"
TS_MS = 1764547200000  # 2025-12-01, a past source time

DEBEZIUM = """
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*"]
"""
DMS = """
[[cdc]]
family = "erp"
source = "dms"
location = "s3://landing/dms/"
keys = { "dbo.people" = ["id"] }
columns = { "dbo.people" = ["id int64", "email string", "score int64"] }
"""
DMS_HEADER = """
[[cdc]]
family = "erph"
source = "dms"
location = "s3://landing/dmsh/"
csv_header = true
keys = { "dbo.people" = ["id"] }
"""
FILES = """
[[cdc]]
family = "shop"
source = "files"
location = "s3://landing/files/"
"""


def secret_of(case):
    """An e-mail-like value unique to `case`; its token is a digest, so neither the case id nor a
    piece of the secret is in any path, topic or test name the logs may print."""
    return f"bob.private+{hashlib.sha256(case.encode()).hexdigest()[:10]}@example.org"


def leaks(text, secret):
    """The forms of `secret` found in `text`: whole, any piece of 8 characters or more (a reason
    that quotes a truncated value), URL-encoded, base64 at each alignment."""
    found = {f for f in {secret, urllib.parse.quote(secret), urllib.parse.quote(secret, safe="")} if f in text}
    if "@" in secret:  # pieces of a number could be any number's
        found |= {secret[i:i + 8] for i in range(len(secret) - 7) if secret[i:i + 8] in text}
    for k in range(3):
        b64 = base64.b64encode(secret[k:].encode()).decode()[:-4]
        if b64 in text:
            found.add(f"base64:{b64}")
    return sorted(found)


def kept_bytes(letter):
    """The raw bytes a dead letter kept: `raw_base64` decoded; a Kafka value that was not base64
    itself is kept as sent."""
    text = letter["raw_base64"]
    if not text:
        return b""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return text.encode()


@dataclasses.dataclass
class Proc:
    what: str
    returncode: int
    stdout: str
    stderr: str


class Run:
    """One case's lake, its landing objects and every process it ran."""

    def __init__(self, lake, work):
        self.lake, self.work = lake, work
        self.objects = work / "objects"
        self.procs = []
        self.n = 0

    def configure(self, text):
        self.lake.config.write_text(self.lake.config.read_text() + text)

    def _run(self, what, args):
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
               "AWS_REGION": "us-east-1", "RUST_LOG": LOG_FILTER}
        if os.environ.get("LAKESTREAM_TEST_S3_ENDPOINT"):
            env["AWS_ENDPOINT_URL"] = os.environ["LAKESTREAM_TEST_S3_ENDPOINT"]
        out = subprocess.run([BIN, *args, "--config", str(self.lake.config)], capture_output=True, text=True,
                             check=False, env=env, cwd=ROOT)
        self.procs.append(Proc(what, out.returncode, out.stdout, out.stderr))
        return self.procs[-1]

    def msk(self, records):
        """`lakestream invoke msk` with `records` (Kafka records of TOPIC, partition 0)."""
        self.n += 1
        path = self.work / f"msk-{self.n}.json"
        path.write_text(json.dumps({"eventSource": "aws:kafka", "records": {f"{TOPIC}-0": records},
                                    "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/c/x",
                                    "bootstrapServers": "b-1:9098"}))
        return self._run("invoke msk", ["invoke", "msk", "--event", str(path)])

    def land(self, bucket, key, data):
        p = self.objects / bucket / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return f"s3://{bucket}/{key}"

    def s3_logs(self, *uris):
        """`lakestream invoke s3-logs --objects` with one message per object of `uris`."""
        self.n += 1
        keys = [tuple(u[len("s3://"):].split("/", 1)) for u in uris]
        event = sqs_event(self.work / f"sqs-{self.n}.json", keys)
        return self._run("invoke s3-logs", ["invoke", "s3-logs", "--event", str(event), "--objects", str(self.objects)])

    def report(self, proc):
        """The object outcomes of an `invoke s3-logs` run: {uri: outcome}."""
        out = json.loads(proc.stdout)
        return out, {uri: o["outcome"] for uri, o in out["report"]["objects"]["objects"]}


@dataclasses.dataclass
class Refused:
    """How a case's refusal shows: dead letters selected by `topic`/`offset` or `object_uri`
    (`raw_has_secret`: the letter kept the refused bytes, so they must hold the secret), each
    reason holding `why`; or, with `stopped`, no letter but the object not finished."""
    why: str
    offset: int = None
    object_uri: str = None
    raw_has_secret: bool = True
    stopped: bool = False
    secret: str = None  # the value put in, when it is not the case's e-mail-like one


# ---- Debezium topics --------------------------------------------------------------------------


def record(offset, value=None, key=None, *, value_b64=None):
    """A Kafka record of TOPIC: `value` a dict (JSON), bytes, or None (a tombstone); `key` a
    dict (JSON) or bytes."""
    if isinstance(value, dict):
        value = json.dumps(value).encode()
    if isinstance(key, dict):
        key = json.dumps(key).encode()
    return {"topic": TOPIC, "partition": 0, "offset": offset, "timestamp": TS_MS, "timestampType": "CREATE_TIME",
            "key": None if key is None else base64.b64encode(key).decode(),
            "value": value_b64 if value_b64 is not None else (None if value is None else base64.b64encode(value).decode()),
            "headers": []}


def change(offset, after, *, op="c", source=None, key=None):
    """A Debezium change event (no schema wrapper) of row `after`, keyed by its `id`."""
    source = {"lsn": 1000 + offset, "ts_ms": TS_MS + offset} if source is None else source
    value = {"before": None, "after": after, "op": op, "source": source}
    return record(offset, value, {"id": after.get("id", offset)} if key is None else key)


def prime(r, after=None, family=""):
    """A first good record: the table exists with its keys ([id]) and position kind (lsn)."""
    r.configure(DEBEZIUM + family)
    p = r.msk([change(0, after or {"id": 1, "email": "ann", "contact": 42})])
    assert p.returncode == 0, p.stderr[-2000:]


def dbz(why, offset=1):
    return Refused(why=why, offset=offset)


def dbz_bad_op(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": "bo"}, op=s)])
    return dbz("is not a Debezium row change")


def dbz_value_not_json(r, s):
    prime(r)
    r.msk([record(1, ('{"op": "c", "after": {"id": 2, "email": "%s"' % s).encode(), {"id": 2})])
    return dbz("value is not JSON")


def dbz_value_not_object(r, s):
    prime(r)
    r.msk([record(1, json.dumps(s).encode(), {"id": 2})])
    return dbz("not a JSON object")


def dbz_no_op(r, s):
    prime(r)
    r.msk([record(1, {"before": None, "after": {"id": 2, "email": s}, "source": {"lsn": 1001}}, {"id": 2})])
    return dbz("no `op`")


def dbz_no_source(r, s):
    prime(r)
    r.msk([record(1, {"before": None, "after": {"id": 2, "email": s}, "op": "c"}, {"id": 2})])
    return dbz("no `source` block")


def dbz_no_row_image(r, s):
    prime(r)
    r.msk([record(1, {"before": None, "after": s, "op": "u", "source": {"lsn": 1001}}, {"id": 2})])
    return dbz("row image")


def dbz_value_not_base64(r, s):
    prime(r)
    r.msk([record(1, key={"id": 2}, value_b64=s)])
    return dbz("base64", offset=1)


def dbz_key_not_json(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": "bo"}, key=('{"id": "%s"' % s).encode())])
    return Refused(why="record key is not JSON", offset=1, raw_has_secret=False)  # the letter keeps the value


def dbz_tombstone_key_not_object(r, s):
    prime(r)
    r.msk([record(1, None, json.dumps(s).encode())])
    return Refused(why="key is not a JSON object", offset=1, raw_has_secret=False)  # a tombstone: no value


def dbz_key_fields_differ(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": s}, key={"email": s})])
    return dbz("the table's keys are [id]")


def dbz_position_of_another_kind(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": s}, source={"file": "mysql-bin.000003", "pos": 4, "ts_ms": TS_MS})])
    return dbz("cannot be compared")


def dbz_commit_lsn_shape(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": "bo"}, source={"commit_lsn": s, "ts_ms": TS_MS})])
    return dbz("not a SQL Server LSN")


def dbz_change_lsn_shape(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": "bo"},
                  source={"commit_lsn": "00000027:00000db0:0007", "change_lsn": s, "ts_ms": TS_MS})])
    return dbz("not a SQL Server LSN")


def dbz_lsn_not_a_number(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": "bo"}, source={"lsn": s, "ts_ms": TS_MS})])
    return dbz("source.lsn")


def dbz_binlog_file_without_number(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": "bo"}, source={"file": s, "pos": 4, "ts_ms": TS_MS})])
    return dbz("binlog file number")


def dbz_ts_ms_not_a_number(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": "bo"}, source={"lsn": 1001, "ts_ms": s})])
    return dbz("source.ts_ms")


def dbz_ts_ms_in_the_future(r, s):
    prime(r)
    future = int(time.time() * 1000) + 30 * 24 * 3600 * 1000
    r.msk([change(1, {"id": 2, "email": s}, source={"lsn": 1001, "ts_ms": future})])
    return dbz("more than 7 days after")


def dbz_too_many_new_columns(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, **{f"c{i}": s for i in range(101)}})])
    return dbz("max_new_columns")


def dbz_type_clash_with_bronze(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "email": "bo", "contact": s})])
    return dbz("changed type")


def wrapped(offset, after):
    """A change event with the JSON converter's schema (`schemas.enable=true`): `id` and
    `contact` int32."""
    row = {"type": "struct", "optional": True, "fields": [
        {"field": "id", "type": "int32", "optional": False},
        {"field": "contact", "type": "int32", "optional": True}]}
    schema = {"type": "struct", "fields": [
        {"field": "before", **row}, {"field": "after", **row}, {"field": "op", "type": "string"},
        {"field": "source", "type": "struct", "fields": [{"field": "lsn", "type": "int64"},
                                                         {"field": "ts_ms", "type": "int64"}]}]}
    payload = {"before": None, "after": after, "op": "c", "source": {"lsn": 1000 + offset, "ts_ms": TS_MS}}
    key = {"schema": {"type": "struct", "fields": [{"field": "id", "type": "int32"}]}, "payload": {"id": after["id"]}}
    return record(offset, {"schema": schema, "payload": payload}, key)


def dbz_schema_wrapper_type(r, s):
    prime(r)
    r.msk([wrapped(1, {"id": 2, "contact": s})])
    return dbz("column `contact`")


def dbz_int32_overflow(r, s):
    """A number that does not fit bronze's int32 column (the value is a number here: a card-like
    one, digits only)."""
    r.configure(DEBEZIUM)
    p = r.msk([wrapped(0, {"id": 1, "contact": 42})])
    assert p.returncode == 0, p.stderr[-2000:]
    number = str(41_000_000_000 + int(hashlib.sha256(s.encode()).hexdigest(), 16) % 10**9)
    r.msk([wrapped(1, {"id": 2, "contact": int(number)})])
    return Refused(why="changed type", offset=1, secret=number)


DECLARED = 'columns = { "public.people" = ["created_at timestamp", "amount decimal(12,2)"] }\n'


def dbz_declared_timestamp(r, s):
    prime(r, {"id": 1, "created_at": "2026-11-29T10:00:00Z", "amount": "1.50"}, DECLARED)
    r.msk([change(1, {"id": 2, "created_at": s})])
    return dbz("column `created_at`")


def dbz_declared_decimal(r, s):
    prime(r, {"id": 1, "created_at": "2026-11-29T10:00:00Z", "amount": "1.50"}, DECLARED)
    r.msk([change(1, {"id": 2, "amount": s})])
    return dbz("column `amount`")


def dbz_case_twins(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "Email": s, "email": s})])
    return dbz("differ only in case")


def dbz_bronze_column_name(r, s):
    prime(r)
    r.msk([change(1, {"id": 2, "__op": s})])
    return dbz("the name of a bronze column")


# ---- DMS files --------------------------------------------------------------------------------

DMS_CDC = "dms/dbo/people/20261129-100000001.csv"


def dms_csv(r, body, limits=""):
    r.configure(DMS + limits)
    uri = r.land("landing", DMS_CDC, body)
    r.s3_logs(uri)
    return uri


def dms_bad_op(r, s):
    uri = dms_csv(r, f"I,1,ann,5\n{s},2,bo,6\n")
    return Refused(why="unknown Op", object_uri=uri)


def dms_json_bad_op(r, s):
    r.configure(DMS)
    body = json.dumps({"Op": "I", "id": 1, "email": "ann"}) + "\n" + json.dumps({"Op": s, "id": 2, "email": "bo"}) + "\n"
    uri = r.land("landing", "dms/dbo/people/20261129-100000001.json", body)
    r.s3_logs(uri)
    return Refused(why="unknown Op", object_uri=uri)


def dms_wrong_field_count(r, s):
    uri = dms_csv(r, f"I,1,ann,5\nI,2,{s}\n")
    return Refused(why="field(s)", object_uri=uri)


def dms_declared_type_clash(r, s):
    uri = dms_csv(r, f"I,1,ann,5\nI,2,bo,{s}\n")
    return Refused(why="does not parse as Int64", object_uri=uri)


def dms_overlong_line(r, s):
    uri = dms_csv(r, f"I,1,ann,5\nI,2,{s}{'x' * 3000},6\n", "\n[cdc_limits]\nmax_line_kib = 1\n")
    return Refused(why="max_line_kib", object_uri=uri)


def dms_longer_row_stops_the_object(r, s):
    """A DMS file without a header whose row has more fields than declared: the object stops
    there (not dead-lettered; its message is retried), and the stop reason names no value."""
    uri = dms_csv(r, f"I,1,ann,5\nI,2,bo,6,{s}\n")
    return Refused(why="the source table's columns changed", object_uri=uri, stopped=True)


def dms_header(r, body, limits=""):
    r.configure(DMS_HEADER + limits)
    uri = r.land("landing", "dmsh/dbo/people/20261129-100000001.csv", body)
    r.s3_logs(uri)
    return uri


def dms_header_case_twins(r, s):
    uri = dms_header(r, f"Op,id,Email,email\nI,1,{s},{s}\n")
    return Refused(why="differ only in case", object_uri=uri, raw_has_secret=False)


def dms_header_without_op(r, s):
    uri = dms_header(r, f"id,email\n1,{s}\n")
    return Refused(why="must start with `Op`", object_uri=uri, raw_has_secret=False)


def dms_header_too_wide(r, s):
    cols = ",".join(f"c{i}" for i in range(8))
    uri = dms_header(r, f"Op,{cols}\nI,{','.join([s] * 8)}\n", "\n[cdc_limits]\nmax_table_columns = 5\n")
    return Refused(why="max_table_columns", object_uri=uri, raw_has_secret=False)


def dms_type_clash_with_bronze(r, s):
    """Bronze has `score` int64 (a Parquet full load); a CDC CSV with a header brings text."""
    r.configure(DMS_HEADER)
    load = r.land("landing", "dmsh/dbo/people/LOAD00000001.parquet", parquet({"id": [1], "score": [5]}))
    p = r.s3_logs(load)
    assert p.returncode == 0 and r.report(p)[1][load] == "committed", p.stdout + p.stderr[-2000:]
    uri = r.land("landing", "dmsh/dbo/people/20261129-100000001.csv", f"Op,id,score\nI,2,{s}\n")
    r.s3_logs(uri)
    return Refused(why="score", object_uri=uri, raw_has_secret=False)


# ---- Plain files: JSON lines, CSV, Parquet ----------------------------------------------------


def parquet(columns):
    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()


def files(r, name, body, limits=""):
    r.configure(FILES + limits)
    uri = r.land("landing", f"files/shop/people/{name}", body)
    r.s3_logs(uri)
    return uri


def files_bad_json(r, s):
    uri = files(r, "a.jsonl", '{"id": 1}\n{"id": 2, "email": "%s"\n' % s)
    return Refused(why="not JSON", object_uri=uri)


def files_json_not_object(r, s):
    uri = files(r, "a.jsonl", '{"id": 1}\n' + json.dumps(s) + "\n")
    return Refused(why="not a JSON object", object_uri=uri)


def files_json_too_wide(r, s):
    uri = files(r, "a.jsonl", '{"id": 1}\n' + json.dumps({"id": 2, **{f"c{i}": s for i in range(101)}}) + "\n")
    return Refused(why="max_new_columns", object_uri=uri)


def files_json_case_twins(r, s):
    uri = files(r, "a.jsonl", '{"id": 1}\n' + json.dumps({"id": 2, "Email": s, "email": s}) + "\n")
    return Refused(why="differ only in case", object_uri=uri)


def files_json_overlong_line(r, s):
    line = json.dumps({"id": 2, "email": s, "pad": "x" * 3000})
    uri = files(r, "a.jsonl", '{"id": 1}\n' + line + "\n", "\n[cdc_limits]\nmax_line_kib = 1\n")
    return Refused(why="max_line_kib", object_uri=uri)


def files_csv_wrong_field_count(r, s):
    uri = files(r, "a.csv", f"id,email\n1,ann\n2,{s},extra\n")
    return Refused(why="field(s)", object_uri=uri)


def files_csv_not_utf8(r, s):
    uri = files(r, "a.csv", b"id,email\n1,ann\n2," + s.encode() + b"\xff\xfe\n")
    return Refused(why="not valid UTF-8", object_uri=uri)


def files_csv_header_case_twins(r, s):
    uri = files(r, "a.csv", f"id,Email,email\n1,{s},{s}\n")
    return Refused(why="differ only in case", object_uri=uri, raw_has_secret=False)


def files_timestamp_column(r, s):
    r.configure(FILES + 'timestamp_column = "ts"\n')
    uri = r.land("landing", "files/shop/people/a.csv", f"id,ts\n1,2026-11-29 10:00:00\n2,{s}\n")
    r.s3_logs(uri)
    return Refused(why="timestamp column `ts`", object_uri=uri)


def clash(r, name, body):
    """Bronze has `contact` int64 (a first Parquet file); `name` brings the secret there."""
    r.configure(FILES)
    first = r.land("landing", "files/shop/people/a.parquet", parquet({"id": [1], "contact": [42]}))
    p = r.s3_logs(first)
    assert p.returncode == 0 and r.report(p)[1][first] == "committed", p.stdout + p.stderr[-2000:]
    uri = r.land("landing", f"files/shop/people/{name}", body)
    r.s3_logs(uri)
    return Refused(why="contact", object_uri=uri, raw_has_secret=False)


def files_csv_type_clash_with_bronze(r, s):
    return clash(r, "b.csv", f"id,contact\n2,{s}\n")


def files_json_type_clash_with_bronze(r, s):
    return clash(r, "b.jsonl", json.dumps({"id": 2, "contact": s}) + "\n")


def files_parquet_type_clash_with_bronze(r, s):
    return clash(r, "b.parquet", parquet({"id": [2], "contact": [s]}))


def files_parquet_over_a_bound(r, s):
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1], "note": [s + "x" * 3_000_000]}), buf, compression="zstd",
                   use_dictionary=False)
    uri = files(r, "a.parquet", buf.getvalue(), "\n[cdc_limits]\nmax_page_mib = 1\n")
    return Refused(why="max_page_mib", object_uri=uri, raw_has_secret=False)


def files_parquet_bronze_column_name(r, s):
    uri = files(r, "a.parquet", parquet({"id": [1], "__op": [s]}))
    return Refused(why="bronze metadata column", object_uri=uri, raw_has_secret=False)


def files_parquet_garbage_footer(r, s):
    meta = s.encode() * 3
    uri = files(r, "a.parquet", b"PAR1" + meta + len(meta).to_bytes(4, "little") + b"PAR1")
    return Refused(why="Parquet", object_uri=uri, raw_has_secret=False)


# ---- Access logs ------------------------------------------------------------------------------


def access_log(r, bad_line, config_edit=None):
    if config_edit:
        text = r.lake.config.read_text()
        assert config_edit(text) != text, "the example's [access_logs] changed: update the edit"
        r.lake.config.write_text(config_edit(text))
    uri = r.land("raw-logs", "logs/a.log", log_line("observed-bucket", 1) + "\n" + bad_line + "\n")
    r.s3_logs(uri)
    return uri


def alog_bucket_name(r, s):
    return Refused(why="bucket name", object_uri=access_log(r, log_line(s, 2)))


def alog_number_field(r, s):
    line = log_line("observed-bucket", 2)
    assert " 200 - 2 10 " in line
    return Refused(why="is not a number", object_uri=access_log(r, line.replace(" 200 - 2 10 ", f" 200 - {s} 10 ")))


def alog_time_field(r, s):
    line = log_line("observed-bucket", 2)
    line = line[:line.index("[")] + f"[{s}]" + line[line.index("]") + 1:]
    return Refused(why="time", object_uri=access_log(r, line))


def alog_unbalanced_quote(r, s):
    line = log_line("observed-bucket", 2)
    return Refused(why="unbalanced quote", object_uri=access_log(r, line[:line.index('"')] + f'"GET /{s} HTTP/1.1'))


def alog_truncated_line(r, s):
    line = f"owner observed-bucket [29/Nov/2026:10:00:02 +0000] {s}"
    return Refused(why="truncated line", object_uri=access_log(r, line))


def alog_overlong_line(r, s):
    line = log_line("observed-bucket", 2).replace("k2", f"{s}{'x' * 3000}", 1)
    edit = lambda t: re.sub(r"(?m)^max_line_kib = 64 ", "max_line_kib = 1 ", t, count=1)
    return Refused(why="max_line_kib", object_uri=access_log(r, line, edit))


CASES = [
    dbz_bad_op, dbz_value_not_json, dbz_value_not_object, dbz_no_op, dbz_no_source, dbz_no_row_image,
    dbz_value_not_base64, dbz_key_not_json, dbz_tombstone_key_not_object, dbz_key_fields_differ,
    dbz_position_of_another_kind, dbz_commit_lsn_shape, dbz_change_lsn_shape, dbz_lsn_not_a_number,
    dbz_binlog_file_without_number, dbz_ts_ms_not_a_number, dbz_ts_ms_in_the_future, dbz_too_many_new_columns,
    dbz_type_clash_with_bronze, dbz_schema_wrapper_type, dbz_int32_overflow, dbz_declared_timestamp, dbz_declared_decimal,
    dbz_case_twins, dbz_bronze_column_name,
    dms_bad_op, dms_json_bad_op, dms_wrong_field_count, dms_declared_type_clash, dms_overlong_line,
    dms_longer_row_stops_the_object, dms_header_case_twins, dms_header_without_op, dms_header_too_wide,
    dms_type_clash_with_bronze,
    files_bad_json, files_json_not_object, files_json_too_wide, files_json_case_twins, files_json_overlong_line,
    files_csv_wrong_field_count, files_csv_not_utf8, files_csv_header_case_twins, files_timestamp_column,
    files_csv_type_clash_with_bronze, files_json_type_clash_with_bronze, files_parquet_type_clash_with_bronze,
    files_parquet_over_a_bound, files_parquet_bronze_column_name, files_parquet_garbage_footer,
    alog_bucket_name, alog_number_field, alog_time_field, alog_unbalanced_quote, alog_truncated_line,
    alog_overlong_line,
]


def letters_of(lake, refused):
    try:
        letters = rows(lake, "dead_letters")
    except Exception:  # noqa: BLE001 - no dead-letter table: no letter
        return []
    if refused.offset is not None:
        return [x for x in letters if x["topic"] == TOPIC and x["offset"] == refused.offset]
    return [x for x in letters if x["object_uri"] == refused.object_uri]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_a_refused_value_reaches_no_log_and_no_reason(case, lake, tmp_path_factory):
    secret = secret_of(case.__name__)
    r = Run(lake, tmp_path_factory.mktemp("work"))
    refused = case(r, secret)
    secret = refused.secret or secret

    def shown(text):
        return text.replace(secret, "<SECRET>").strip()

    # What leaked: lines of stdout / stderr, and dead-letter columns other than the raw bytes.
    problems = [f"{p.what} {stream} ({', '.join(leaks(line, secret)[:3])}...): {shown(line)[:600]}"
                for p in r.procs for stream, text in [("stdout", p.stdout), ("stderr", p.stderr)]
                for line in text.splitlines() if leaks(line, secret)]
    for p in r.procs:
        assert p.returncode == 0, f"{p.what} exited {p.returncode}:\n{p.stderr[-3000:]}\nleaks: {problems}"

    # The refusal happened: a dead letter for the refused input with the reason expected (or the
    # object stopped, retried, nothing dead-lettered).
    letters = letters_of(lake, refused)
    if refused.stopped:
        out, outcomes = r.report(r.procs[-1])
        assert letters == [], letters
        assert outcomes[refused.object_uri] not in ("committed", "refused"), outcomes
        assert out["response"]["batchItemFailures"], out["response"]
    else:
        assert letters, f"no dead letter for {refused}; leaks: {problems}"
        assert any(refused.why in x["error"] for x in letters), [shown(x["error"]) for x in letters]
        if refused.raw_has_secret:
            assert any(secret.encode() in kept_bytes(x) for x in letters), [kept_bytes(x)[:200] for x in letters]
    # The letter keeps the bytes (raw_base64), never the value in its reason or other columns.
    problems += [f"dead letter `{k}`: {shown(v)[:600]}" for x in letters for k, v in x.items()
                 if k != "raw_base64" and isinstance(v, str) and leaks(v, secret)]
    assert not problems, "the value leaked:\n" + "\n".join(problems)
