#!/usr/bin/env python3
"""`make bench-compare`: Lakestream side by side with its peers, one run, one table.

Every pair runs on the same generated data in the same run, each engine pinned to core 0:
  ingest      MSK-shaped orders -> committed Delta table `raw/order` (same schema, processing-time
              partitions, `txn` per Kafka partition, 100 commits) vs Python `deltalake`
              (`pyarrow.json.read_json` with the explicit schema, `write_deltalake(mode="append")`);
              both tables' Parquet sizes are reported (writer settings: each engine's defaults).
  access logs lines -> typed Arrow vs Rust `regex` and Python `re` with AWS's Athena pattern.
  upsert      `lakestream refine` upsert vs Python `deltalake` MERGE (scripts/bench_upsert.py).
  gold        an incremental gold run over a day of new rows vs DataFusion recomputing the
              aggregate over the whole source, at 1M and 10M rows (scripts/bench_gold.py).
  functions   the release function binaries against a local Lambda Runtime API stand-in and the
              S3 emulator behind a counting proxy: S3 requests per warm append over 120 commits
              (where each goes), per cold invocation, log bytes per invocation at the default
              level, peak RSS for one ~6 MB MSK batch, process start -> first event handled,
              zipped size of each function.
BENCH_SIZE=quick (100k records, 1M-row upsert, 40 commits) or full (default: 1M records,
10M-row upsert, 120 commits); BENCH_REPEAT (default 3) runs per pair, median and range shown.
Generated data is cached under target/bench-compare/cache. Results: target/bench-compare/results.json.
Needs MOTO_PORT (the emulator, `make moto-start`). Not part of CI; no thresholds.
"""
import base64
import io
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "target" / "bench-compare"
QUICK = os.environ.get("BENCH_SIZE", "full") == "quick"
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
RECORDS = 100_000 if QUICK else 1_000_000
BATCH = 10_000
COMMITS = 40 if QUICK else 120
MOTO = f"http://127.0.0.1:{os.environ.get('MOTO_PORT', '5055')}"
FUNCTIONS = ["msk-ingest", "s3-log-ingest", "maintenance", "refine"]
PROCESSING = ("2022", "04", "04", "10")  # the bench's fixed clock: 2022-04-04T10:15:30Z


def pinned(cmd, **kw):
    return subprocess.run(["taskset", "-c", "0", *cmd], capture_output=True, text=True, check=True, **kw)


def median_range(xs):
    return statistics.median(xs), min(xs), max(xs)


# ---------------------------------------------------------------- ingest

def ingest_lakestream(data):
    out = OUT / "ingest-lakestream.json"
    pinned(["cargo", "bench", "-q", "-p", "lakestream-core", "--bench", "ingest_throughput", "--",
            str(RECORDS), str(BATCH), "--data", str(data), "--json", str(out)], cwd=ROOT)
    return json.loads(out.read_text())


def ingest_python(data, lake, n, batch):
    """The peer, in its own process: times 100 appends from in-memory NDJSON chunks."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pj
    from deltalake import CommitProperties, Transaction, write_deltalake

    lines = (pathlib.Path(data) / "values.ndjson").read_bytes().splitlines(keepends=True)
    meta = pcsv.read_csv(pathlib.Path(data) / "meta.csv",
                         convert_options=pcsv.ConvertOptions(column_types={
                             "kafka_partition": pa.int32(), "kafka_offset": pa.int64()}))
    chunks = [b"".join(lines[i:i + batch]) for i in range(0, n, batch)]
    schema = pa.schema([pa.field("order_id", pa.int32(), False), pa.field("order_owner", pa.string(), False),
                        pa.field("order_value", pa.int32()),
                        pa.field("timestamp", pa.timestamp("us", tz="UTC"), False)])
    opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    started = time.perf_counter()
    for i, chunk in enumerate(chunks):
        t = pj.read_json(io.BytesIO(chunk), parse_options=opts)
        m = meta.slice(i * batch, t.num_rows)
        t = t.append_column("kafka_partition", m.column("kafka_partition"))
        t = t.append_column("kafka_offset", m.column("kafka_offset"))
        for name, value in zip(("year", "month", "day", "hour"), PROCESSING):
            t = t.append_column(name, pa.array([value] * t.num_rows, pa.string()))
        last = {}
        for p, o in zip(m.column("kafka_partition").to_pylist(), m.column("kafka_offset").to_pylist()):
            last[p] = max(o, last.get(p, o))
        txns = [Transaction(app_id=f"bench/orders/{p}", version=o) for p, o in sorted(last.items())]
        write_deltalake(lake, t, mode="append", partition_by=["year", "month", "day", "hour"],
                        commit_properties=CommitProperties(app_transactions=txns))
    secs = time.perf_counter() - started
    files = list(pathlib.Path(lake).rglob("*.parquet"))
    print(json.dumps({"secs": secs, "files": len(files), "parquet_bytes": sum(f.stat().st_size for f in files)}))


def ingest():
    data = OUT / "cache" / f"orders-{RECORDS}"
    ingest_lakestream(data)  # writes the shared data if missing (not timed here)
    ours, peer = [], []
    for _ in range(REPEAT):
        ours.append(ingest_lakestream(data))
        lake = OUT / "python-lake"
        shutil.rmtree(lake, ignore_errors=True)
        out = pinned([sys.executable, __file__, "ingest-python", str(data), str(lake), str(RECORDS), str(BATCH)])
        peer.append(json.loads(out.stdout.strip().splitlines()[-1]))
    shutil.rmtree(OUT / "python-lake", ignore_errors=True)
    mb = ours[0]["json_bytes"] / 1e6
    o, p = median_range([r["secs"] for r in ours]), median_range([r["secs"] for r in peer])
    return {
        "records": RECORDS, "commits": ours[0]["commits"], "json_mb": mb,
        "lakestream_s": o, "python_s": p, "speedup": p[0] / o[0],
        "lakestream_mb_s": mb / o[0], "lakestream_records_s": RECORDS / o[0],
        "decode_only_mb_s": mb / statistics.median(r["decode_only_secs"] for r in ours),
        "lakestream_files": ours[0]["files"], "lakestream_parquet_mb": ours[0]["parquet_bytes"] / 1e6,
        "python_files": peer[0]["files"], "python_parquet_mb": peer[0]["parquet_bytes"] / 1e6,
    }


# ---------------------------------------------------------------- access logs

def access_logs():
    lines = 50_000 if QUICK else 200_000
    runs = {}
    for _ in range(REPEAT):
        out = pinned(["cargo", "bench", "-q", "-p", "lakestream-core", "--bench", "access_log_parse", "--",
                      str(lines)], cwd=ROOT)
        for line in out.stdout.splitlines():
            if "MB/s" in line:
                name = line[:34].strip()
                runs.setdefault(name, []).append(float(line.split("lines/s")[1].split("MB/s")[0]))
    return {name: median_range(v) for name, v in runs.items()}


# ---------------------------------------------------------------- upsert

def upsert():
    os.environ.setdefault("BENCH_UPSERT_ROWS", str(1_000_000 if QUICK else 10_000_000))
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_upsert
    subprocess.run(["cargo", "build", "-q", "--release", "--bin", "lakestream"], cwd=ROOT, check=True)
    return bench_upsert.run()


def gold():
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_gold
    if QUICK:
        os.environ.setdefault("BENCH_GOLD_ROWS", "1000000")
    return bench_gold.run()


# ---------------------------------------------------------------- functions

class QuietServer(ThreadingHTTPServer):
    """A loopback server that does not print a traceback when a stopped process drops its
    connection (every function is killed at the end of its phase)."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class Counter:
    """Requests seen by the proxy, by kind."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.tags = []  # beside each item: who made it (the proxy's `tag()`), or None
        self.statuses = []  # beside each item: the emulator's HTTP status

    def add(self, method, path, secs, tag=None, status=None):
        with self.lock:
            self.items.append((method, path, secs))
            self.tags.append(tag)
            self.statuses.append(status)

    def take(self):
        with self.lock:
            items, self.items = self.items, []
            self.tags = []
            self.statuses = []
        return items


def kind(method, path):
    p = path.split("?", 1)[0]
    q = path.split("?", 1)[1] if "?" in path else ""
    if "list-type=2" in q or (method == "GET" and p.count("/") <= 1):
        return "LIST"
    where = "log" if "/_delta_log/" in p else "data"
    if "_last_checkpoint" in p:
        where = "_last_checkpoint"
    elif ".checkpoint." in p:
        where = "checkpoint"
    return f"{method} {where}"


def start_proxy(counter, tag=None):
    """A counting proxy to the emulator; `tag()` (when given) is asked at each request and
    recorded beside it (bench-fresh: which instance, in which of its invocations)."""
    import http.client
    from urllib.parse import urlparse

    target = urlparse(MOTO)

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: without TCP_NODELAY every response waits
        # ~40 ms for the client's delayed ACK (it made a cold start look 1 s longer).
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            started = time.time()
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
            conn.request(self.command, self.path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            # The tag, then when the request started (wall clock): bench-fresh's I/O time per invocation.
            counter.add(self.command, self.path, time.perf_counter() - t0,
                        tag() + (started,) if tag else None, r.status)
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            # A HEAD's Content-Length is the object's size (a warm handle compares it with the
            # commit file it holds), not the length of the empty body.
            length = r.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = forward

    server = QuietServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class RuntimeApi:
    """A local Lambda Runtime API: hands out queued events, records responses and their times."""

    def __init__(self):
        self.events, self.done = [], {}
        self.cv = threading.Condition()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *a):
                pass

            def reply(self, code, body=b"", headers=()):
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                with api.cv:
                    api.cv.wait_for(lambda: api.events)
                    rid, body = api.events.pop(0)
                try:
                    self.send_event(rid, body)
                except OSError:  # a stopped process's pending /next: hand the event on
                    with api.cv:
                        api.events.insert(0, (rid, body))
                        api.cv.notify_all()

            def send_event(self, rid, body):
                self.reply(200, body, [
                    ("Lambda-Runtime-Aws-Request-Id", rid),
                    ("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 900_000)),
                    ("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:bench"),
                    ("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000"),
                    ("Content-Type", "application/json")])

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.strip("/").split("/")
                rid = parts[3] if len(parts) > 4 else "init"
                with api.cv:
                    api.done[rid] = (time.perf_counter(), parts[-1], body)
                    api.cv.notify_all()
                self.reply(202)

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]
        self.seq = 0

    def invoke(self, body, timeout=300):
        self.seq += 1
        rid = f"req-{self.seq}"
        with self.cv:
            self.events.append((rid, body))
            self.cv.notify_all()
            ok = self.cv.wait_for(lambda: rid in self.done or "init" in self.done, timeout)
        if not ok or "init" in self.done:
            raise SystemExit(f"invocation {rid} failed: {self.done.get('init')}")
        return self.done[rid]


class Function:
    def __init__(self, name, api, config, log):
        env = {**os.environ, "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{api.port}",
               "AWS_LAMBDA_FUNCTION_NAME": name, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
               "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_LAMBDA_LOG_STREAM_NAME": "bench",
               "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}", "LAKESTREAM_CONFIG": str(config),
               "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": MOTO, "AWS_ALLOW_HTTP": "true"}
        env.pop("RUST_LOG", None)
        self.log = log
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(["taskset", "-c", "0", str(ROOT / "target/release" / name)],
                                     env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)

    def log_size(self):
        return self.log.stat().st_size

    def peak_rss_mib(self):
        for line in pathlib.Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return None

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def msk_event(records):
    by = {}
    for value, p, o in records:
        by.setdefault(f"orders-{p}", []).append({
            "topic": "orders", "partition": p, "offset": o, "timestamp": 1649067330123,
            "timestampType": "CREATE_TIME", "value": base64.b64encode(value).decode(), "headers": []})
    return json.dumps({"eventSource": "aws:kafka",
                       "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/bench/x",
                       "bootstrapServers": "b-1:9098", "records": by}).encode()


def functions():
    import boto3

    subprocess.run(["cargo", "build", "-q", "--release", *sum((["-p", f] for f in FUNCTIONS), [])],
                   cwd=ROOT, check=True)
    work = OUT / "functions"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    s3 = boto3.client("s3", endpoint_url=MOTO, region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    bucket = f"bench-lake-{int(time.time())}"
    s3.create_bucket(Bucket=bucket)
    counter = Counter()
    proxy = start_proxy(counter)
    config = work / "lakestream.toml"
    text = (ROOT / "lakestream.toml").read_text().replace(
        'root = "./lake"',
        f'root = "s3://{bucket}/lake"\nendpoint_url = "http://127.0.0.1:{proxy.server_address[1]}"\n'
        'region = "us-east-1"\nallow_http = true')
    config.write_text(text)
    data = OUT / "cache" / f"orders-{RECORDS}"
    if not (data / "meta.csv").exists():
        ingest_lakestream(data)  # writes the shared data
    values = (data / "values.ndjson").read_bytes().splitlines()
    meta = [tuple(map(int, line.split(","))) for line in (data / "meta.csv").read_text().splitlines()[1:]]
    records = [(v, p, o) for v, (p, o) in zip(values, meta)]
    api = RuntimeApi()
    result = {}

    # Warm appends: one process, COMMITS invocations of 1,000 records.
    fn = Function("msk-ingest", api, config, work / "msk.log")
    per = []
    for i in range(COMMITS):
        counter.take()
        before = fn.log_size()
        t0 = time.perf_counter()
        _, status, body = api.invoke(msk_event(records[i * 1000:(i + 1) * 1000]))
        wall = time.perf_counter() - t0
        if status != "response":
            raise SystemExit(f"msk-ingest failed: {body[:500]}")
        time.sleep(0.05)  # let the last log line reach the file
        made = [kind(m, p) for m, p, _ in counter.take()]
        per.append({"i": i, "requests": made, "log_bytes": fn.log_size() - before, "wall_s": wall})
    fn.stop()
    interval = 10
    warm = [r for r in per[1:] if (r["i"] + 1) % interval != 0]
    ckpt = [r for r in per[1:] if (r["i"] + 1) % interval == 0]
    non_data = lambda r: [k for k in r["requests"] if not k.endswith(" data")]
    by_kind = {}
    for r in warm:
        for k in r["requests"]:
            by_kind[k] = by_kind.get(k, 0) + 1
    result["warm_append"] = {
        "commits": len(warm),
        "requests_median": statistics.median(len(non_data(r)) for r in warm),
        "requests_max": max(len(non_data(r)) for r in warm),
        "first_10_median": statistics.median(len(non_data(r)) for r in warm[:10]),
        "last_10_median": statistics.median(len(non_data(r)) for r in warm[-10:]),
        "data_puts_median": statistics.median(len(r["requests"]) - len(non_data(r)) for r in warm),
        "per_commit_by_kind": {k: round(v / len(warm), 2) for k, v in sorted(by_kind.items())},
        "checkpoint_commit_requests": statistics.median(len(non_data(r)) for r in ckpt) if ckpt else None,
        "log_bytes_median": statistics.median(r["log_bytes"] for r in warm),
        "wall_ms_median": 1000 * statistics.median(r["wall_s"] for r in warm),
        "create_requests": len(per[0]["requests"]),
    }

    # Cold start on the COMMITS-version table: process start -> first event handled.
    counter.take()
    fn = Function("msk-ingest", api, config, work / "msk-cold.log")
    t_done, status, _ = api.invoke(msk_event(records[COMMITS * 1000:(COMMITS + 1) * 1000]))
    seen = counter.take()
    result["msk_cold"] = {"start_to_handled_ms": 1000 * (t_done - fn.started), "status": status,
                          "requests": len([1 for m, p, _ in seen if not kind(m, p).endswith(" data")]),
                          "emulator_ms": 1000 * sum(x[2] for x in seen),
                          "table_versions": COMMITS + 1}
    fn.stop()

    # Peak RSS: a fresh process, one MSK batch of ~6 MB (the Lambda payload limit).
    size, n, start = 0, 0, (COMMITS + 1) * 1000
    while size < 5_900_000 and start + n < len(records):
        size += len(base64.b64encode(records[start + n][0])) + 130
        n += 1
    event = msk_event(records[start:start + n])
    fn = Function("msk-ingest", api, config, work / "msk-rss.log")
    _, status, _ = api.invoke(event)
    result["msk_6mb"] = {"event_mb": len(event) / 1e6, "records": n, "peak_rss_mib": fn.peak_rss_mib(),
                         "status": status}
    fn.stop()

    # The other functions: process start -> first event handled, one event each.
    s3.create_bucket(Bucket="raw-logs") if "raw-logs" not in [b["Name"] for b in s3.list_buckets()["Buckets"]] else None
    fx = ROOT / "tests/fixtures/access-logs"
    s3.upload_file(str(fx / "2026-11-29-08-00-00-A1B2C3D4E5F6.log"), "raw-logs", "logs/2026-11-29-08-00-00-A1B2C3D4E5F6")
    s3.upload_file(str(fx / "2026-11-29-09-00-00-F6E5D4C3B2A1.log.gz"), "raw-logs", "logs/2026-11-29-09-00-00-F6E5D4C3B2A1.gz")
    s3.put_object(Bucket="raw-logs", Key="logs/2026-11-29-10-00-00-0A1B2C3D4E5F", Body=b"-\n")
    result["cold_start_ms"] = {"msk-ingest": result["msk_cold"]["start_to_handled_ms"]}
    for name, event in (("s3-log-ingest", "sqs-s3-notifications.json"),
                        ("maintenance", "maintenance-checkpoint.json"), ("refine", "refine-processed.json")):
        fn = Function(name, api, config, work / f"{name}.log")
        t_done, status, body = api.invoke((ROOT / "events" / event).read_bytes())
        result["cold_start_ms"][name] = 1000 * (t_done - fn.started)
        result.setdefault("cold_start_status", {})[name] = status if status == "response" else body[:200].decode(errors="replace")
        fn.stop()

    # Zipped size of each function (deflate, as `cargo lambda build --output-format zip`).
    result["zip_mb"] = {}
    for name in FUNCTIONS:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.write(ROOT / "target/release" / name, "bootstrap")
        result["zip_mb"][name] = len(buf.getvalue()) / 1e6
    proxy.shutdown()
    return result


# ---------------------------------------------------------------- report

def fmt_range(t, unit="s", digits=2):
    m, lo, hi = t
    return f"{m:.{digits}f} {unit} ({lo:.{digits}f}-{hi:.{digits}f})"


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "ingest-python":
        return ingest_python(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    OUT.mkdir(parents=True, exist_ok=True)
    only = set(os.environ.get("BENCH_ONLY", "ingest,logs,upsert,gold,functions").split(","))
    results = {"size": "quick" if QUICK else "full", "repeat": REPEAT}
    rows = []
    if "ingest" in only:
        r = results["ingest"] = ingest()
        rows.append((f"ingest {r['records']:,} orders, {r['commits']} commits", fmt_range(r["lakestream_s"]),
                     fmt_range(r["python_s"]), f"{r['speedup']:.2f}x"))
        rows.append(("  ingest JSON MB/s per core (decode only)",
                     f"{r['lakestream_mb_s']:.0f} ({r['decode_only_mb_s']:.0f})", "", ""))
        rows.append(("  Parquet written (files, MB)", f"{r['lakestream_files']}, {r['lakestream_parquet_mb']:.1f}",
                     f"{r['python_files']}, {r['python_parquet_mb']:.1f}", ""))
    if "logs" in only:
        r = results["access_logs"] = access_logs()
        ours = r.get("lakestream parse -> Arrow")
        if r.get("lakestream parse -> typed record"):
            rows.append(("access logs MB/s, parse to typed records only",
                         fmt_range(r["lakestream parse -> typed record"], "MB/s", 0), "", ""))
        for name in ("rust regex (Athena) -> strings", "python re (Athena) -> tuples"):
            if ours and name in r:
                rows.append((f"access logs MB/s vs {name.split(' (')[0]}", fmt_range(ours, "MB/s", 0),
                             fmt_range(r[name], "MB/s", 0), f"{ours[0] / r[name][0]:.1f}x"))
    if "upsert" in only:
        r = results["upsert"] = upsert()
        by = {(x["shape"], x["engine"]): x for x in r}
        for shape in ("newest", "spread"):
            a, b = by[(shape, "lakestream")], by[(shape, "python deltalake merge")]
            rows.append((f"upsert {shape} (wall, peak RSS)",
                         f"{a['wall_s']:.2f} s, {a['peak_rss_mib']} MiB", f"{b['wall_s']:.2f} s, {b['peak_rss_mib']} MiB",
                         f"{b['wall_s'] / a['wall_s']:.2f}x, {b['peak_rss_mib'] / a['peak_rss_mib']:.1f}x"))
    if "gold" in only:
        for r in results.setdefault("gold", gold()):
            rows.append((f"gold: +{r['new_rows']:,} rows into {r['source_rows']:,} (incremental vs recompute)",
                         fmt_range((r["lakestream_incremental_s"], *r["lakestream_range"])),
                         fmt_range((r["datafusion_recompute_s"], *r["datafusion_range"])) + " DataFusion",
                         f"{r['datafusion_recompute_s'] / r['lakestream_incremental_s']:.1f}x"))
    if "functions" in only:
        r = results["functions"] = functions()
        w = r["warm_append"]
        rows.append((f"S3 requests per warm append ({w['commits']} commits, besides data PUTs)",
                     f"{w['requests_median']} (max {w['requests_max']}; first 10 {w['first_10_median']}, last 10 {w['last_10_median']})",
                     "", ""))
        rows.append(("  checkpoint commit requests (every 10th)", str(w["checkpoint_commit_requests"]), "", ""))
        c = r["msk_cold"]
        rows.append((f"  cold invocation requests (v{c['table_versions']})",
                     f"{c['requests']} ({c['emulator_ms']:.0f} ms waiting on the emulator)", "", ""))
        rows.append(("log bytes per warm invocation (default level)", f"{w['log_bytes_median']:.0f}", "", ""))
        rows.append((f"peak RSS, one {r['msk_6mb']['event_mb']:.1f} MB MSK batch", f"{r['msk_6mb']['peak_rss_mib']:.0f} MiB", "", ""))
        for name in FUNCTIONS:
            rows.append((f"{name}: start -> first event handled, zip",
                         f"{r['cold_start_ms'][name]:.0f} ms, {r['zip_mb'][name]:.1f} MB", "", ""))
    (OUT / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"\n{'measure':<62} {'Lakestream':<44} {'peer':<26} ratio")
    for m, a, b, ratio in rows:
        print(f"{m:<62} {a:<44} {b:<26} {ratio}")
    print(f"\nJSON: {OUT / 'results.json'}  (BENCH_SIZE={results['size']}, BENCH_REPEAT={REPEAT})")


if __name__ == "__main__":
    main()
