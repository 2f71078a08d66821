"""Model-checked random schedules: seeded random interleavings of every operation that changes a
table, several at once, each table compared with a plain in-memory model (`model.py`) after
every step. This is the test that looks for the next hole by itself, instead of one scenario at
a time.

A schedule is a list of waves; a wave is a few operations started at once on threads (each after
a small random stagger), each one a real `lakestream` process (or an invocation of a warm
Lambda binary, see `warm.py`):

- `ingest`: an MSK batch (`invoke msk`) into `raw/order` (6 `hour` partitions, every 11th
  record a dead letter) or `raw/cdc` (CDC changes, 3 `grp` partitions); new batches, re-split
  batches overlapping committed offsets, exact redeliveries, the same batch twice at once;
  delivered until it succeeds, as Lambda does;
- `optimize` (`--min-files 2`: every partition with 2 small files is rewritten, one commit per
  partition) of `raw/order`, `raw/cdc` or `refined/cdc`, often two at once or racing a delete;
  a run that fails is not retried (a compaction changes no rows either way);
- `delete`: a Python `deltalake` DELETE of named `raw/order` rows (retried until it commits);
- `vacuum` (retention 0 `--force` or the default, racing writers: its floor keeps their staged
  files, and on `raw/cdc` it keeps what the lagging upsert has not read), `checkpoint`;
- `optimize-all`: `optimize --all --min-files 2`, the maintenance function's one table list
  (every table of the pipeline, the upsert's tombstones and the access-log table included);
- `refine`: the CDC upsert `raw/cdc` -> `refined/cdc` (`latest`), re-run until it succeeds;
- `cdc-rebuild`: both apply jobs `refine JOB --rebuild`, half the time after bronze's early
  commits were removed behind a checkpoint (log cleanup, day 31): silver equals the reference
  of everything bronze holds;
- `dbz` / `cdc-apply`: a CDC family pair (`[[cdc]]` `shop`, SCD1, and `audit`, SCD2, one
  Debezium topic each, the random streams of tests/cdc_reference.py: late and re-sent changes,
  deletes with tombstones) ingested into bronze, and both apply jobs run (sometimes two at
  once); the family's bronze and silver tables are compacted and vacuumed beside them;
- `gold`: both gold jobs (`[refine.aggregate]` over `raw/order` and over the upsert's output
  `refined/cdc`), sometimes two at once, with crash points, beside a compaction of a gold table;
  after a `recreate` of `raw/order` its gold table fails ("re-created") and is rebuilt (deleted
  and run again), as the README says;
- `recreate`: `raw/order`'s prefix deleted; ingestion re-creates the table (the model resets).

Commands may carry a crash point (`--crash-at`: the process aborts after a data PUT, a log PUT
or the whole commit; the operation is then redelivered). On S3 every lakestream request goes
through the fault proxy (refused, landed-then-500, delayed past the client timeout).

Schedules only contain waves whose outcome the model can tell: one batch per Kafka partition
per wave (Lambda never runs two batches of a partition at once, except the same batch
redelivered), no `raw/cdc` ingest in a wave with the upsert (the upsert then consumes exactly
what was there), likewise no `dbz` ingest in a wave with `cdc-apply`, deletes name rows that exist (a concurrent ingest cannot write them again),
re-creation alone on its table (and never in a wave with the gold jobs).

Checks: after every wave each table (`raw/order`, `dead_letters`, `raw/cdc`, `refined/cdc`) is
read with Python `deltalake` (directly, not through the proxy) and compared, full rows as a
multiset, with the model; each family bronze holds every delivered change once, and each silver
equals the plain reference of what the last apply consumed (its change feed replayed onto the
previous reference gives it); each gold table equals DuckDB's GROUP BY over its source read at
the version its `txn` says it consumed (not the model: any interleaving is then checkable). A
table found different is reported and no longer compared in that
schedule; the schedule goes on, so one run can report several holes.

Replay: a failure prints the seed, the schedule number and every wave with its operations and
outcomes, then which table differs and the missing/extra rows. The schedule is a function of
(CHAOS_SEED, backend, schedule number) only; run it again with
`CHAOS_SEED=<seed> CHAOS_SCHEDULE=<n> pytest tests/chaos/test_schedule.py -k <backend>`
(fault draws and thread timing are not replayed, so a race may need a few runs)."""
import copy
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

import model as M
from cdc_reference import BASE_MS, STREAMS_CONF, Checker, msk_event as dbz_event, two_families
from lake_support import LakeBase, gold_difference
from chaoslib import BIN, BUCKET, CLIENT, MOTO, MOTO_PORT, SEED, record, rng, scaled
from faultproxy import FaultProxy
from warm import WarmFunction

# Schedules per backend (the S3 ones take ~5x longer: requests through the proxy, delays).
SCHEDULES = {"fs": scaled(5), "s3": scaled(3)}
WAVES = int(os.environ.get("CHAOS_WAVES", "9"))
ONLY = os.environ.get("CHAOS_SCHEDULE")  # replay one schedule
VERBOSE = os.environ.get("CHAOS_VERBOSE") == "1"  # print every schedule, passed or not (-s)
# Leave kinds of operation out (e.g. `optimize,delete`), to narrow a failure down (this changes
# the schedules: replay a failure without it).
OFF = set(filter(None, os.environ.get("CHAOS_OPS_OFF", "").split(",")))
STEPS = ["after-data-put:1", "after-log-put:1", "after-data-put:2", "after-log-put:2", "after-commit"]
WARM_BINS = {f: pathlib.Path(BIN).parent / f for f in ("msk-ingest", "maintenance", "refine")}
HAVE_WARM = all(p.exists() for p in WARM_BINS.values())

CONFIG = '''pipeline = "sched"
dead_letter_table = "dead_letters"

[lake]
{lake}
[commit]
# Every 3rd commit checkpoints: the upsert's inline tombstones are consolidated into its
# tombstone table that often (keyed/pending.rs), so the schedules race that commit too.
checkpoint_interval = 3
max_attempts = 10
base_backoff_ms = 20
max_backoff_ms = 1000

[[topics]]
topic = "orders"
table = "raw/order"
partition_by = ["hour"]
schema_mode = "enforce"
kafka_metadata = ["partition", "offset"]
columns = [
  {{ name = "order_id", type = "int64", nullable = false }},
  {{ name = "hour", type = "string", nullable = false }},
  {{ name = "order_value", type = "int32" }},
  {{ name = "timestamp", type = "timestamp", nullable = false }},
]

[[topics]]
topic = "cdc"
table = "raw/cdc"
partition_by = ["grp"]
schema_mode = "enforce"
kafka_metadata = ["partition", "offset"]
columns = [
  {{ name = "grp", type = "string", nullable = false }},
  {{ name = "id", type = "int64", nullable = false }},
  {{ name = "val", type = "int64" }},
  {{ name = "updated", type = "int64", nullable = false }},
  {{ name = "op", type = "string", nullable = false }},
]

[[refine]]
job = "latest"
output = "refined/cdc"
partition_by = ["grp"]

[refine.upsert]
source = "raw/cdc"
key = ["grp", "id"]
order_by = ["updated"]
op = {{ column = "op", delete = ["D"] }}

[[refine]]
job = "gold_order"
output = "gold/order"
partition_by = ["hour"]
max_files_per_run = 6
[refine.aggregate]
source = "raw/order"
group_by = ["hour", "date(timestamp) as day"]
measures = ["count(*) as n", "sum(order_value) as total", "min(order_value) as lo", "max(order_value) as hi", "avg(order_value) as mean"]

[[refine]]
job = "gold_cdc"
output = "gold/cdc"
[refine.aggregate]
source = "refined/cdc"
group_by = ["grp"]
measures = ["count(*) as n", "sum(val) as total", "min(val) as lo", "max(val) as hi", "count(val) as valued"]
''' + STREAMS_CONF.replace("{", "{{").replace("}", "}}")
CDC_JOBS = ["cdc-shop/public.orders", "cdc-audit/public.accounts"]
GOLD_JOBS = ["gold_order", "gold_cdc"]
# Gold table: (job, source, DuckDB's GROUP BY over the source at the version the gold consumed,
# group columns, measures).
GOLDS = {
    "gold/order": ("gold_order", "raw/order", "SELECT hour, CAST(timestamp AT TIME ZONE 'UTC' AS DATE) AS day, "
                   "count(*) AS n, sum(order_value) AS total, min(order_value) AS lo, max(order_value) AS hi, "
                   "avg(order_value) AS mean FROM src GROUP BY ALL", ["hour", "day"], ["n", "total", "lo", "hi", "mean"]),
    "gold/cdc": ("gold_cdc", "refined/cdc", "SELECT grp, count(*) AS n, sum(val) AS total, min(val) AS lo, "
                 "max(val) AS hi, count(val) AS valued FROM src GROUP BY ALL", ["grp"], ["n", "total", "lo", "hi", "valued"]),
}

ORDER_PARTITIONS = 3  # Kafka partitions of `orders`
CDC_PARTITIONS = 2


# ---------------------------------------------------------------------------------------------
# Generating a schedule (a function of the seed and the model only, never of outcomes).

class Generator:
    def __init__(self, r, warm, cdc_r, gold_r):
        self.r = r
        # The gold side draws from its own generator too.
        self.gold_r = gold_r
        self.warm = warm
        # The CDC family side draws from its own generator, so the other operations' schedules
        # do not depend on it.
        self.cdc_r = cdc_r
        self.families = two_families(cdc_r, changes=18, tables=1)
        self.streams = [s for _, _, ss in self.families for s in ss]
        self.dbz_sent = []  # batches of the family topics sent: [(stream, messages)]
        self.log_end = Counter()  # (topic, partition) -> next offset Kafka would hand out
        self.sent = {}  # (topic, partition) -> batches sent (offset lists)
        self.log_objects = 0  # log objects written so far

    def batch(self, model, topic, partition):
        r, key = self.r, (topic, partition)
        end = self.log_end[key]
        n = r.randint(6, 14) if topic == "orders" else r.randint(8, 16)
        roll = r.random()
        if self.sent.get(key) and roll < 0.15:
            offsets = r.choice(self.sent[key])  # an exact redelivery of an older batch
            kind = "redelivery"
        elif end and roll < 0.45:
            start = max(0, end - r.randint(1, 6))  # re-split: overlaps committed offsets
            offsets = list(range(start, end + n))
            kind = "re-split"
        else:
            offsets = list(range(end, end + n))
            kind = "new"
        self.log_end[key] = max(end, offsets[-1] + 1)
        self.sent.setdefault(key, []).append(offsets)
        return {"op": "ingest", "topic": topic, "partition": partition, "offsets": [offsets[0], offsets[-1]],
                "kind": kind, "copies": 2 if r.random() < 0.25 else 1}

    def crash(self, p):
        return self.r.choice(STEPS) if self.r.random() < p else None

    def wave(self, model, n):
        """The operations of wave n, checked against the rules in the module docstring."""
        r = self.r
        ops, used, busy, exclusive = [], set(), Counter(), set()
        flags = {"refine": False, "cdc_ingest": False}

        def free(table, alone=False):
            return table not in exclusive and (not alone or busy[table] == 0)

        def take(op, *tables, alone=False):
            if op["op"] in OFF:
                return
            for t in tables:
                busy[t] += 1
                if alone:
                    exclusive.add(t)
            ops.append(op)

        def ingest(topic, p):
            if "ingest" in OFF or (topic, p) in used or not free(M.Model.table_of(topic)):
                return
            if topic == "cdc" and flags["refine"]:
                return
            used.add((topic, p))
            op = self.batch(model, topic, p)
            op["crash"] = self.crash(0.2)
            op["warm"] = self.warm and op["crash"] is None and r.random() < 0.35
            flags["cdc_ingest"] |= topic == "cdc"
            take(op, M.Model.table_of(topic))

        def optimize(table):
            if not free(table):
                return
            crash = self.crash(0.15)
            take({"op": "optimize", "table": table, "crash": crash,
                  "warm": self.warm and crash is None and r.random() < 0.3}, table)

        def delete():
            rows = sorted(model.rows["raw/order"])
            if not rows or not free("raw/order"):
                return
            hours = r.sample([f"{h:02}" for h in range(M.HOURS)], r.randint(1, 3))
            ids = sorted(x[0] for x in rows if x[1] in hours and r.random() < 0.5)
            if ids:
                take({"op": "delete", "table": "raw/order", "ids": ids}, "raw/order")

        def logs():
            if "logs" in OFF:
                return
            old = list(range(self.log_objects))
            new = list(range(self.log_objects, self.log_objects + r.randint(1, 3)))
            self.log_objects += len(new)
            objects = new + (r.sample(old, min(len(old), r.randint(0, 2))) if old else [])
            take({"op": "logs", "objects": sorted(objects), "crash": self.crash(0.2)}, M.LOG_TABLE)

        def refine():
            if "refine" in OFF or flags["cdc_ingest"] or flags["refine"] or not free("refined/cdc"):
                return
            flags["refine"] = True
            crash = self.crash(0.5)
            if crash and r.random() < 0.5:
                # Between its two commits (the tombstone table's: silver's anchor, tombstones
                # of a chunk too large to go inline, then silver's) is where a re-run must
                # remember what the first one did: drawn more often.
                crash = r.choice(["after-log-put:1", "after-data-put:2"])
            warm = self.warm and crash is None and r.random() < 0.3
            # Warm: a schedule tick, or a refine notice naming raw/cdc's latest version (the
            # event-driven path: due checks of a process that saw the job before).
            take({"op": "refine", "crash": crash, "warm": warm, "notice": warm and r.random() < 0.5},
                 "refined/cdc", "raw/cdc")

        def cdc_side():
            """New Debezium changes, or both family apply jobs consuming them (never both in one
            wave); beside them a compaction or vacuum of a family table."""
            c = self.cdc_r
            if "cdc" in OFF:
                return
            if n > 0 and c.random() < 0.12:
                # Both apply jobs rebuilt (`refine JOB --rebuild`), half the time after
                # bronze's early log was cleaned (day 31): silver is emptied and built again
                # from bronze's snapshot, alone on the family's tables.
                bronzes = [bronze_of(st) for st in self.streams]
                take({"op": "cdc-rebuild", "clean": c.random() < 0.5, "bronze": bronzes},
                     *bronzes, *(silver_of(f, st) for f, _, ss in self.families for st in ss))
                return
            if n == 0 or c.random() < 0.5:
                if self.dbz_sent and c.random() < 0.15:
                    batch = c.choice(self.dbz_sent)  # an exact redelivery of an older batch
                else:
                    batch = [(st, st.take(c.randint(2, 7))) for st in self.streams]
                    self.dbz_sent.append(batch)
                take({"op": "dbz", "batch": batch, "copies": 2 if c.random() < 0.2 else 1,
                      "crash": self.crash(0.15)}, *(bronze_of(st) for st in self.streams))
            else:
                crash = c.choice(STEPS) if c.random() < 0.3 else None
                take({"op": "cdc-apply", "crash": crash, "copies": 2 if c.random() < 0.3 else 1},
                     *(silver_of(f, st) for f, _, ss in self.families for st in ss))
            extra = c.random()
            family, _, (st,) = c.choice(self.families)
            if extra < 0.3:
                table = c.choice([bronze_of(st), silver_of(family, st)])
                take({"op": "optimize", "table": table, "crash": None, "warm": False}, table)
            elif extra < 0.4:
                take({"op": "vacuum", "table": bronze_of(st), "zero": True}, bronze_of(st))

        def gold_side():
            g = self.gold_r
            if "gold" in OFF or n == 0 or g.random() < 0.4:
                return
            crash = g.choice(STEPS) if g.random() < 0.3 else None
            # raw/order is taken (not alone) so no `recreate` joins this wave.
            take({"op": "gold", "crash": crash, "copies": 2 if g.random() < 0.3 else 1},
                 *GOLDS, "raw/order")
            if g.random() < 0.3:
                table = g.choice(list(GOLDS))
                take({"op": "optimize", "table": table, "crash": None, "warm": False}, table)

        cdc_side()
        gold_side()
        if n == 0:  # every partition gets data
            for p in range(ORDER_PARTITIONS):
                ingest("orders", p)
            for p in range(CDC_PARTITIONS):
                ingest("cdc", p)
            logs()
            return ops
        # The CDC side: new changes, or the upsert consuming them (never both in one wave).
        side = r.random()
        if side < 0.45:
            for p in r.sample(range(CDC_PARTITIONS), r.randint(1, CDC_PARTITIONS)):
                ingest("cdc", p)
        else:
            refine()
            if r.random() < 0.35:
                optimize("refined/cdc")  # the upsert re-plans when the compaction lands first
        # The races most likely to hide something: two compactions, or a compaction and a delete.
        combo = r.random()
        if combo < 0.25:
            optimize("raw/order")
            optimize("raw/order")
        elif combo < 0.5:
            optimize("raw/order")
            delete()
        menu = [("orders", 5), ("optimize", 3), ("delete", 2), ("vacuum", 1.5), ("checkpoint", 1),
                ("logs", 1.5), ("recreate", 2.5), ("optimize-all", 0.7)]
        for _ in range(r.randint(1, 3)):
            kind = r.choices([k for k, _ in menu], [w for _, w in menu])[0]
            if kind == "orders":
                ingest("orders", r.randrange(ORDER_PARTITIONS))
            elif kind == "optimize":
                optimize(r.choice(["raw/order", "raw/order", "refined/cdc", "raw/cdc", M.LOG_TABLE]))
            elif kind == "delete":
                delete()
            elif kind == "logs":
                logs()
            elif kind == "vacuum":
                table = r.choice(["raw/order", "refined/cdc", "raw/cdc"])
                # Retention 0 with --force runs next to writers: vacuum never deletes an
                # untracked file younger than its floor (a writer's staged, uncommitted files),
                # and on `raw/cdc` it keeps what the lagging upsert has not read yet.
                zero = r.random() < 0.6
                if free(table):
                    take({"op": "vacuum", "table": table, "zero": zero}, table)
            elif kind == "checkpoint":
                table = r.choice(M.TABLES)
                if free(table):
                    take({"op": "checkpoint", "table": table}, table)
            elif kind == "optimize-all" and not exclusive and "optimize" not in OFF:
                # The one table list: every table the pipeline writes, tombstones included.
                take({"op": "optimize-all"}, *M.TABLES)
            elif kind == "recreate" and model.rows["raw/order"] and free("raw/order", alone=True):
                take({"op": "recreate", "table": "raw/order"}, "raw/order", alone=True)
        return ops


def describe(op):
    o = op["op"]
    tail = (f" crash-at {op['crash']}" if op.get("crash") else "") + (" (warm)" if op.get("warm") else "")
    if o == "ingest":
        return (f"ingest {op['topic']} p{op['partition']} offsets {op['offsets'][0]}..{op['offsets'][1]}"
                f" ({op['kind']}{', twice at once' if op['copies'] > 1 else ''}){tail}")
    if o == "delete":
        more = "..." if len(op["ids"]) > 6 else ""
        return f"delete raw/order order_id IN {op['ids'][:6]}{more} ({len(op['ids'])} ids)"
    if o == "logs":
        return f"s3-logs notifications of log objects {op['objects']}{tail}"
    if o == "vacuum":
        return f"vacuum {op['table']}{' --retention-hours 0 --force' if op['zero'] else ''}"
    if o in ("optimize", "checkpoint", "recreate"):
        return f"{o} {op['table']}{tail}"
    if o == "optimize-all":
        return "optimize --all --min-files 2"
    if o == "dbz":
        spans = ", ".join(f"{st.topic} {ms[0][0]}..{ms[-1][0]}" for st, ms in op["batch"] if ms)
        return f"ingest {spans or 'nothing new'}{' (twice at once)' if op['copies'] > 1 else ''}{tail}"
    if o == "cdc-apply":
        return f"refine {' '.join(CDC_JOBS)}{' (twice at once)' if op['copies'] > 1 else ''}{tail}"
    if o == "cdc-rebuild":
        return f"refine --rebuild {' and '.join(CDC_JOBS)}{' after bronze log cleanup' if op['clean'] else ''}"
    if o == "gold":
        return f"refine {' '.join(GOLD_JOBS)}{' (twice at once)' if op['copies'] > 1 else ''}{tail}"
    return f"{o} latest{tail}"


def bronze_of(st):
    return f"bronze/{st.prefix}/{st.schema}/{st.table}"


def silver_of(family, st):
    return f"silver/{family}/{st.schema}/{st.table}"


# ---------------------------------------------------------------------------------------------
# Running a schedule.

class Lake(LakeBase):
    """A fresh lake (a directory, or a prefix on the emulator reached through the fault proxy)."""

    def __init__(self, backend, tmp, proxy):
        self.backend, self.tmp, self.proxy = backend, tmp, proxy
        name = f"sched-{uuid.uuid4().hex[:10]}"
        if backend == "fs":
            super().__init__(str(tmp / name))
        else:
            super().__init__(f"s3://{BUCKET}/{name}", proxy.url, reader_endpoint=MOTO, client=CLIENT)
        self.storage = self.storage_options or None
        self.config = tmp / f"{name}.toml"
        self.config.write_text(CONFIG.format(lake=self.lake_toml))
        # Where the access-log objects are: a directory standing in for the bucket (fs), or a
        # bucket on the emulator, read through the fault proxy.
        self.log_bucket = f"{name}-logs"
        self.objects = tmp / f"{name}-objects"
        if backend == "s3":
            self.s3().create_bucket(Bucket=self.log_bucket)
        self.lock = threading.Lock()
        self.counts = Counter()
        self.warm = {}

    def run(self, args, crash=None, timeout=300):
        cmd = [BIN, *args, "--config", str(self.config)] + (["--crash-at", crash] if crash else [])
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
               "AWS_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "3", "RUST_BACKTRACE": "0",
               "LAKESTREAM_LOG_BUCKETS": self.log_bucket}  # the only bucket s3-logs reads
        if self.endpoint:
            env["AWS_ENDPOINT_URL"] = self.endpoint
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
        with self.lock:
            self.counts["invocations"] += 1
            self.counts["failed_invocations"] += out.returncode != 0
            if crash and "crash point" in out.stderr:
                self.counts["crashes"] += 1
        return out

    def deliver(self, args, attempts=40):
        for _ in range(attempts):
            out = self.run(args)
            if out.returncode == 0:
                return out
            time.sleep(0.05)
        raise AssertionError(f"`{' '.join(args)}` never succeeded ({attempts} invocations); last error: "
                             f"{error_of(out)}")

    def function(self, name):
        with self.lock:
            if name not in self.warm:
                self.warm[name] = WarmFunction(WARM_BINS[name], self.config, self.endpoint,
                                               self.tmp / f"{name}-{id(self)}.log")
            return self.warm[name]

    def invoke_warm(self, name, event, attempts=40):
        """A warm invocation, redelivered (to the same warm container) until it succeeds."""
        for _ in range(attempts):
            kind, body = self.function(name).invoke(event)
            with self.lock:
                self.counts["warm_invocations"] += 1
                self.counts["failed_invocations"] += kind != "response"
            if kind == "response":
                return body
            time.sleep(0.05)
        raise AssertionError(f"warm {name} {event} never succeeded; last error: {body}")

    uri = LakeBase.table_uri
    table = LakeBase.delta

    def rows(self, table):
        """(rows as a multiset, None) or (None, why the table could not be read); a table that
        does not exist is empty."""
        try:
            t = self.table(table)
            return Counter(M.row_of(table, r) for r in t.to_pyarrow_table().to_pylist()), None
        except TableNotFoundError:
            return Counter(), None
        except Exception as e:  # noqa: BLE001 - an unreadable table is a finding, reported below
            return None, f"{type(e).__name__}: {str(e)[:600]}"

    def offsets(self, table):
        """(the `__offset`s of a bronze table as a multiset, None) or (None, why not)."""
        try:
            rows = self.table(table).to_pyarrow_table(columns=["__offset"]).to_pylist()
            return Counter(r["__offset"] for r in rows), None
        except TableNotFoundError:
            return Counter(), None
        except Exception as e:  # noqa: BLE001 - an unreadable table is a finding
            return None, f"{type(e).__name__}: {str(e)[:600]}"

    @staticmethod
    def s3():
        import boto3

        return boto3.client("s3", endpoint_url=MOTO, region_name="us-east-1",
                            aws_access_key_id="test", aws_secret_access_key="test")

    def put_log_object(self, k):
        """Write log object k (immutable: writing it again changes nothing); returns its ETag."""
        body = "\n".join(text for text, _ in M.log_lines(k)).encode() + b"\n"
        if self.backend == "fs":
            path = self.objects / self.log_bucket / M.log_key(k)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
            return hashlib.md5(body).hexdigest()
        return self.s3().put_object(Bucket=self.log_bucket, Key=M.log_key(k), Body=body)["ETag"].strip('"')

    def remove_log_before(self, table, version):
        """Commit files 0..version-1 of `table` removed, as log cleanup leaves them."""
        names = [f"_delta_log/{v:020}.json" for v in range(version)]
        if self.backend == "fs":
            for n in names:
                pathlib.Path(self.uri(table), n).unlink(missing_ok=True)
            return
        keys = [{"Key": f"{self.prefix}/{table}/{n}"} for n in names]
        for i in range(0, len(keys), 1000):
            self.s3().delete_objects(Bucket=BUCKET, Delete={"Objects": keys[i:i + 1000]})

    def remove_table(self, table):
        if self.backend == "fs":
            shutil.rmtree(self.uri(table), ignore_errors=True)
            return
        s3 = self.s3()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{self.prefix}/{table}/"):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys})

    def close(self):
        for f in self.warm.values():
            f.close()


def execute(lake, op, r):
    """Run one operation; returns a short outcome for the failure report."""
    time.sleep(r.uniform(0, 0.3))  # a random stagger: who plans first and who commits first varies
    o = op["op"]
    if o == "ingest":
        first, last = op["offsets"]
        event = M.msk_event(op["topic"], op["partition"], list(range(first, last + 1)))
        if op["warm"]:
            body = lake.invoke_warm("msk-ingest", event)
            return (f"warm: written {body.get('written')}, duplicates {body.get('duplicates')}, "
                    f"dead-lettered {body.get('dead_lettered')}")
        path = lake.tmp / f"ev-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(event))
        args = ["invoke", "msk", "--event", str(path)]
        note = ""
        if op["crash"]:
            out = lake.run(args, crash=op["crash"])
            note = "crashed, " if "crash point" in out.stderr else f"no crash (exit {out.returncode}), "
        out = lake.deliver(args)
        return note + "delivered"
    if o == "optimize":
        if op["warm"]:
            kind, body = lake.function("maintenance").invoke(
                {"job": "optimize", "tables": [op["table"]], "min_files": 2})
            with lake.lock:
                lake.counts["warm_invocations"] += 1
            if kind != "response":
                return f"warm: failed: {str(body)[:200]}"
            out = body[0]["outcome"]
            if "Err" in out:
                return f"warm: failed: {str(out['Err'])[:200]}"
            out = out["Ok"]
            if "partitions_compacted" not in out:
                return f"warm: {str(out)[:200]}"
            return (f"warm: {out['partitions_compacted']} partitions compacted, conflicted "
                    f"{out['partitions_conflicted']}, {out['files_removed']} files rewritten")
        out = lake.run(["optimize", op["table"], "--min-files", "2"], crash=op["crash"])
        if out.returncode:
            return f"failed ({error_of(out)})"
        return "ok: " + " ".join(out.stdout.split())[:300]
    if o == "logs":
        pending = {f"msg-{k}-{uuid.uuid4().hex[:8]}": k for k in op["objects"]}
        bodies = {m: notification(lake.log_bucket, M.log_key(k), lake.put_log_object(k))
                  for m, k in pending.items()}
        objects = ["--objects", str(lake.objects)] if lake.backend == "fs" else []
        crash, tries = op["crash"], 0
        while pending:
            tries += 1
            if tries > 40:
                raise AssertionError(f"log notifications {sorted(pending.values())} never succeeded: "
                                     f"{error_of(out)}")
            path = lake.tmp / f"sqs-{uuid.uuid4().hex[:8]}.json"
            path.write_text(json.dumps(sqs_event({m: bodies[m] for m in pending})))
            out = lake.run(["invoke", "s3-logs", "--event", str(path), *objects], crash=crash)
            crash = None
            if out.returncode == 0:
                failed = {f["itemIdentifier"] for f in json.loads(out.stdout)["response"]["batchItemFailures"]}
                pending = {m: k for m, k in pending.items() if m in failed}
        return f"delivered ({tries} invocations)"
    if o == "delete":
        for attempt in range(30):
            try:
                lake.table("raw/order").delete("order_id IN (" + ", ".join(map(str, op["ids"])) + ")")
                return f"committed (attempt {attempt + 1})"
            except Exception as e:  # noqa: BLE001 - a commit conflict: try again, as a user would
                last = e
                time.sleep(0.1)
        raise AssertionError(f"the delete never committed: {last}")
    if o == "optimize-all":
        out = lake.run(["optimize", "--all", "--min-files", "2"])
        return "ok" if out.returncode == 0 else f"failed ({error_of(out)})"
    if o == "vacuum":
        args = ["vacuum", op["table"]] + (["--retention-hours", "0", "--force"] if op["zero"] else [])
        out = lake.run(args)
        return "ok" if out.returncode == 0 else f"failed ({error_of(out)})"
    if o == "checkpoint":
        out = lake.run(["checkpoint", op["table"]])
        return "ok" if out.returncode == 0 else f"failed ({error_of(out)})"
    if o == "refine":
        try:
            source_version = lake.table("raw/cdc").version() if op.get("notice") else None
        except TableNotFoundError:  # nothing ingested yet: no commit, so no notice either
            source_version = None
        if op["warm"] and source_version is not None:
            notice = {"job": "latest", "table": "raw/cdc", "version": source_version,
                      "committed_ms": int(time.time() * 1000)}
            for tries in range(1, 41):
                event = {"Records": [{"messageId": f"n-{uuid.uuid4().hex[:8]}", "body": json.dumps(notice),
                                      "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:n.fifo"}]}
                body = lake.invoke_warm("refine", event)
                if not body["batchItemFailures"]:
                    job = body["jobs"][0]
                    ran = runs_of(job["outcome"]["Ok"]["runs"]) if job["due"] else "not due"
                    return f"warm notice v{notice['version']} ({tries} deliveries): {ran}"
                time.sleep(0.05)
            raise AssertionError(f"the notice {notice} was handed back 40 times: {body}")
        if op["warm"]:
            body = lake.invoke_warm("refine", {"jobs": ["latest"]})
            return "warm: " + runs_of(body[0]["outcome"]["Ok"]["runs"])
        note = ""
        if op["crash"]:
            out = lake.run(["refine", "latest"], crash=op["crash"])
            note = "crashed, " if "crash point" in out.stderr else f"no crash (exit {out.returncode}), "
        out = lake.deliver(["refine", "latest", "--json"])
        return note + "ran: " + runs_of(json.loads(out.stdout)[0]["runs"])
    if o == "recreate":
        lake.remove_table(op["table"])
        return "prefix deleted"
    if o == "dbz":
        path = lake.tmp / f"dbz-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(dbz_event(op["batch"])))
        args = ["invoke", "msk", "--event", str(path)]
        note = ""
        if op["crash"]:
            out = lake.run(args, crash=op["crash"])
            note = "crashed, " if "crash point" in out.stderr else f"no crash (exit {out.returncode}), "
        out = json.loads(lake.deliver(args).stdout)
        return note + f"written {out.get('written')}, duplicates {out.get('duplicates')}"
    if o == "cdc-rebuild":
        notes = []
        for table in op["bronze"] if op["clean"] else []:
            lake.deliver(["checkpoint", table])
            v = lake.delta(table).version()
            lake.remove_log_before(table, v)
            notes.append(f"{table}: commits before v{v} removed")
        for job in CDC_JOBS:
            out = lake.deliver(["refine", job, "--rebuild"])
            notes.append(out.stdout.strip().splitlines()[0] if out.stdout.strip() else job)
        return "; ".join(notes)
    if o == "cdc-apply":
        note = ""
        if op["crash"]:
            out = lake.run(["refine", *CDC_JOBS], crash=op["crash"])
            note = "crashed, " if "crash point" in out.stderr else f"no crash (exit {out.returncode}), "
        out = lake.deliver(["refine", *CDC_JOBS, "--json"])
        return note + "ran: " + "; ".join(runs_of(j["runs"]) for j in json.loads(out.stdout))
    if o == "gold":
        note = ""
        if op["crash"]:
            out = lake.run(["refine", *GOLD_JOBS], crash=op["crash"])
            note = "crashed, " if "crash point" in out.stderr else f"no crash (exit {out.returncode}), "
        for _ in range(40):
            out = lake.run(["refine", *GOLD_JOBS, "--json"])
            if out.returncode == 0:
                return note + "ran: " + "; ".join(f"{j['job']} {len(j['runs'])} run(s)" for j in json.loads(out.stdout))
            if "re-created" in out.stderr:
                # raw/order was re-created: rebuild its gold table (delete it, run again).
                lake.remove_table("gold/order")
                note += "rebuilt after the source's re-creation, "
            time.sleep(0.05)
        raise AssertionError(f"the gold jobs never succeeded; last error: {error_of(out)}")
    raise AssertionError(f"unknown operation {op}")


def notification(bucket, key, etag):
    return json.dumps({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": "2026-11-30T10:00:00.000Z", "eventName": "ObjectCreated:Put",
        "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
               "object": {"key": key, "size": 1, "eTag": etag}}}]})


def sqs_event(bodies):
    """An SQS event as Lambda's event source mapping builds it: one record per message."""
    return {"Records": [{
        "messageId": m, "receiptHandle": f"rh-{m}", "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1795939205000",
                       "SenderId": "AIDAEXAMPLE", "ApproximateFirstReceiveTimestamp": "1795939205100"},
        "messageAttributes": {}, "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:sched",
        "awsRegion": "us-east-1"} for m, body in bodies.items()]}


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def error_of(out):
    """The error a failed command printed, without a backtrace."""
    if "crash point" in out.stderr:
        return "crash"
    lines = [ANSI.sub("", x) for x in out.stderr.splitlines() if x.strip()]
    head = next((i for i, x in enumerate(lines) if x.startswith("Error")), 0)
    text = " ".join(x.strip() for x in lines[head:head + 4] if "backtrace" not in x.lower())
    return text[:240] or f"exit {out.returncode}"


def runs_of(runs):
    """An upsert's runs, short: +inserted ~updated -deleted per committed run."""
    return "; ".join(f"+{x['inserted']} ~{x['updated']} -{x['deleted']} (attempts {x['attempts']})"
                     for x in runs) or "nothing new"


def apply(model, ops):
    """The model after a wave (the operations of a wave commute, see the module docstring)."""
    for op in ops:
        if op["op"] == "recreate":
            model.recreate_orders()
    for op in ops:
        if op["op"] == "ingest":
            first, last = op["offsets"]
            model.ingest(op["topic"], op["partition"], range(first, last + 1))
    for op in ops:
        if op["op"] == "delete":
            model.delete_orders(op["ids"])
        if op["op"] == "logs":
            model.ingest_logs(op["objects"])
    if any(op["op"] == "refine" for op in ops):
        model.refine()
    for op in ops:
        if op["op"] == "dbz":
            for st, messages in op["batch"]:
                # A forged record (cdc_reference.Hostile) is one dead letter, once.
                for offset, h in st.new_letters(messages):
                    raw = st.record(offset, h)["value"]
                    kafka_us = (BASE_MS + offset) * 1000
                    model.rows["dead_letters"][(st.topic, 0, offset, kafka_us, None, None, raw,
                                                bronze_of(st))] += 1
                st.landed(messages)
    if any(op["op"] in ("cdc-apply", "cdc-rebuild") for op in ops):
        model.cdc_applied = {st.topic: (dict(st.delivered), dict(st.tombstoned)) for st in model.cdc_streams}


def tables_of(op):
    """The tables an operation writes (a failure on a table already found wrong is expected)."""
    if op["op"] == "ingest":
        return {"raw/order", "dead_letters"} if op["topic"] == "orders" else {"raw/cdc"}
    if op["op"] == "refine":
        return {"refined/cdc"}
    if op["op"] == "logs":
        return {M.LOG_TABLE, "dead_letters"}
    if op["op"] == "dbz":
        return {bronze_of(st) for st, _ in op["batch"]} | {"dead_letters"}
    if op["op"] == "cdc-apply":
        return {t for t in CDC_TABLES if t.startswith("silver/")}
    if op["op"] == "cdc-rebuild":
        return {t for t in CDC_TABLES if t.startswith("silver/") or op["clean"]}
    if op["op"] == "gold":
        return set(GOLDS)
    return {op["table"]}


CDC_TABLES = ["bronze/shop/public/orders", "silver/shop/public/orders",
              "bronze/audit/public/accounts", "silver/audit/public/accounts"]


def check_cdc(lake, gen, model, checker, wrong, findings, w):
    """Each family bronze holds every delivered change once; each silver equals the reference
    of what the last apply consumed (and its change feed replays onto the previous one)."""
    for family, scd, (st,) in gen.families:
        bronze, silver = bronze_of(st), silver_of(family, st)
        if bronze not in wrong and st.delivered:
            got, unreadable = lake.offsets(bronze)
            want = Counter(st.bronze_offsets())
            if unreadable or got != want:
                findings.append(f"wave {w}: table {bronze} " + (f"cannot be read: {unreadable}" if unreadable else
                                f"differs: missing offsets {sorted(want - got)}, extra {sorted(got - want)}"))
                wrong.add(bronze)
        if silver in wrong:
            continue
        applied = copy.copy(st)
        applied.delivered, applied.tombstoned = model.cdc_applied.get(st.topic, ({}, {}))
        try:
            checker.check(family, scd, applied, f"after wave {w}")
        except Exception as e:  # noqa: BLE001 - a finding, reported with the schedule
            findings.append(f"wave {w}: {str(e)[:1500]}")
            wrong.add(silver)


def check_gold(lake, wrong, findings, w, figures):
    """Each gold table equals DuckDB's GROUP BY over its source at the version it consumed."""
    for table, (job, source, sql, groups, measures) in GOLDS.items():
        if table in wrong:
            continue
        try:
            dt = lake.table(table)
        except TableNotFoundError:
            continue
        consumed = None
        try:
            consumed = dt.transaction_version(f"sched/{job}/{source}")
            built_from = dt.metadata().configuration.get(f"lakestream.refine.source.{source}.tableId")
            try:
                now_id = DeltaTable(lake.uri(source), storage_options=lake.storage).metadata().id
            except TableNotFoundError:
                now_id = None  # deleted by `recreate`, not written again yet
            if built_from != now_id:
                continue  # the source was re-created since: the next gold run rebuilds it
            src = DeltaTable(lake.uri(source), version=consumed, storage_options=lake.storage)
            diff = gold_difference(dt.to_pyarrow_table().to_pylist(), src.to_pyarrow_table(), sql, groups,
                                   measures)
        except Exception as e:  # noqa: BLE001 - an unreadable table is a finding
            diff = f"cannot be checked: {type(e).__name__}: {str(e)[:600]}"
        figures["gold_compared"] += 1
        if diff:
            findings.append(f"wave {w}: gold table {table} (consumed {source} v{consumed}): {diff}")
            wrong.add(table)


def run_schedule(backend, number, tmp, proxy, figures):
    """Run one schedule; returns None, or the failure report. A table found different from the
    model is reported and not compared again in this schedule (its model is wrong from then
    on), but the schedule goes on, so one run can find several holes (e.g. a compaction race on
    `raw/order` and a lost CDC delete in `refined/cdc`)."""
    name = f"{backend}/{number}"
    r = rng(f"schedule/{name}")
    gen = Generator(r, warm=HAVE_WARM, cdc_r=rng(f"schedule-cdc/{name}"), gold_r=rng(f"schedule-gold/{name}"))
    model = M.Model()
    model.cdc_streams, model.cdc_applied = gen.streams, {}
    lake = Lake(backend, tmp, proxy)
    checker = Checker(lake.table)
    model.log_bucket = lake.log_bucket
    done = []  # (wave, [(op, outcome)])
    findings, wrong = [], set()
    exec_rng = rng(f"stagger/{name}")
    try:
        for w in range(WAVES):
            ops = gen.wave(model, w)
            outcomes = [[] for _ in ops]
            errors = []
            staggers = [exec_rng.random() for _ in ops]

            def work(i, op):
                try:
                    outcomes[i].append(execute(lake, op, random.Random(staggers[i])))
                except Exception as e:  # noqa: BLE001 - reported with the schedule below
                    errors.append((op, e))
                    outcomes[i].append(f"ERROR {str(e)[:300]}")

            threads = []
            for i, op in enumerate(ops):
                for _ in range(op.get("copies", 1)):
                    threads.append(threading.Thread(target=work, args=(i, op)))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            done.append((w, [(op, " | ".join(o)) for op, o in zip(ops, outcomes)]))
            for op in ops:
                figures["operations"][op["op"]] += op.get("copies", 1)
                figures["crash_points"] += bool(op.get("crash"))
            fatal = [(op, e) for op, e in errors if not tables_of(op) <= wrong]
            if fatal:
                findings.append(f"wave {w}: `{describe(fatal[0][0])}` failed: {fatal[0][1]}")
                break
            apply(model, ops)
            with proxy.paused() if proxy else _null():
                for table in M.TABLES:
                    if table in wrong:
                        continue
                    got, unreadable = lake.rows(table)
                    want = model.rows[table]
                    if unreadable:
                        findings.append(f"wave {w}: table {table} cannot be read (the model holds "
                                        f"{sum(want.values())} rows): {unreadable}")
                    else:
                        figures["rows_compared"] += sum(got.values())
                        figures["tables_compared"] += 1
                        if got == want:
                            continue
                        findings.append(f"wave {w}: table {table} differs from the model:\n" + M.diff(want, got))
                    wrong.add(table)
                check_cdc(lake, gen, model, checker, wrong, findings, w)
                check_gold(lake, wrong, findings, w, figures)
            figures["waves"] += 1
            if wrong >= set(M.TABLES):
                break
        if findings:
            return report(name, done, "\n".join(findings))
        if VERBOSE:
            print(report(name, done, "every table matched the model after every wave"))
        return None
    finally:
        for k, v in lake.counts.items():
            figures[k] += v
        figures["cdc_silver_compared"] += checker.checks
        figures["findings"] += len(findings)
        lake.close()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def report(name, done, what):
    backend, number = name.split("/")
    lines = [f"schedule {name} (CHAOS_SEED={SEED}):", what,
             f"replay: CHAOS_SEED={SEED} CHAOS_SCHEDULE={number} pytest tests/chaos/test_schedule.py -k {backend}",
             "schedule (operations of a wave run at once; -> outcome):"]
    for w, ops in done:
        lines.append(f"  wave {w}:")
        for op, outcome in ops:
            lines.append(f"    {describe(op)}  -> {outcome}")
    return "\n".join(lines)


@pytest.mark.parametrize("backend", ["fs", "s3"])
def test_random_schedules_match_the_model(tmp_path, backend):
    proxy = None
    if backend == "s3":
        proxy = FaultProxy(MOTO_PORT, seed=SEED, refuse=0.04, land_then_500=0.04, delay=0.03, delay_s=0.8)
    figures = {"schedules": 0, "waves": 0, "operations": Counter(), "crash_points": 0, "crashes": 0,
               "invocations": 0, "warm_invocations": 0, "failed_invocations": 0, "rows_compared": 0,
               "tables_compared": 0, "cdc_silver_compared": 0, "gold_compared": 0, "findings": 0}
    numbers = [int(ONLY)] if ONLY is not None else range(SCHEDULES[backend])
    failures = []
    try:
        for n in numbers:
            figures["schedules"] += 1
            failure = run_schedule(backend, n, tmp_path, proxy, figures)
            if failure:
                failures.append(failure)
    finally:
        if proxy:
            figures.update({f"faults_{k}": v for k, v in proxy.faults().items()})
            figures["requests"] = proxy.counts["requests"]
            proxy.close()
        ops = figures.pop("operations")
        figures["operations"] = sum(ops.values())
        figures.update({f"op_{k}": v for k, v in sorted(ops.items())})
        figures["warm_functions"] = HAVE_WARM
        figures["failed_schedules"] = len(failures)
        record(f"schedules_{backend}", **figures)
    if failures:
        pytest.fail(f"{len(failures)} of {len(numbers)} schedules ended with a table that differs from the "
                    "model:\n\n" + "\n\n".join(failures), pytrace=False)
