"""The plain in-memory model of what every table of the schedule test (`test_schedule.py`) must
hold, and the records it sends. No lakestream code, no Delta: rows are tuples, tables are
multisets (`Counter`), and each operation's effect is written out in a few lines.

- Kafka records are a pure function of (topic, partition, offset), like a Kafka log: a
  redelivery, a re-split batch or a replay after a table was re-created sends the same bytes.
- Ingestion (`invoke msk`): a record is written when its offset is above the table's `txn`
  version for its partition (the highest offset committed); every 11th `orders` record is not
  JSON and is dead-lettered once (the dead-letter table keeps its own `txn`s).
- A Python `deltalake` DELETE removes the rows it names.
- Re-creating `raw/order` (its prefix deleted) empties it and forgets its `txn`s.
- The upsert (`refine latest`, CDC): per key (grp, id), the source row with the greatest
  `updated` (unique per record, so no ties) over every source row; an `op = "D"` winner means
  the key is absent. This is `processed_reference` of `tests/e2e/test_refine.py` (latest row
  per key by the ordering columns, over everything the source holds) plus the delete rule.
- Access-log ingestion (`invoke s3-logs`): a log object is ingested once, whatever the
  redelivered notifications; each line is a row (all 27 fields as written, lineage, `date`), a
  line no parser accepts is dead-lettered with its object and line number.
- Compaction, checkpoint and vacuum change no rows.
"""
import base64
import hashlib
import datetime as dt
import json
from collections import Counter

HOURS = 6  # `raw/order` is partitioned by `hour` ("00".."05"): compaction has 6 partitions
GROUPS = 3  # `raw/cdc` and `refined/cdc` are partitioned by `grp` ("g0".."g2")
KEYS = 12  # ids per group: few keys, so updates and deletes hit the same keys again
BASE_US = 1_795_000_000 * 1_000_000  # 2026-11-18: a fixed event time, far from any bound
KAFKA_TS_US = 1_764_496_800_000_000  # the records' Kafka timestamp (+ offset ms)
OBSERVED = "shop-assets"  # the bucket whose accesses the log objects record
LOG_TABLE = f"access_logs/{OBSERVED}"
TABLES = ("raw/order", "dead_letters", "raw/cdc", "refined/cdc", LOG_TABLE)


def _mix(*xs):
    """64 deterministic bits per record (Python's `hash` of str is salted per process)."""
    return int.from_bytes(hashlib.blake2b(repr(xs).encode(), digest_size=8).digest(), "little")


def order(partition, offset):
    """The `orders` record at (partition, offset): a dict, or None for a record that is not JSON."""
    if offset % 11 == 5:
        return None
    h = _mix(1, partition, offset)
    return {"order_id": partition * 1_000_000 + offset, "hour": f"{h % HOURS:02}",
            "order_value": (h >> 8) % 10_000, "timestamp": iso(BASE_US + offset * 1_000_000)}


def cdc(partition, offset):
    """The `cdc` record at (partition, offset): a change of key (grp, id); `updated` is unique
    per record and only loosely follows the offsets (late changes exist), `op` D = delete."""
    h = _mix(2, partition, offset)
    seq = partition * 100_000 + offset
    lateness = (h >> 20) % 40  # up to 40 "records" late: older than changes already sent
    return {"grp": f"g{h % GROUPS}", "id": (h >> 4) % KEYS, "val": (h >> 12) % 1000,
            "updated": (offset - lateness + 1000) * 1_000_000 + seq,
            "op": "D" if (h >> 32) % 4 == 0 else "U"}


LOG_FIELDS = ("bucket_owner", "bucket", "time", "remote_ip", "requester", "request_id", "operation", "key",
              "request_uri", "http_status", "error_code", "bytes_sent", "object_size", "total_time_ms",
              "turnaround_time_ms", "referer", "user_agent", "version_id", "host_id", "signature_version",
              "cipher_suite", "authentication_type", "host_header", "tls_version", "access_point_arn",
              "acl_required", "source_region")
QUOTED = {"request_uri", "referer", "user_agent"}


def log_key(k):
    return f"logs/2026-11-30-10-{k:04}-SCHED{k:08X}"


def log_lines(k):
    """Log object k: [(line text, the row's fields by name, or None for a line no parser
    accepts)]. 26 fields (no source_region, as older logs), some `-` (null)."""
    out = []
    for j in range(4 + k % 5):
        if k % 3 == 1 and j == 2:
            out.append((f"garbage line {j} of log object {k}", None))
            continue
        n = k * 100 + j
        sec = 600 + k * 7 + j  # 10:10:00 + ...
        f = {"bucket_owner": "79a59df900b949e55d96a1e698fbaced", "bucket": OBSERVED,
             "time": f"[30/Nov/2026:10:{sec // 60 % 60:02}:{sec % 60:02} +0000]",
             "remote_ip": f"192.0.2.{n % 250}", "requester": "arn:aws:iam::123456789012:user/sched",
             "request_id": f"SCHED{n:08}", "operation": ["REST.GET.OBJECT", "REST.PUT.OBJECT"][n % 2],
             "key": f"img/{n}.png", "request_uri": f"GET /{OBSERVED}/img/{n}.png HTTP/1.1",
             "http_status": ["200", "404"][n % 7 == 3], "error_code": ["-", "NoSuchKey"][n % 7 == 3],
             "bytes_sent": str(n * 31), "object_size": "-" if n % 5 == 0 else "4096",
             "total_time_ms": str(n % 90), "turnaround_time_ms": str(n % 40), "referer": "-",
             "user_agent": f"sched/{n % 3}", "version_id": "-", "host_id": f"host{n}=",
             "signature_version": "SigV4", "cipher_suite": "ECDHE-RSA-AES128-GCM-SHA256",
             "authentication_type": "AuthHeader", "host_header": f"{OBSERVED}.s3.us-east-1.amazonaws.com",
             "tls_version": "TLSv1.3", "access_point_arn": "-", "acl_required": "-"}
        text = " ".join(f'"{v}"' if name in QUOTED else v for name, v in f.items())
        out.append((text, f))
    return out


def log_row(f, uri, line):
    """The table row of a parsed line (as `row_of` reads it back)."""
    vals = []
    for name in LOG_FIELDS:
        v = f.get(name, "-")
        if name == "time":
            t = dt.datetime.strptime(v, "[%d/%b/%Y:%H:%M:%S %z]")
            vals.append(int(t.timestamp()) * 1_000_000)
        elif v == "-":
            vals.append(None)
        elif name in ("http_status", "bytes_sent", "object_size", "total_time_ms", "turnaround_time_ms"):
            vals.append(int(v))
        else:
            vals.append(v)
    return (*vals, None, uri, line, "2026-11-30")


def raw_value(topic, partition, offset):
    rec = order(partition, offset) if topic == "orders" else cdc(partition, offset)
    return json.dumps(rec).encode() if rec else f"not json #{partition}/{offset}".encode()


def msk_event(topic, partition, offsets):
    records = [{
        "topic": topic, "partition": partition, "offset": off, "timestamp": KAFKA_TS_US // 1000 + off,
        "timestampType": "CREATE_TIME", "headers": [],
        "value": base64.b64encode(raw_value(topic, partition, off)).decode(),
    } for off in offsets]
    return {"eventSource": "aws:kafka",
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/sched/abc",
            "bootstrapServers": "b-1.sched:9098", "records": {f"{topic}-{partition}": records}}


def iso(us):
    return dt.datetime.fromtimestamp(us / 1e6, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def micros(x):
    if isinstance(x, dt.datetime):
        return int(x.replace(tzinfo=x.tzinfo or dt.timezone.utc).timestamp() * 1_000_000)
    return x


# Full rows as the tables hold them, as tuples (column order fixed here).
ORDER_COLS = ("order_id", "hour", "order_value", "timestamp", "kafka_partition", "kafka_offset")
DEAD_COLS = ("topic", "partition", "offset", "kafka_timestamp", "object_uri", "line_number", "raw_base64",
             "target_table")
CDC_COLS = ("grp", "id", "val", "updated", "op", "kafka_partition", "kafka_offset")
REFINED_COLS = ("grp", "id", "val", "updated", "kafka_partition", "kafka_offset")
LOG_COLS = (*LOG_FIELDS, "extra_fields", "log_object", "log_line", "date")
COLUMNS = {"raw/order": ORDER_COLS, "dead_letters": DEAD_COLS, "raw/cdc": CDC_COLS,
           "refined/cdc": REFINED_COLS, LOG_TABLE: LOG_COLS}


def row_of(table, r):
    """A row read back (a dict from pyarrow) as the model's tuple."""
    return tuple(micros(r.get(c)) for c in COLUMNS[table])


class Model:
    """What each table must hold, updated operation by operation."""

    def __init__(self):
        self.rows = {t: Counter() for t in TABLES}
        self.hwm = {}  # (table, partition) -> highest offset committed (the table's txn)
        self.dead = set()  # (topic, partition, offset) already dead-lettered
        self.cdc_rows = []  # every source row of the upsert: (partition, offset, record)
        self.logs = set()  # log objects ingested (each exactly once, whatever the redeliveries)
        self.log_bucket = "sched-logs"  # where the log objects are (set per lake)

    def hwm_of(self, topic, partition):
        return self.hwm.get((self.table_of(topic), partition), -1)

    @staticmethod
    def table_of(topic):
        return "raw/order" if topic == "orders" else "raw/cdc"

    def ingest(self, topic, partition, offsets):
        """One delivered batch (delivered until it succeeded, perhaps several times)."""
        table = self.table_of(topic)
        hwm = self.hwm_of(topic, partition)
        new = [o for o in offsets if o > hwm]
        for off in new:
            if topic == "orders":
                rec = order(partition, off)
                if rec is None:
                    if (topic, partition, off) not in self.dead:
                        self.dead.add((topic, partition, off))
                        raw = base64.b64encode(raw_value(topic, partition, off)).decode()
                        self.rows["dead_letters"][(topic, partition, off, KAFKA_TS_US + off * 1000, None, None,
                                                   raw, table)] += 1
                    continue
                self.rows[table][(rec["order_id"], rec["hour"], rec["order_value"],
                                  BASE_US + off * 1_000_000, partition, off)] += 1
            else:
                rec = cdc(partition, off)
                self.rows[table][(rec["grp"], rec["id"], rec["val"], rec["updated"], rec["op"],
                                  partition, off)] += 1
                self.cdc_rows.append((partition, off, rec))
        if new:
            self.hwm[(table, partition)] = max(new)
        return len(new)

    def ingest_logs(self, objects):
        """Notifications of log objects, delivered until every message succeeded."""
        for k in objects:
            if k in self.logs:
                continue
            self.logs.add(k)
            uri = f"s3://{self.log_bucket}/{log_key(k)}"
            for line, (text, f) in enumerate(log_lines(k), start=1):
                if f is None:
                    raw = base64.b64encode(text.encode()).decode()
                    # No table: the table is named by the line's bucket field, unknown here.
                    self.rows["dead_letters"][(None, None, None, None, uri, line, raw, None)] += 1
                else:
                    self.rows[LOG_TABLE][log_row(f, uri, line)] += 1

    def delete_orders(self, ids):
        ids = set(ids)
        gone = [r for r in self.rows["raw/order"] if r[0] in ids]
        for r in gone:
            del self.rows["raw/order"][r]
        return len(gone)

    def recreate_orders(self):
        self.rows["raw/order"] = Counter()
        for k in [k for k in self.hwm if k[0] == "raw/order"]:
            del self.hwm[k]

    def refine(self):
        """The upsert consumed every source row so far: latest per key, deletes remove the key."""
        best = {}
        for part, off, rec in self.cdc_rows:
            key = (rec["grp"], rec["id"])
            if key not in best or rec["updated"] > best[key][2]["updated"]:
                best[key] = (part, off, rec)
        self.rows["refined/cdc"] = Counter(
            (r["grp"], r["id"], r["val"], r["updated"], p, o)
            for p, o, r in best.values() if r["op"] != "D")

    def order_ids(self):
        return sorted(r[0] for r in self.rows["raw/order"])


def diff(want, got, limit=8):
    """The row difference of two multisets, for a failure message."""
    missing, extra = want - got, got - want
    lines = [f"  expected {sum(want.values())} rows, read {sum(got.values())}: "
             f"{sum(missing.values())} missing, {sum(extra.values())} extra"]
    for label, c in (("missing", missing), ("extra", extra)):
        for row, n in sorted(c.items())[:limit]:
            lines.append(f"    {label}: {row}" + (f" x{n}" if n > 1 else ""))
        if len(c) > limit:
            lines.append(f"    ... {len(c) - limit} more {label}")
    return "\n".join(lines)
