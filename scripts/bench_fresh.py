#!/usr/bin/env python3
"""`make bench-fresh`: end-to-end freshness and cost of the event-driven pipeline, N = 1 and 70.

The real function binaries (msk-ingest, refine; `target/release`, BENCH_PROFILE=debug for a
quick look) run under the local Lambda Runtime API stand-in of `bench-compare`, against the S3
emulator (S3 and SQS behind one counting proxy), invoked as Lambda would invoke them:
  MSK         one event source mapping per topic: records buffered per topic and delivered as one
              MSK event when the oldest has waited MaximumBatchingWindowInSeconds (from
              BENCH_FRESHNESS; a topic's first batch a random share of it, so the topics'
              windows do not all close together) - the seed's `orders` and `members` topics and N Debezium topics
              `crm.public.tNN` of a `[[cdc]]` family (bronze -> silver, SCD1);
  notices     msk-ingest sends refine notices to an SQS FIFO queue after each commit; a poller
              (the SQS event source mapping: up to 10 messages, partial batch response) invokes
              refine with them;
  schedules   the template's refine schedules as the safety net: curated every minute, the
              safety net (`{}`) and gold every 5 minutes.
A busy table gets a record every 2-6 s (seed-like: "a record every few seconds per table");
BENCH_BUSY is the busy share of the CDC tables, the rest get a change every BENCH_IDLE_EVERY
(default 120-600 s: every few minutes; 0: one change, then idle). CDC changes are 60% inserts,
35% updates, 5% deletes. After a warm-up the run is measured for BENCH_SECONDS, then the
batches still open close with their own windows and the pipeline drains (until the notices
queue is empty). The warm-up (the window + the hold + one apply period + 30 s, 90 s more with a
hold) holds every table's first batch and its first two applies, so what a table does once in
its life (creating silver and its tombstone table, anchoring silver there) is not in the
measured window. The S3 requests of one table of
the rest are printed per month ("per table of the rest").

Freshness per layer is read back from the tables' logs (boto3 + pyarrow, not our code): a
record's freshness is the commit time of the first version of the layer's table holding it
(an update: its revision or a later one) minus the record's Kafka timestamp. Raw -> curated ->
processed (orders) and bronze -> silver (CDC); p50, p99, max.

Cost per month (730 h) from what the measured window used, at AWS list prices (us-east-1,
arm64 Lambda; storage excluded, the same for every engine): Lambda requests and GB-seconds
(measured durations x the template's MemorySize), S3 requests by class, SQS FIFO requests
(sends, the poller's receives and deletes; the poller long-polls, 20 s, as Lambda's SQS event
source mapping does, so an idle queue costs 3 receives a minute per poller), CloudWatch Logs ingestion (the functions' bytes +
~400 B of platform lines per invocation) and custom metrics (distinct EMF metrics seen, $0.30
each). Beside it: the cheapest Glue streaming job ($161/month, 2 x G.025X, compute only) and the
naive design - one scheduled invocation per job per window (a minute at least), each loading its tables (measured:
a fresh refine process running one CDC job).

Two more lines per row (since issue 39's steady accounting): every instance talks to the emulator
through a proxy of its own, so each request is known by instance and invocation. "steady": the
month without the window's first meetings (an instance's first log reads of a table, and the
family listing's folder LISTs), plus the whole run's once per instance and INSTANCE_HOURS (an
instance replaced hourly). "at S3": Lambda GB-s with each invocation's own time (wall less the
union of its requests' intervals at the emulator) plus S3_LATENCY_S per request, instead of
the emulator's answers, which take seconds under a burst; the own time is CPU on a whole core,
so below 1,769 MB (one vCPU) it is charged as at 1,769 MB (a smaller function takes longer).
"at S3" counts every request as waited for alone (an upper bound); "S3 ovl" waits once per
request of each invocation's longest chain of requests made one after another (requests that
overlapped at the emulator were in flight together). Both, in the steady month, leave the
waits for the window's first meetings out and add the whole run's once per instance and
INSTANCE_HOURS, as "steady" does with their requests (until stop 57 they counted every
window). The window's requests are written to
target/bench-fresh/requests-*.json: method, path, status, (function, instance, invocation),
start, seconds at the emulator.

BENCH_FRESHNESS (60s | 5m | 15m, default 60s) is every topic's, family's and job's target: the
MSK window follows from it (50 / 250 / 300 s, the template's mapping) and so do the jobs' holds;
the measured time is 120 s or 1.5 times the target (quick), 600 s or four times it (full). Glue
all-in is its compute plus a Spark Delta pipeline's S3 requests per busy table and 100 s
micro-batch (GLUE_TIER1 / GLUE_TIER2 below, DEPLOY.md).

The record plan is generated once per (N, seconds, seed) and cached under
target/bench-fresh/cache. Results: target/bench-fresh/results.json, one row per (target, N, busy
share, the rest's changes, size), kept across runs; the cost curve of every row is printed at the end. BENCH_TABLES
(default "1,70"), BENCH_SIZE (quick|full), BENCH_SEED. Needs MOTO_PORT (`make moto-start`). Not in CI;
no thresholds. The machine's x86 cores stand in for Graviton; durations include the emulator.
"""
import base64
import fcntl
import io
import json
import os
import pathlib
import queue
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_compare as bc  # noqa: E402  (the Runtime API stand-in, the proxy, the emulator URL)

ROOT = bc.ROOT
OUT = ROOT / "target" / "bench-fresh"
QUICK = os.environ.get("BENCH_SIZE", "quick") == "quick"
FRESHNESS_S = {"60s": 60, "5m": 300, "15m": 900}.get(os.environ.get("BENCH_FRESHNESS", "60s"), 60)
# Measured: quick 120 s or 1.5 times the target (a 15-minute target needs its holds in the
# window), full 600 s or four times the target.
SECONDS = int(os.environ.get("BENCH_SECONDS", str(max(120, 3 * FRESHNESS_S // 2)) if QUICK else str(max(600, 4 * FRESHNESS_S))))
# The freshness target of every topic, family and job (60s | 5m | 15m); the MSK batching window
# follows from it as the template's Freshness mapping does (BENCH_WINDOW overrides it).
FRESHNESS = os.environ.get("BENCH_FRESHNESS", "60s")
TARGET_S = {"60s": 60, "5m": 300, "15m": 900}[FRESHNESS]
MARGIN_S = max(10, TARGET_S // 6)
WINDOW = float(os.environ.get("BENCH_WINDOW", str(min(300, TARGET_S - MARGIN_S))))
# A refine job's hold at this target (README "Freshness targets"): its first apply comes that
# long after its table's first batch.
HOLD_S = max(0, TARGET_S - MARGIN_S - int(WINDOW))
# Every table's first batch (creation: bronze, silver and their first runs) lands in the warm-up.
# With a hold, every table's first apply falls due at once (the window + the hold after the
# start) and two refine instances take a while to create 70 silver and tombstone tables: 90 s
# more (measured: at 15 minutes, +30 s left them at the start of the measured window). The
# second apply too (one apply period later: the window, or the target less its margin with a
# hold): what a table does once in its life lands there when its first batch had no delete
# (the tombstone table's creation, at 60 s) or with the first inline tombstones (the commit
# anchoring silver in its tombstone table, at 15 minutes: 71 of the window's 1,026 PUTs and
# LISTs before it was held in the warm-up). Both wait for a table's first deletes, so at 60 s
# some still land in the window (on the dear side).
APPLY_PERIOD = max(int(WINDOW), TARGET_S - MARGIN_S if HOLD_S else 0)
WARMUP = int(WINDOW) + HOLD_S + APPLY_PERIOD + 30 + (90 if HOLD_S else 0)
# After the last record: its batch, then the held applies (their notices come back when due).
DRAIN = 45 + HOLD_S
TABLES = [int(x) for x in os.environ.get("BENCH_TABLES", "1,70").split(",")]
SEED = int(os.environ.get("BENCH_SEED", "20261202"))
# Share of the CDC tables that are busy (a change every 2-6 s). The others ("the rest") get a
# change every BENCH_IDLE_EVERY seconds ("A-B": uniform between A and B; default 120-600, a change
# every few minutes), or, at "0", one change in the warm-up (their tables exist) and then none:
# idle, as most tables of a 70-table database are.
BUSY = float(os.environ.get("BENCH_BUSY", "1"))
IDLE_EVERY = os.environ.get("BENCH_IDLE_EVERY", "120-600")
if IDLE_EVERY != "0":
    IDLE_GAP = tuple(float(x) for x in IDLE_EVERY.split("-"))
    assert len(IDLE_GAP) == 2 and 0 < IDLE_GAP[0] <= IDLE_GAP[1], "BENCH_IDLE_EVERY: A-B seconds, or 0"
PROFILE = os.environ.get("BENCH_PROFILE", "release")
WORKERS = 2  # concurrent instances per function
MOTO = bc.MOTO

# AWS list prices, us-east-1 (December 2026).
LAMBDA_GB_S = 0.0000133334  # arm64
LAMBDA_REQ = 0.20 / 1e6
S3_TIER1 = 0.005 / 1000  # PUT, COPY, POST, LIST
S3_TIER2 = 0.0004 / 1000  # GET, HEAD, everything else but DELETE
SQS_FIFO = 0.50 / 1e6
LOGS_GB = 0.50
METRIC_MONTH = 0.30
HOURS = 730
# How long an instance lives before Lambda replaces it (a new one meets every table again):
# AWS does not say; instances serving a steady flow live for hours. One hour is the assumption
# behind the "steady" month (steady_total), on the dear side.
INSTANCE_HOURS = 1
# S3's latency per request for the "Lambda at S3" line: AWS says small requests' median
# latency is "often in the range of tens of milliseconds" (whitepaper "Best Practices Design
# Patterns: Optimizing Amazon S3 Performance", "Timeouts and Retries for Latency-Sensitive
# Applications"); 50 ms, every request on the critical path.
S3_LATENCY_S = 0.050
GLUE_MONTH = 161.0
# Glue all-in: its compute plus the S3 requests a Spark Delta streaming pipeline makes per busy
# table and 100 s micro-batch (Glue's default trigger), bronze (append) and silver (foreachBatch
# MERGE) queries, counted from what each writes and lists (DEPLOY.md "Glue all-in"):
#   per query: streaming checkpoint offsets/<n> and commits/<n> (S3A: PUT of a temp object +
#   COPY to its name each = 4 tier-1; an exists HEAD + the metadata log's LIST-less GET each = 4
#   tier-2); the Delta commit (1 log PUT, the snapshot update's LIST of _delta_log = 2 tier-1;
#   GET of the new commit + _last_checkpoint = 2 tier-2); a checkpoint every 10 commits (PUT
#   of the checkpoint + _last_checkpoint = 0.2 tier-1);
#   data: bronze 1 PUT; silver 1 data PUT + 1 change-data PUT and 3 GETs of the file it rewrites.
GLUE_BATCH_S = 100
GLUE_TIER1 = 2 * (4 + 2 + 0.2) + 1 + 2
GLUE_TIER2 = 2 * (4 + 2) + 3
PLATFORM_LOG_BYTES = 400
# Lambda: "at 1,769 MB, a function has the equivalent of one vCPU"; CPU scales with memory below.
FULL_CORE_MB = 1769


def memory_sizes():
    text = (ROOT / "template.yaml").read_text()
    out = {}
    for fn, param in (("msk-ingest", "MskIngestMemory"), ("refine", "RefineMemory")):
        m = re.search(rf"\n  {param}:\n    Type: Number\n    Default: (\d+)", text)
        out[fn] = int(m.group(1))
    return out


# ---------------------------------------------------------------- workload

def plan(n, seconds):
    """(offset s, topic, kind, key, rev) for every record of the run, cached."""
    path = OUT / "cache" / f"plan-{n}-{WARMUP}-{seconds}-{SEED}-{BUSY:g}-{IDLE_EVERY}.json"
    if path.exists():
        return json.loads(path.read_text())
    rng = random.Random(SEED + n)
    topics = ["orders"] + [f"crm.public.t{i:02d}" for i in range(n)]
    busy = max(1, round(BUSY * n))
    events = []
    total = WARMUP + seconds
    for j, topic in enumerate(topics):
        t = rng.uniform(0, 4)
        keys, next_id = {}, 1
        # The rest: a change every few minutes, or one change in the warm-up (idle).
        rest = j > busy
        until = t + 0.001 if rest and IDLE_EVERY == "0" else total
        while t < until:
            if topic == "orders":
                events.append((t, topic, "c", None, 0))
            else:
                r = rng.random()
                live = [k for k, v in keys.items() if v is not None]
                if r < 0.60 or not live:
                    k = next_id
                    next_id += 1
                    keys[k] = 1
                    events.append((t, topic, "c", k, 1))
                elif r < 0.95:
                    k = rng.choice(live)
                    keys[k] += 1
                    events.append((t, topic, "u", k, keys[k]))
                else:
                    k = rng.choice(live)
                    events.append((t, topic, "d", k, keys[k]))
                    keys[k] = None
            t += rng.uniform(*IDLE_GAP) if rest and IDLE_EVERY != "0" else rng.uniform(2, 6)
    events.sort()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(events))
    return events


OWNERS = [f"owner{i}" for i in range(20)]


def order_value(order_id, ts_ms):
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts_ms / 1000)) + f".{ts_ms % 1000:03d}Z"
    return {"order_id": order_id, "order_owner": OWNERS[order_id % len(OWNERS)],
            "order_value": order_id % 500, "timestamp": iso}


def debezium(table, op, key, rev, ts_ms, lsn):
    row = {"id": key, "rev": rev, "name": f"{table}-{key}-{rev}", "amount": key * 10 + rev}
    before = None if op == "c" else {**row, "rev": rev - (op == "u")}
    after = None if op == "d" else row
    value = {"before": before, "after": after, "op": op, "ts_ms": ts_ms,
             "source": {"connector": "postgresql", "db": "crm", "schema": "public", "table": table,
                        "lsn": lsn, "ts_ms": ts_ms}}
    return json.dumps({"id": key}).encode(), json.dumps(value).encode()


def msk_event(topic, records):
    """records: (offset, ts_ms, key bytes|None, value bytes)."""
    recs = [{"topic": topic, "partition": 0, "offset": o, "timestamp": ts, "timestampType": "CREATE_TIME",
             "key": base64.b64encode(k).decode() if k else None, "value": base64.b64encode(v).decode(),
             "headers": []} for o, ts, k, v in records]
    for r in recs:
        if r["key"] is None:
            del r["key"]
    return json.dumps({"eventSource": "aws:kafka",
                       "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/bench/x",
                       "bootstrapServers": "b-1:9098", "records": {f"{topic}-0": recs}}).encode()


# ---------------------------------------------------------------- functions

def s3_class(method, path, bucket):
    if not path.startswith(f"/{bucket}"):
        return "sqs"
    if method == "DELETE":
        return "free"
    q = path.split("?", 1)[1] if "?" in path else ""
    if method in ("PUT", "POST") or "list-type=2" in q or (method == "GET" and path.split("?")[0].count("/") <= 1):
        return "tier1"
    return "tier2"


class Function:
    """One instance of a function: its process and its own Runtime API."""

    def __init__(self, name, config, env_extra, log):
        self.api = bc.RuntimeApi()
        env = {**os.environ, "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{self.api.port}",
               "AWS_LAMBDA_FUNCTION_NAME": name, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory_sizes().get(name, 1024)),
               "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_LAMBDA_LOG_STREAM_NAME": "bench",
               "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}", "LAKESTREAM_CONFIG": str(config),
               "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
               "AWS_ALLOW_HTTP": "true", **env_extra}
        env.pop("RUST_LOG", None)
        self.log = log
        self.proc = subprocess.Popen([str(ROOT / "target" / PROFILE / name)], env=env,
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT)
        self.lock = threading.Lock()
        self.invocations = 0  # started so far (tags the requests its proxy sees)
        self.walls = []  # (invocation, started (wall clock), wall s)

    def invoke(self, body):
        with self.lock:
            self.invocations += 1
            started = time.time()
            t0 = time.perf_counter()
            _, status, out = self.api.invoke(body, timeout=600)
            wall = time.perf_counter() - t0
            self.walls.append((self.invocations, started, wall))
            return wall, status, out

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Pool:
    """WORKERS instances of one function fed from a queue; records every invocation."""

    def __init__(self, name, config, env, work, counter):
        # Each instance talks to the emulator through its own counting proxy (its own copy of
        # the config names it), so every request is known by instance and invocation: what an
        # instance reads of a table the first time it meets it is told apart (first_meetings).
        self.fns, self.proxies = [], []
        shared = env["AWS_ENDPOINT_URL"]
        for i in range(WORKERS):
            holder = {}
            proxy = bc.start_proxy(counter, tag=lambda h=holder, i=i: (name, i, h["fn"].invocations if "fn" in h else 0))
            own = f"http://127.0.0.1:{proxy.server_address[1]}"
            cfg = work / f"{name}-{i}.toml"
            cfg.write_text(config.read_text().replace(f'endpoint_url = "{shared}"', f'endpoint_url = "{own}"'))
            holder["fn"] = Function(name, cfg, {**env, "AWS_ENDPOINT_URL": own}, work / f"{name}-{i}.log")
            self.fns.append(holder["fn"])
            self.proxies.append(proxy)
        self.q = queue.Queue()
        self.calls = []  # (t_done, wall s, status)
        self.lock = threading.Lock()
        for f in self.fns:
            threading.Thread(target=self.serve, args=(f,), daemon=True).start()

    def serve(self, fn):
        while True:
            body, done = self.q.get()
            if body is None:
                return
            try:
                wall, status, out = fn.invoke(body)
                with self.lock:
                    self.calls.append((time.time(), wall, status))
                if status != "response":
                    print(f"  ! {fn.log.name}: {out[:300]!r}", file=sys.stderr)
                if done:
                    done(status, out)
            finally:
                # Counted done even when the invocation or its callback raised: the drain's
                # `idle()` would otherwise wait out its bound.
                self.q.task_done()

    def submit(self, body, done=None):
        self.q.put((body, done))

    def idle(self):
        """Nothing queued or running."""
        return self.q.unfinished_tasks == 0

    def log_bytes(self):
        return sum(f.log.stat().st_size for f in self.fns)

    def stop(self):
        for f in self.fns:
            f.stop()
        for p in self.proxies:
            p.shutdown()


# ---------------------------------------------------------------- one run

def run(n, sizes):
    import boto3

    # One directory per row: two rows may run at once (on one emulator).
    work = OUT / (f"n{n}-{FRESHNESS}-{BUSY:g}" + (f"-rest-{IDLE_EVERY}" if BUSY < 1 else "") + ("" if QUICK else "-full"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    events = plan(n, SECONDS)
    s3 = boto3.client("s3", endpoint_url=MOTO, region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    sqs = boto3.client("sqs", endpoint_url=MOTO, region_name="us-east-1",
                       aws_access_key_id="test", aws_secret_access_key="test")
    bucket = f"bench-fresh-{n}-{int(time.time())}"
    s3.create_bucket(Bucket=bucket)
    url = sqs.create_queue(QueueName=f"{bucket}.fifo",
                           Attributes={"FifoQueue": "true", "VisibilityTimeout": "60"})["QueueUrl"]
    counter = bc.Counter()
    proxy = bc.start_proxy(counter)
    endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
    example = (ROOT / "lakestream.toml").read_text()
    config = work / "lakestream.toml"
    example = example.replace('freshness = "60s"', f'freshness = "{FRESHNESS}"')
    config.write_text(example.replace(
        'root = "./lake"',
        f'root = "s3://{bucket}/lake"\nendpoint_url = "{endpoint}"\nregion = "us-east-1"\nallow_http = true')
        + '\n[[cdc]]\nfamily = "crm"\nsource = "debezium"\ntopics = ["crm.public.*"]\nscd = 1\n'
        'columns = { "*" = ["id int64", "rev int64", "name string", "amount int64"] }\n'
        f'freshness = "{FRESHNESS}"\n')
    env = {"AWS_ENDPOINT_URL": endpoint, "LAKESTREAM_REFINE_QUEUE_URL": url}
    ingest = Pool("msk-ingest", config, env, work, counter)
    refine = Pool("refine", config, env, work, counter)

    # Memberships first (every owner, an hour before the run), so every order joins.
    t0 = time.time()
    members = [(i, int(t0 * 1000) - 600_000, None, json.dumps(
        {"order_owner": o, "membership": "gold", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0 - 600))}).encode())
        for i, o in enumerate(OWNERS)]
    ingest.submit(msk_event("members", members))

    gen = {}  # (layer key) -> gen ms
    deleted = set()  # (topic, key) deleted in the run: silver may never show its earlier revisions
    buffers, offsets, lsn = {}, {}, [0]
    stop = threading.Event()
    sqs_requests = [0]

    def poller():
        while not stop.is_set():
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=20,
                                      AttributeNames=["All"])
            sqs_requests[0] += 1
            msgs = got.get("Messages", [])
            if not msgs:
                continue
            records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                        "attributes": m.get("Attributes", {}), "messageAttributes": {}, "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q.fifo", "awsRegion": "us-east-1"}
                       for m in msgs]
            finished = threading.Event()

            def done(status, out, msgs=msgs):
                failed = set()
                if status == "response":
                    try:
                        failed = {f["itemIdentifier"] for f in json.loads(out).get("batchItemFailures", [])}
                    except ValueError:
                        pass
                else:
                    failed = {m["MessageId"] for m in msgs}
                ok = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)
                      if m["MessageId"] not in failed]
                if ok:
                    sqs.delete_message_batch(QueueUrl=url, Entries=ok)
                    sqs_requests[0] += 1
                finished.set()

            refine.submit(json.dumps({"Records": records}).encode(), done)
            finished.wait(600)

    pollers = [threading.Thread(target=poller, daemon=True) for _ in range(WORKERS)]
    for p in pollers:
        p.start()

    def schedules():
        ticks = [(60, b'{"jobs":["curated"]}'), (300, b"{}"), (300, b'{"jobs":["gold"]}')]
        # Each schedule first fires one period after the start, as a rate schedule does: a
        # tick at the start, before any table exists, would keep a family listing without
        # the family's tables for the listing's TTL (15 minutes), so the safety net's probes
        # of idle tables would be missing from a short window.
        last = {i: time.time() for i in range(len(ticks))}
        while not stop.is_set():
            now = time.time()
            for i, (every, body) in enumerate(ticks):
                if now - last[i] >= every:
                    last[i] = now
                    refine.submit(body)
            time.sleep(0.5)

    threading.Thread(target=schedules, daemon=True).start()

    def flush(topic):
        recs = buffers.pop(topic, [])
        if recs:
            ingest.submit(msk_event(topic, recs))

    start = time.time() + 1
    first = {}
    # Each topic's first batch waits a random share of the window, so the topics' windows do not
    # all close together (MSK's mappings do not start together either): a measured window then
    # holds each table's average number of commits, not one more or one fewer for all of them.
    phase_rng = random.Random(SEED)
    first_wait = {t: phase_rng.uniform(0.1, 1.0) * WINDOW for t in sorted({e[1] for e in events})}
    measure_from = start + WARMUP
    snap = {}
    i = 0
    while i < len(events) or buffers:
        now = time.time()
        if i >= len(events) and "t_end" not in snap:
            # The last record is in: the measured window ends. The batches still open close
            # with their own windows, as MSK's would (not all at once: 70 tables' last applies
            # would then fall due together, and queue behind one another).
            snap.update(t_end=now, req_end=len(counter.items), ing_end=len(ingest.calls),
                        ref_end=len(refine.calls), ilog_end=ingest.log_bytes(),
                        rlog_end=refine.log_bytes(), sqs_end=sqs_requests[0])
        if "t" not in snap and now >= measure_from:
            snap.update(t=now, req=len(counter.items), ing=len(ingest.calls), ref=len(refine.calls),
                        ilog=ingest.log_bytes(), rlog=refine.log_bytes(), sqs=sqs_requests[0])
        while i < len(events) and start + events[i][0] <= now:
            off, topic, op, key, rev = events[i]
            i += 1
            ts = int((start + off) * 1000)
            o = offsets.get(topic, 0)
            offsets[topic] = o + 1
            measured = start + off >= measure_from
            if topic == "orders":
                oid = o + 1
                value = json.dumps(order_value(oid, ts)).encode()
                buffers.setdefault(topic, []).append((o, ts, None, value))
                if measured:
                    gen[("orders", oid)] = ts
            else:
                lsn[0] += 1
                k, v = debezium(topic.rsplit(".", 1)[1], op, key, rev, ts, lsn[0])
                buffers.setdefault(topic, []).append((o, ts, k, v))
                if measured and op != "d":
                    gen[(topic, key, rev)] = ts
                if op == "d":
                    deleted.add((topic, key))
            first.setdefault(topic, now)
        for topic in list(buffers):
            if now - first.get(topic, now) >= first_wait.get(topic, WINDOW):
                first.pop(topic, None)
                first_wait.pop(topic, None)
                flush(topic)
        time.sleep(0.05)
    # Drain: everything delivered is refined: the last batches' notices come back when their
    # jobs are due (the hold after the last commit), then the queue empties; then one
    # safety-net tick. Bounded: a notice that never leaves the queue is the tick's.
    time.sleep(DRAIN)
    drain_until = time.time() + 600
    while time.time() < drain_until:
        q = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        if ingest.idle() and refine.idle() and not any(int(v) for v in q.values()):
            break
        time.sleep(5)
    stop.set()
    for p in pollers:
        p.join(10)
    done_tick = threading.Event()
    refine.submit(b"{}", lambda s, o: done_tick.set())
    done_tick.wait(300)
    window = snap["t_end"] - snap["t"]
    items = counter.items[snap["req"]:snap["req_end"]]
    ingest_calls = [c for c in ingest.calls if snap["t"] <= c[0] <= snap["t_end"]]
    refine_calls = [c for c in refine.calls if snap["t"] <= c[0] <= snap["t_end"]]
    sends = sum(1 for m, p, _ in items if s3_class(m, p, bucket) == "sqs")
    classes = {}
    for m, p, _ in items:
        c = s3_class(m, p, bucket)
        classes[c] = classes.get(c, 0) + 1
    metrics = set()
    for pool in (ingest, refine):
        for f in pool.fns:
            for line in f.log.read_text(errors="replace").splitlines():
                if '"CloudWatchMetrics"' not in line:
                    continue
                try:
                    v = json.loads(line)
                except ValueError:
                    continue
                for d in v["_aws"]["CloudWatchMetrics"]:
                    dims = tuple((k, v.get(k)) for k in d["Dimensions"][0])
                    for m in d["Metrics"]:
                        metrics.add((d["Namespace"], dims, m["Name"]))
    result = {
        "target": FRESHNESS, "size": "quick" if QUICK else "full", "tables": n, "busy": BUSY, "idle_every": IDLE_EVERY, "window_s": WINDOW, "measured_s": window, "records": sum(1 for e in events if e[0] >= WARMUP),
        "invocations": {"msk-ingest": len(ingest_calls), "refine": len(refine_calls)},
        "failed_invocations": sum(1 for c in ingest_calls + refine_calls if c[2] != "response"),
        "duration_ms_median": {"msk-ingest": 1000 * statistics.median([c[1] for c in ingest_calls] or [0]),
                               "refine": 1000 * statistics.median([c[1] for c in refine_calls] or [0])},
        "gb_s": {"msk-ingest": sum(c[1] for c in ingest_calls) * sizes["msk-ingest"] / 1024,
                 "refine": sum(c[1] for c in refine_calls) * sizes["refine"] / 1024},
        "s3_requests": {k: v for k, v in classes.items() if k != "sqs"},
        "sqs_requests": sends + snap["sqs_end"] - snap["sqs"],
        "log_bytes": (snap["ilog_end"] - snap["ilog"]) + (snap["rlog_end"] - snap["rlog"])
        + PLATFORM_LOG_BYTES * (len(ingest_calls) + len(refine_calls)),
        "custom_metrics": len(metrics),
        "s3_by_kind": dict(sorted(
            ((k, sum(1 for m, p, _ in items if s3_class(m, p, bucket) != "sqs" and bc.kind(m, p) == k))
             for k in {bc.kind(m, p) for m, p, _ in items if s3_class(m, p, bucket) != "sqs"}),
            key=lambda kv: -kv[1])),
    }
    rest = f"-rest-{IDLE_EVERY}" if BUSY < 1 else ""
    (OUT / f"requests-{FRESHNESS}-{n}-{BUSY:g}{rest}{'' if QUICK else '-full'}.json").write_text(json.dumps(
        [(m, p, st, list(tg[:3]) if tg else None, tg[3] if tg else None, round(secs, 4)) for (m, p, secs), st, tg in
         zip(items, counter.statuses[snap["req"]:snap["req_end"]], counter.tags[snap["req"]:snap["req_end"]])]))
    result["freshness"] = freshness(s3, bucket, n, gen, deleted)
    result["naive"] = naive(config, env, work, n, counter, bucket, sizes)
    result["cost"] = cost(result, window)
    result["cost"]["warm_total"] = warm_total(result, window)
    marks = {"window": set(), "run": set()}
    result["first_meetings"] = first_meetings(counter.items, counter.tags, snap["req"], snap["req_end"], bucket,
                                             counter.statuses, marks)
    result["gb_s_at_s3"] = lambda_at_s3((ingest, refine), counter.items, counter.tags, snap["t"], snap["t_end"], sizes)
    # Own time alone, so the line can be recomputed at another latency: own + (at_s3 - own) * L / S3_LATENCY_S.
    result["gb_s_own"] = lambda_at_s3((ingest, refine), counter.items, counter.tags, snap["t"], snap["t_end"], sizes, 0.0)
    result["cost"]["lambda_gb_s_at_s3"] = sum(result["gb_s_at_s3"].values()) * LAMBDA_GB_S * HOURS * 3600 / window
    # Requests in flight together wait once (the chain the invocation made one after another).
    result["gb_s_at_s3_overlap"] = lambda_at_s3((ingest, refine), counter.items, counter.tags, snap["t"], snap["t_end"],
                                                sizes, overlap=True)
    result["cost"]["lambda_gb_s_at_s3_overlap"] = (sum(result["gb_s_at_s3_overlap"].values()) * LAMBDA_GB_S * HOURS
                                                   * 3600 / window)
    result["cost"]["steady_total"] = steady_total(result, window)
    # The steady month's Lambda at S3: the window's invocations without their first meetings'
    # waits, plus the whole run's first meetings' waits once per instance and INSTANCE_HOURS (as
    # steady_total charges their requests; until stop 57 their waits counted every window).
    for key, overlap in (("lambda_gb_s_at_s3_steady", False), ("lambda_gb_s_at_s3_overlap_steady", True)):
        def gb_s(t_from, t_to, skip=frozenset()):
            return sum(lambda_at_s3((ingest, refine), counter.items, counter.tags, t_from, t_to, sizes,
                                    overlap=overlap, skip=skip).values())
        warm = gb_s(snap["t"], snap["t_end"], marks["window"])
        met = gb_s(float("-inf"), float("inf")) - gb_s(float("-inf"), float("inf"), marks["run"])
        result["cost"][key] = (warm * HOURS * 3600 / window + met * HOURS / INSTANCE_HOURS) * LAMBDA_GB_S
    busy_tables = max(1, round(BUSY * n)) + 1  # busy CDC tables + orders
    windows = window / WINDOW
    result["per_table_window"] = {k: v / (busy_tables * windows) for k, v in result["s3_by_kind"].items()}
    result["glue_all_in"] = glue_all_in(busy_tables)
    result["per_rest_table_month"] = rest_table_cost(items, bucket, n, window)
    ingest.stop()
    refine.stop()
    proxy.shutdown()
    return result


# ---------------------------------------------------------------- read back

def commits(s3, bucket, table):
    """(commit ms, [added data file keys]) per version, in order."""
    prefix = f"lake/{table}/_delta_log/"
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if re.search(r"/\d{20}\.json$", o["Key"])]
    out = []
    for k in sorted(keys):
        ts, adds = None, []
        for line in s3.get_object(Bucket=bucket, Key=k)["Body"].read().decode().splitlines():
            a = json.loads(line)
            if "commitInfo" in a:
                ts = a["commitInfo"].get("inCommitTimestamp") or a["commitInfo"].get("timestamp")
            if "add" in a:
                adds.append(a["add"]["path"])
        out.append((ts, adds))
    return out


def rows(s3, bucket, table, path, columns):
    import pyarrow.parquet as pq
    from urllib.parse import unquote

    body = s3.get_object(Bucket=bucket, Key=f"lake/{table}/{unquote(path)}")["Body"].read()
    t = pq.read_table(io.BytesIO(body))
    return list(zip(*[t.column(c).to_pylist() for c in columns]))


def visible(s3, bucket, table, columns, want):
    """`want`: (id, rev) -> gen ms. For each, the first commit time at which the table holds the
    id at that revision or a later one (rev 0: the id at all), minus its gen time."""
    pending = {}
    for (key, rev), ms in want.items():
        pending.setdefault(key, []).append((rev, ms))
    lags, left = [], len(want)
    for ts, adds in commits(s3, bucket, table):
        if not left:
            break
        for path in adds:
            for row in rows(s3, bucket, table, path, columns):
                waiting = pending.get(row[0])
                if not waiting:
                    continue
                rev = row[1] if len(row) > 1 else 0
                keep = []
                for r, ms in waiting:
                    if rev is not None and r <= rev:
                        lags.append(ts - ms)
                        left -= 1
                    else:
                        keep.append((r, ms))
                pending[row[0]] = keep
    return lags, left


def freshness(s3, bucket, n, gen, deleted):
    orders = {(k[1], 0): v for k, v in gen.items() if k[0] == "orders"}
    out = {}
    for layer, table in (("raw", "raw/order"), ("curated", "curated/order"), ("processed", "processed/order")):
        lags, missing = visible(s3, bucket, table, ["order_id"], orders)
        out[layer] = summary(lags, missing)
    for layer, tmpl in (("bronze", "bronze/crm/public/{}"), ("silver", "silver/crm/public/{}")):
        lags, missing = [], 0
        for i in range(n):
            t = f"t{i:02d}"
            topic = f"crm.public.{t}"
            # A key deleted later may leave silver before an earlier revision of it is applied
            # (both in one batch): silver is measured on keys never deleted, bronze on all.
            want = {(k[1], k[2]): v for k, v in gen.items() if k[0] == topic
                    and (layer == "bronze" or (topic, k[1]) not in deleted)}
            lg, ms = visible(s3, bucket, tmpl.format(t), ["id", "rev"], want)
            lags += lg
            missing += ms
        out[layer] = summary(lags, missing)
    return out


def summary(lags, missing):
    if not lags:
        return {"rows": 0, "missing": missing}
    s = sorted(x / 1000 for x in lags)
    return {"rows": len(s), "missing": missing, "p50": statistics.median(s),
            "p99": s[min(len(s) - 1, int(0.99 * len(s)))], "max": s[-1]}


# ---------------------------------------------------------------- naive and cost

def naive(config, env, work, n, counter, bucket, sizes):
    """One fresh refine process running one CDC job (it loads its tables): per invocation, one
    invocation per job per window (per minute at least)."""
    walls, reqs = [], []
    for i in range(3):
        fn = Function("refine", config, {k: v for k, v in env.items() if k != "LAKESTREAM_REFINE_QUEUE_URL"},
                      work / f"naive-{i}.log")
        before = len(counter.items)
        wall, status, _ = fn.invoke(json.dumps({"jobs": [f"cdc-crm/public.t{i % n:02d}"]}).encode())
        made = counter.items[before:]
        fn.stop()
        walls.append(wall)
        reqs.append({"tier1": sum(1 for m, p, _ in made if s3_class(m, p, bucket) == "tier1"),
                     "tier2": sum(1 for m, p, _ in made if s3_class(m, p, bucket) == "tier2")})
    wall = statistics.median(walls)
    t1 = statistics.median(r["tier1"] for r in reqs)
    t2 = statistics.median(r["tier2"] for r in reqs)
    jobs = n + 3  # every CDC table's apply job + curated, processed, gold
    # One scheduled invocation per job per window (at least a minute: EventBridge's finest rate).
    per_month = jobs * 3600 / max(60, WINDOW) * HOURS
    dollars = per_month * (LAMBDA_REQ + wall * sizes["refine"] / 1024 * LAMBDA_GB_S + t1 * S3_TIER1 + t2 * S3_TIER2
                           + PLATFORM_LOG_BYTES / 1e9 * LOGS_GB)
    return {"invocation_ms": 1000 * wall, "tier1": t1, "tier2": t2, "jobs": jobs, "month": dollars}


def rest_table_cost(items, bucket, n, window):
    """S3 requests of the rest's tables (bronze, silver, tombstones of the CDC tables that are
    not busy), per table and month: what one such table costs in storage requests."""
    busy = max(1, round(BUSY * n))
    rest = {f"t{i:02d}" for i in range(busy, n)}
    if not rest:
        return None
    tier = {"tier1": 0, "tier2": 0}
    for m, p, _ in items:
        c = s3_class(m, p, bucket)
        hit = re.search(r"(?:public/|public%2F|public\.)(t\d+)(?:/|%2F)", p)
        if c in tier and hit and hit.group(1) in rest:
            tier[c] += 1
    m = HOURS * 3600 / window
    return {"tables": len(rest), "changes": "none (idle)" if IDLE_EVERY == "0" else f"every {IDLE_EVERY} s",
            "tier1": tier["tier1"], "tier2": tier["tier2"],
            "month": (tier["tier1"] * S3_TIER1 + tier["tier2"] * S3_TIER2) * m / len(rest)}


def glue_all_in(busy_tables):
    """Glue's compute plus its S3 requests for the busy tables (idle tables make no batches)."""
    batches = busy_tables * HOURS * 3600 / GLUE_BATCH_S
    return GLUE_MONTH + batches * (GLUE_TIER1 * S3_TIER1 + GLUE_TIER2 * S3_TIER2)


def log_table(method, path):
    """The table whose log a request reads (a GET or HEAD under `_delta_log/`, a LIST of it),
    or for another LIST its prefix (the family listing asking a folder whether it is a table:
    a new instance asks every folder once, a warm one every folder once an hour)."""
    p, _, q = path.partition("?")
    if method in ("GET", "HEAD") and "/_delta_log/" in p and "/lake/" in p:
        return p.split("/lake/", 1)[1].split("/_delta_log/", 1)[0]
    if method == "GET" and "list-type=2" in q:
        from urllib.parse import parse_qs
        prefix = parse_qs(q).get("prefix", [""])[0]
        if "/_delta_log" in prefix and "lake/" in prefix:
            return prefix.split("lake/", 1)[1].split("/_delta_log", 1)[0]
        if "lake/" in prefix:
            return "list:" + prefix.split("lake/", 1)[1]
    return None


def request_chain(reqs):
    """The longest chain of `reqs` ((start, end) at the emulator, sorted by start) in which each
    request started after the one before it ended: the requests the invocation made one after
    another. At S3's latency the invocation waits about this many latencies (those that
    overlapped at the emulator were in flight together, as they would be at S3)."""
    by_end = sorted(range(len(reqs)), key=lambda k: reqs[k][1])
    chain, done_max, j = [0] * len(reqs), 0, 0
    for k, (a, _) in enumerate(reqs):
        while j < len(by_end) and reqs[by_end[j]][1] <= a:
            done_max = max(done_max, chain[by_end[j]])
            j += 1
        chain[k] = done_max + 1
    return max(chain, default=0)


def lambda_at_s3(pools, items, tags, t_from, t_to, sizes, latency_s=None, overlap=False, skip=frozenset()):
    """GB-s of the window's invocations with the emulator's time swapped for S3's: each
    invocation's own time (its wall less the union of its requests' intervals at the emulator)
    plus `latency_s` (S3_LATENCY_S) per request, as if none overlapped (so an upper bound);
    with `overlap`, per request of the longest chain made one after another instead
    ([`request_chain`]: requests in flight together wait once). The
    own time is CPU measured on a whole core; below FULL_CORE_MB Lambda has a share of a core,
    so the own time costs its GB-s at FULL_CORE_MB whatever the memory (the waits scale). The
    emulator is one Python process: under a burst its answers take seconds, and so would every
    invocation. With `latency_s` 0: the own time alone; the per-request part is linear in it.
    `skip`: indices into `items` whose waits are left out (first meetings, charged at their own
    rate by the steady month); the own time is the same either way."""
    latency_s = S3_LATENCY_S if latency_s is None else latency_s
    spans = {}
    for k, ((m, p, secs), tag) in enumerate(zip(items, tags)):
        if tag is not None:
            spans.setdefault(tag[:3], []).append((tag[3], tag[3] + secs, k))
    out = {}
    for pool in pools:
        for i, fn in enumerate(pool.fns):
            name = fn.log.name.rsplit("-", 1)[0]
            for inv, started, wall in fn.walls:
                if not t_from <= started <= t_to:
                    continue
                made = sorted(spans.get((name, i, inv), []))
                reqs = [(a, b) for a, b, _ in made]
                kept = [(a, b) for a, b, k in made if k not in skip]
                io, end = 0.0, None
                for a, b in reqs:
                    if end is None or a > end:
                        io += b - a
                        end = b
                    elif b > end:
                        io += b - end
                        end = b
                own = max(0.0, wall - io)
                waits = request_chain(kept) if overlap else len(kept)
                # The own time is CPU, measured on a whole core: below FULL_CORE_MB Lambda gives
                # a share of one, so it takes longer and costs the same GB-s as at FULL_CORE_MB.
                cpu_mb = max(sizes[name], FULL_CORE_MB)
                out[name] = out.get(name, 0.0) + (own * cpu_mb + waits * latency_s * sizes[name]) / 1024
    return out


def first_meetings(items, tags, start, end, bucket, statuses, marks=None):
    """The log reads each function instance made of a table in the first of its invocations that
    read that table's log (its cold load, and what else that invocation read of the log), counted
    in the measured window (`window`, items start..end) and over the whole run (`run`, warm-up
    included). The run's leave out a table's creation: the invocations of an instance up to and
    including the one that created the table (its first commit's PUT landed), whose lookups found
    no table or made it (once in its life); that instance's first invocation after counts
    instead (its warm reads: less than a new instance's cold load). A table never created (an idle table's
    tombstone table) is met by every instance. A month of warm instances pays the run's once per
    instance start, the window's not every ten minutes. `marks` (optional): {"window": set(),
    "run": set()} filled with the indices of the requests counted in each part."""
    out = {"run": {"tier1": 0, "tier2": 0, "by_kind": {}}, "window": {"tier1": 0, "tier2": 0, "by_kind": {}}}
    created = {}
    for k in range(end):
        m, p, _ = items[k]
        if (m == "PUT" and p.endswith("/_delta_log/" + "0" * 20 + ".json") and "/lake/" in p
                and tags[k] is not None and 200 <= (statuses[k] or 0) < 300):
            created.setdefault(p.split("/lake/", 1)[1].split("/_delta_log/", 1)[0], (tags[k][3], tags[k][:3]))

    def count(part, m, p):
        c = s3_class(m, p, bucket)
        out[part][c] = out[part].get(c, 0) + 1
        kind = bc.kind(m, p)
        out[part]["by_kind"][kind] = out[part]["by_kind"].get(kind, 0) + 1

    first, first_existing = {}, {}
    for k in range(end):
        tag = tags[k]
        if tag is None:
            continue
        m, p, _ = items[k]
        t = log_table(m, p)
        if t is None:
            continue
        key = (tag[0], tag[1], t)
        if k >= start and first.setdefault(key, tag[2]) == tag[2]:
            count("window", m, p)
            if marks is not None:
                marks["window"].add(k)
        elif k < start:
            first.setdefault(key, tag[2])
        made = created.get(t)
        creation = (not t.startswith("list:") and made is not None
                    and (tag[3] <= made[0] or tuple(tag[:3]) == made[1]))
        if not creation and first_existing.setdefault(key, tag[2]) == tag[2]:
            count("run", m, p)
            if marks is not None:
                marks["run"].add(k)
    out["instance_tables"] = len(first)
    return out


def steady_total(r, window):
    """The month with first meetings at their own rate: the window's total without its first
    meetings (first_meetings), plus the whole run's first meetings once per INSTANCE_HOURS for
    every instance (each instance replaced that often, meeting every table it met again)."""
    fm = r.get("first_meetings")
    if not fm:
        return None
    price = lambda part: fm[part].get("tier1", 0) * S3_TIER1 + fm[part].get("tier2", 0) * S3_TIER2  # noqa: E731
    return r["cost"]["total"] - price("window") * HOURS * 3600 / window + price("run") * HOURS / INSTANCE_HOURS


def warm_total(r, window):
    """The total without the requests only cold loads make: every LIST (a warm path makes none:
    the request tests assert it; table creation and the 15-minute family listing are the rest)
    and every `_last_checkpoint` GET. A quick run meets most tables for the first time in each
    of the two instances per function, which a month of warm instances does not."""
    m = HOURS * 3600 / window
    cold = (r["s3_by_kind"].get("LIST", 0) * S3_TIER1
            + r["s3_by_kind"].get("GET _last_checkpoint", 0) * S3_TIER2) * m
    return r["cost"]["total"] - cold


def cost(r, window):
    per_hour = 3600 / window
    m = HOURS * per_hour
    parts = {
        "lambda_requests": (r["invocations"]["msk-ingest"] + r["invocations"]["refine"]) * LAMBDA_REQ * m,
        "lambda_gb_s": (r["gb_s"]["msk-ingest"] + r["gb_s"]["refine"]) * LAMBDA_GB_S * m,
        "s3_put_list": r["s3_requests"].get("tier1", 0) * S3_TIER1 * m,
        "s3_get_head": r["s3_requests"].get("tier2", 0) * S3_TIER2 * m,
        "sqs": r["sqs_requests"] * SQS_FIFO * m,
        "logs": r["log_bytes"] / 1e9 * LOGS_GB * m,
        "metrics": r["custom_metrics"] * METRIC_MONTH,
    }
    parts["total"] = sum(parts.values())
    parts["per_hour"] = {"s3_requests": sum(r["s3_requests"].values()) * per_hour,
                         "gb_s": (r["gb_s"]["msk-ingest"] + r["gb_s"]["refine"]) * per_hour}
    return parts


def report(results):
    print(f"\nbench-fresh: freshness target {FRESHNESS}, window {WINDOW:g} s, a record every 2-6 s per busy table ({BUSY:.0%} of the CDC "
          f"tables busy), {PROFILE} binaries, "
          f"{WORKERS} instances per function")
    for r in results:
        print(f"\nN = {r['tables']} CDC tables + the seed pipeline: {r['records']} records in {r['measured_s']:.0f} s measured; "
              f"{r['invocations']['msk-ingest']} ingest + {r['invocations']['refine']} refine invocations "
              f"({r['failed_invocations']} failed), median {r['duration_ms_median']['msk-ingest']:.0f} / "
              f"{r['duration_ms_median']['refine']:.0f} ms")
        print(f"  {'layer':<10} {'p50 s':>7} {'p99 s':>7} {'max s':>7} {'rows':>7} {'missing':>7}")
        for layer, f in r["freshness"].items():
            if f["rows"]:
                print(f"  {layer:<10} {f['p50']:7.1f} {f['p99']:7.1f} {f['max']:7.1f} {f['rows']:7d} {f['missing']:7d}")
            else:
                print(f"  {layer:<10} {'-':>7} {'-':>7} {'-':>7} {0:7d} {f['missing']:7d}")
        c = r["cost"]
        print("  S3 requests in the window by kind: " + ", ".join(f"{k} {v}" for k, v in r["s3_by_kind"].items()))
        print(f"  per hour: {c['per_hour']['s3_requests']:.0f} S3 requests, {c['per_hour']['gb_s']:.0f} GB-s")
        print("  per month: " + ", ".join(f"{k} ${v:.2f}" for k, v in c.items() if k not in ("total", "per_hour", "warm_total", "steady_total", "lambda_gb_s_at_s3",
                                                                                  "lambda_gb_s_at_s3_overlap",
                                                                                  "lambda_gb_s_at_s3_steady",
                                                                                  "lambda_gb_s_at_s3_overlap_steady")))
        print("  per busy table-window: " + ", ".join(f"{k} {v:.2f}" for k, v in r["per_table_window"].items()))
        rest = r.get("per_rest_table_month")
        if rest:
            print(f"  per table of the rest ({rest['tables']} tables, changes {rest['changes']}): S3 {rest['tier1']} PUT/LIST + "
                  f"{rest['tier2']} GET/HEAD in the window, ${rest['month']:.4f} a month each")
        if "warm_total" in c:
            print(f"  without cold loads (the window's LISTs and _last_checkpoint GETs): ${c['warm_total']:.2f}/month")
        if c.get("lambda_gb_s_at_s3") is not None:
            own = r.get("gb_s_own")
            if own:
                per_month = LAMBDA_GB_S * HOURS * 3600 / r["measured_s"]
                print(f"  Lambda's own time (wall less its requests at the emulator): ${sum(own.values()) * per_month:.2f}/month; "
                      f"each 10 ms of S3 latency per request adds "
                      f"${(sum(r['gb_s_at_s3'].values()) - sum(own.values())) * per_month / (S3_LATENCY_S * 100):.2f}")
            print(f"  Lambda GB-s at S3 (own time + {S3_LATENCY_S * 1000:.0f} ms per request instead of the emulator's): "
                  f"${c['lambda_gb_s_at_s3']:.2f}/month against ${c['lambda_gb_s']:.2f} measured; the total with it "
                  f"${c['total'] - c['lambda_gb_s'] + c['lambda_gb_s_at_s3']:.2f}, steady "
                  f"${at_s3(r):.2f}" + (f" (Lambda ${c['lambda_gb_s_at_s3_steady']:.2f} with the first meetings' waits "
                                        f"once per instance and {INSTANCE_HOURS} h)"
                                        if c.get("lambda_gb_s_at_s3_steady") is not None else ""))
        if c.get("lambda_gb_s_at_s3_overlap") is not None:
            print(f"  the same with requests in flight together waiting once (each invocation's longest chain of requests "
                  f"made one after another): Lambda ${c['lambda_gb_s_at_s3_overlap']:.2f}/month, steady "
                  f"${at_s3(r, overlap=True):.2f}" + (f" (Lambda ${c['lambda_gb_s_at_s3_overlap_steady']:.2f})"
                                                     if c.get("lambda_gb_s_at_s3_overlap_steady") is not None else ""))
        fm = r.get("first_meetings")
        if fm and c.get("steady_total") is not None:
            print(f"  first meetings (an instance's first log reads of a table, {fm['instance_tables']} instance-tables): "
                  f"window {fm['window'].get('tier1', 0)} PUT/LIST-priced + {fm['window'].get('tier2', 0)} GET-priced, "
                  f"whole run {fm['run'].get('tier1', 0)} + {fm['run'].get('tier2', 0)}; steady (those once per instance "
                  f"and {INSTANCE_HOURS} h instead of every window): ${c['steady_total']:.2f}/month")
        print(f"  total ${c['total']:.2f}/month  |  Glue all-in ${r['glue_all_in']:.0f} (compute ${GLUE_MONTH:.0f})  |  naive "
              f"(one invocation per job per window, {r['naive']['jobs']} jobs, {r['naive']['invocation_ms']:.0f} ms and "
              f"{r['naive']['tier1'] + r['naive']['tier2']:.0f} S3 requests each) ${r['naive']['month']:.2f}")


def main():
    if PROFILE == "release":
        subprocess.run(["cargo", "build", "-q", "--release", "-p", "msk-ingest", "-p", "refine"], cwd=ROOT, check=True)
    sizes = memory_sizes()
    results = [run(n, sizes) for n in TABLES]
    OUT.mkdir(parents=True, exist_ok=True)
    # One row per (target, N, busy share, the rest's changes): later runs replace their own row,
    # keep the others.
    path = OUT / "results.json"

    with open(OUT / "results.lock", "w") as lock:  # two rows may finish at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            rows = json.loads(path.read_text())
            rows = rows if isinstance(rows, dict) else {}
        except (OSError, ValueError):
            rows = {}
        for r in results:
            rest = f" rest={r['idle_every']}" if r["busy"] < 1 else ""
            size = "" if r.get("size", "quick") == "quick" else f" size={r['size']}"
            rows[f"{r['target']} N={r['tables']} busy={r['busy']:g}{rest}{size}"] = r
        path.write_text(json.dumps(rows, indent=2))
    report(results)
    curve(rows)


def at_s3(r, overlap=False):
    """The steady month (the total when not measured) with Lambda at S3's latency, every request
    waited for (`overlap`: requests in flight together waiting once); NaN when the row predates
    that line."""
    c = r["cost"]
    name = "lambda_gb_s_at_s3_overlap" if overlap else "lambda_gb_s_at_s3"
    # Rows from stop 57 on: the first meetings' waits at their own rate, as their requests.
    lam = c.get(name + "_steady", c.get(name))
    if lam is None:
        return float("nan")
    return (c.get("steady_total") or c["total"]) - c["lambda_gb_s"] + lam


def curve(rows):
    """Every row measured so far: target -> freshness and cost, beside Glue all-in and naive."""
    print("\ncost curve (target/results.json; each row its own run):")
    print(f"  {'target':<7} {'size':<5} {'N':>3} {'busy':>5} {'the rest':>12} {'p99 bronze':>10} {'p99 silver':>10} {'p99 proc.':>10} "
          f"{'$/month':>9} {'warm $':>8} {'steady $':>8} {'at S3 $':>8} {'S3 ovl $':>8} {'Glue all-in':>11} {'naive':>8}")
    for key in sorted(rows, key=lambda k: (rows[k]["tables"], rows[k]["busy"], rows[k].get("window_s", 0))):
        r = rows[key]
        p99 = lambda layer: r["freshness"].get(layer, {}).get("p99", float("nan"))  # noqa: E731
        rest = "-" if r["busy"] >= 1 else ("idle" if r.get("idle_every", "0") == "0" else f"every {r['idle_every']}s")
        print(f"  {r.get('target', '?'):<7} {r.get('size', 'quick'):<5} {r['tables']:>3} {r['busy']:>5.0%} {rest:>12} {p99('bronze'):>10.1f} "
              f"{p99('silver'):>10.1f} {p99('processed'):>10.1f} {r['cost']['total']:>9.2f} "
              f"{r['cost'].get('warm_total', warm_total(r, r['measured_s'])):>8.2f} "
              f"{r['cost'].get('steady_total') or float('nan'):>8.2f} "
              f"{at_s3(r):>8.2f} {at_s3(r, overlap=True):>8.2f} "
              f"{r.get('glue_all_in', float('nan')):>11.0f} {r['naive']['month']:>8.0f}")


if __name__ == "__main__":
    main()
