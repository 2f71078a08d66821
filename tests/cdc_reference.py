"""Random CDC change streams and the plain reference the silver tables are checked against
(tests/e2e/test_cdc_reference.py, tests/chaos/test_cdc_faults.py). Nothing here uses
Lakestream's code: the reference is the documented semantics (README "CDC table families"),
written out in Python.

A `Stream` is one source table's history as the database made it: snapshot rows, inserts,
updates, deletes and re-inserts of a few keys, and a column added half way, in commit order,
each change at its own log position (`lsn`) and commit time. `Delivery` sends it the way
Debezium and Kafka do (one message per change, each delete followed by its tombstone) and the
way at-least-once breaks it: some changes re-sent later at a new offset (a connector restart),
some delivered behind later changes, batches of random size, some batches delivered twice. The
reference applies what was delivered (by Kafka offset, once):
- SCD2: per key, in `__seq` order (`<lsn, 20 digits>|<offset, 20 digits>`), one row per
  upsert (`c`, `u`, `r`) whose row values differ from the open version's (an equal one, e.g. a
  re-sent change, is no version), closed (`__END_SEQ`, `__END_AT`) by the next such upsert or
  a delete; times on the key's clock: `__START_AT` = the running maximum of the commit times
  of the key's versions and deletes so far, `__END_AT` = the closing event's.
- SCD1: per key, the open version of SCD2 (its `__seq` and commit time `__source_ts`); a
  delete last leaves no row.
- the change feed: replayed commit by commit onto the previous reference, it gives the next.

`DmsStream` is the same for an AWS DMS table: a full load file, then CDC files (`Op` I/U/D, a
commit-timestamp column) delivered as S3 notifications in random order, some twice; its
`__seq` is `<phase>|<commit µs, 20 digits>|<object key>|<row, 12 digits>`.
"""
import base64
import datetime as dt
import hashlib
import json

import pyarrow as pa

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
BASE_MS = 1_795_939_200_000  # 2026-11-30T00:00:00Z
LSN0 = 24_000_000
ROW_COLS = ("id", "v", "n", "note")


class LsnClock:
    """PostgreSQL's log position, shared by every table of a database (ever increasing)."""

    def __init__(self, rng):
        self.rng = rng
        self.lsn = LSN0

    def tick(self):
        self.lsn += self.rng.randint(8, 400)
        return self.lsn, BASE_MS + (self.lsn - LSN0) * 10


class Change:
    """One change of a key: `ts_us` is its commit time (µs), `row` its row (None: a delete)."""

    def __init__(self, key, op, lsn, ts_ms, row, ts_us=None):
        self.key, self.op, self.lsn, self.ts_ms, self.row = key, op, lsn, ts_ms, row
        self.ts_us = ts_ms * 1000 if ts_us is None else ts_us

    def __repr__(self):
        return f"{self.op}{self.key}@{self.lsn}"


def history(rng, clock, name, changes=30, keys=6, snapshot=3):
    """One table's changes in commit order (see the module doc)."""
    state, out = {}, []
    for k in range(1, snapshot + 1):
        lsn, ts = clock.tick()
        state[k] = {"id": k, "v": f"{name}-{k}-{lsn}", "n": rng.randint(0, 999)}
        out.append(Change(k, "r", lsn, ts, dict(state[k])))
    for i in range(changes):
        lsn, ts = clock.tick()
        p = rng.random()
        if state and p < 0.2:
            k = rng.choice(sorted(state))
            del state[k]
            out.append(Change(k, "d", lsn, ts, None))
            continue
        if state and p < 0.6:
            k = rng.choice(sorted(state))
            op = "u"
        else:
            free = [k for k in range(1, keys + 1) if k not in state]
            if not free:
                k, op = rng.choice(sorted(state)), "u"
            else:
                k, op = rng.choice(free), "c"
        row = {"id": k, "v": f"{name}-{k}-{lsn}", "n": rng.randint(0, 999)}
        if i >= changes // 2:  # the source table gained a column
            row["note"] = f"note-{lsn % 97}"
        state[k] = row
        out.append(Change(k, op, lsn, ts, dict(row)))
    return out


def delivery_order(rng, changes, late=0.25, resend=0.1):
    """The changes in the order they reach Kafka: some behind later ones, some twice."""
    order = list(changes)
    for c in list(changes):
        if rng.random() < late:
            i = order.index(c)
            order.insert(min(len(order), i + rng.randint(2, 7)), order.pop(i))
        if rng.random() < resend:
            i = order.index(c)
            order.insert(min(len(order), i + rng.randint(1, 8)), c)
    return order


class Stream:
    """One Debezium topic: its messages (offset order) and what of them bronze has."""

    def __init__(self, rng, clock, prefix, schema, table, changes=30, keys=6):
        self.topic = f"{prefix}.{schema}.{table}"
        self.prefix, self.schema, self.table = prefix, schema, table
        self.messages = []  # (offset, Change or None for a tombstone)
        for c in delivery_order(rng, history(rng, clock, table, changes, keys)):
            self.messages.append((len(self.messages), c))
            if c.op == "d":
                self.messages.append((len(self.messages), None))
        self.cursor = 0
        self.delivered = {}  # offset -> Change, what bronze holds

    def take(self, n):
        """The next `n` messages (fewer at the end)."""
        out = self.messages[self.cursor:self.cursor + n]
        self.cursor += len(out)
        return out

    def done(self):
        return self.cursor >= len(self.messages)

    def record(self, offset, change):
        """An MSK record (`schemas.enable=false`, PostgreSQL source block, key `{"id": ..}`)."""
        key = change.key if change else self.key_of(offset)
        rec = {"topic": self.topic, "partition": 0, "offset": offset,
               "timestamp": BASE_MS + offset, "timestampType": "CREATE_TIME", "headers": [],
               "key": b64({"id": key}),
               "value": b64(self.value(change)) if change else None}
        return rec

    def key_of(self, offset):
        """A tombstone's key: the delete just before it."""
        return dict(self.messages)[offset - 1].key

    def value(self, c):
        source = {"version": "2.7.3.Final", "connector": "postgresql", "name": self.prefix,
                  "ts_ms": c.ts_ms, "snapshot": "true" if c.op == "r" else "false", "db": self.prefix,
                  "sequence": f'[null,"{c.lsn}"]', "schema": self.schema, "table": self.table,
                  "txId": 700 + c.lsn % 1000, "lsn": c.lsn, "xmin": None}
        # REPLICA IDENTITY DEFAULT: a delete's `before` holds the key only.
        return {"before": {"id": c.key} if c.op == "d" else None, "after": c.row, "source": source,
                "op": c.op, "ts_ms": c.ts_ms + 7, "transaction": None}

    def landed(self, messages):
        """Bronze took these messages (a redelivery adds nothing)."""
        for offset, c in messages:
            if c is not None:
                self.delivered[offset] = c

    def changes(self):
        """What bronze holds, as (seq, change)."""
        return [(f"{c.lsn:020}|{off:020}", c) for off, c in self.delivered.items()]


def b64(obj):
    return base64.b64encode(json.dumps(obj).encode()).decode()


def msk_event(batches):
    """One MSK event of (stream, messages) pairs."""
    records = {}
    for stream, messages in batches:
        if messages:
            records[f"{stream.topic}-0"] = [stream.record(o, c) for o, c in messages]
    return {"eventSource": "aws:kafka", "records": records,
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/crm/abc",
            "bootstrapServers": "b-1.crm:9098"}


def versions(changes, cols=ROW_COLS):
    """Per key, in `__seq` order: the versions [(seq, change, start, end_seq, end_at)], an
    upsert equal to the open version (row values) adding none; times a running maximum."""
    per_key = {}
    for seq, c in changes:
        per_key.setdefault(c.key, {})[seq] = c
    out = {}
    for k, by_seq in per_key.items():
        vs, open_, clock = [], None, None
        for seq in sorted(by_seq):
            c = by_seq[seq]
            if c.op != "d" and open_ is not None and row_of(c.row, cols) == row_of(open_[1].row, cols):
                continue
            clock = c.ts_us if clock is None else max(clock, c.ts_us)
            if open_ is not None:
                open_[3:] = [seq, clock]
                open_ = None
            if c.op != "d":
                open_ = [seq, c, clock, None, None]
                vs.append(open_)
        out[k] = (vs, open_)
    return out


def scd1(changes, cols=ROW_COLS):
    """SCD1 reference: {key: row} with `__seq` and `__source_ts` (µs)."""
    out = {}
    for k, (_, open_) in versions(changes, cols).items():
        if open_ is not None:
            seq, c = open_[0], open_[1]
            out[k] = {**row_of(c.row, cols), "__seq": seq, "__source_ts": c.ts_us}
    return out


def scd2(changes, cols=ROW_COLS):
    """SCD2 reference: {(key, seq): row} with `__START_AT`, `__END_AT`, `__END_SEQ` (µs)."""
    out = {}
    for k, (vs, _) in versions(changes, cols).items():
        for seq, c, start, end_seq, end_at in vs:
            out[(k, seq)] = {**row_of(c.row, cols), "__seq": seq, "__START_AT": start,
                             "__END_AT": end_at, "__END_SEQ": end_seq}
    return out


def row_of(row, cols):
    return {c: row.get(c) for c in cols}


def columns(scd, cols=ROW_COLS):
    """Silver's columns: the row's, then SCD1's `__seq`, `__source_ts` or SCD2's interval."""
    extra = {"__seq", "__source_ts"} if scd == 1 else {"__seq", "__START_AT", "__END_AT", "__END_SEQ"}
    return set(cols) | extra


def plain(value):
    """A value as the reference holds it: timestamps as µs since the epoch."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return (value - EPOCH) // dt.timedelta(microseconds=1)
    return value


def identity(scd, row):
    return row["id"] if scd == 1 else (row["id"], row["__seq"])


def as_reference(scd, rows, cols=ROW_COLS):
    """Rows read back (dicts) as {identity: row}; fails on a duplicate identity and on a column
    the reference does not know."""
    want = columns(scd, cols)
    out = {}
    for r in rows:
        extra = set(r) - want - {"_change_type", "_commit_version", "_commit_timestamp"}
        assert not extra, f"columns the reference does not know: {sorted(extra)}"
        row = {c: plain(r.get(c)) for c in want}
        k = identity(scd, row)
        assert k not in out, f"two rows for {k}: {out[k]} and {row}"
        out[k] = row
    return out


def diff(want, got):
    """A readable account of where two references differ ('' when equal)."""
    lines = []
    for k in sorted(set(want) | set(got), key=str):
        if want.get(k) != got.get(k):
            lines.append(f"  {k}: want {want.get(k)}\n  {' ' * len(str(k))}  got  {got.get(k)}")
    return "\n".join(lines[:20])


def replay_feed(scd, before, feed_rows, cols=ROW_COLS):
    """Apply change feed rows (Delta CDF, every commit in order) to `before`; returns the state
    after them. Fails when a row contradicts the state it applies to (an insert of a row that
    is there, a preimage or delete of one that is not, an update whose images are equal)."""
    state = dict(before)
    by_version = {}
    for r in feed_rows:
        by_version.setdefault(r["_commit_version"], []).append(r)
    for v in sorted(by_version):
        rows = [(r["_change_type"], as_reference(scd, [r], cols).popitem()) for r in by_version[v]]
        pre = {k: row for t, (k, row) in rows if t == "update_preimage"}
        post = {k: row for t, (k, row) in rows if t == "update_postimage"}
        assert set(pre) == set(post), f"v{v}: preimages {sorted(pre, key=str)} vs postimages {sorted(post, key=str)}"
        for k in pre:
            assert pre[k] != post[k], f"v{v}: an update of {k} that changes nothing: {pre[k]}"
        for t, (k, row) in rows:
            if t in ("update_preimage", "delete"):
                assert state.get(k) == row, f"v{v}: {t} of {k} = {row}, but the table had {state.get(k)}"
                del state[k]
        for t, (k, row) in rows:
            if t in ("insert", "update_postimage"):
                assert k not in state, f"v{v}: {t} of {k} = {row}, but the table had {state[k]}"
                state[k] = row
    return state


def silver_name(family, s):
    return f"silver/{family}/{s.schema}/{s.table}"


class Checker:
    """Silver of each stream against the reference, and its change feed since the last check."""

    def __init__(self, open_table, cols=None):
        self.open_table = open_table  # table name -> deltalake.DeltaTable
        self.seen = {}  # table -> (version checked, reference then)
        self.cols = cols
        self.checks = 0

    def check(self, family, scd, stream, where=""):
        name = silver_name(family, stream)
        kw = {"cols": self.cols} if self.cols else {}
        changes = stream.changes()
        want = scd1(changes, **kw) if scd == 1 else scd2(changes, **kw)
        if not changes:
            return
        dt = self.open_table(name)
        got = as_reference(scd, dt.to_pyarrow_table().to_pylist(), **kw)
        assert got == want, f"{name} {where} differs from the reference:\n{diff(want, got)}"
        last, before = self.seen.get(name, (-1, {}))
        version = dt.version()
        if version > last:
            feed = pa.table(dt.load_cdf(starting_version=last + 1).read_all()).to_pylist()
            replayed = replay_feed(scd, before, feed, **kw)
            assert replayed == want, f"{name} {where}: its change feed v{last + 1}..v{version} replayed:\n{diff(want, replayed)}"
        self.seen[name] = (version, want)
        self.checks += 1


# --- the random schedule ---------------------------------------------------------------------

STREAMS_CONF = """
[[cdc]]
family = "shop"
source = "debezium"
topics = ["shop.public.*"]

[[cdc]]
family = "audit"
source = "debezium"
topics = ["audit.public.*"]
scd = 2
"""


def two_families(rng, changes=30, tables=3):
    """`shop` (SCD1: orders, users, items) and `audit` (SCD2: accounts, grants, roles), the
    first `tables` of each, as `STREAMS_CONF` declares them: [(family, scd, [Stream])]."""
    clock = LsnClock(rng)
    shop = [Stream(rng, clock, "shop", "public", t, changes) for t in ("orders", "users", "items")[:tables]]
    audit = [Stream(rng, clock, "audit", "public", t, changes) for t in ("accounts", "grants", "roles")[:tables]]
    return [("shop", 1, shop), ("audit", 2, audit)]


def random_schedule(rng, families, tmp_path, checker, deliver, refine, optimize):
    """Deliver every stream in random rounds: a batch of 2-9 messages per topic in one MSK event
    (sometimes re-split: the last batch again with the new one), sometimes delivered twice,
    sometimes a compaction; an apply run (`refine`) after 60% of the rounds and after the last,
    each followed by a check of every silver table. `deliver(path, new)` must land the event
    (`new`: the changes bronze has not seen). Returns the number of rounds."""
    streams = [s for _, _, ss in families for s in ss]
    previous, round_ = [], 0
    while not all(s.done() for s in streams) or round_ == 0:
        round_ += 1
        batch = [(s, s.take(rng.randint(2, 9))) for s in streams]
        if previous and rng.random() < 0.2:
            batch = [(s, old + new) for (s, old), (_, new) in zip(previous, batch)]
        path = tmp_path / f"round-{round_}.json"
        path.write_text(json.dumps(msk_event(batch)))
        new = sum(1 for st, ms in batch for o, c in ms if c is not None and o not in st.delivered)
        deliver(path, new)
        for s, messages in batch:
            s.landed(messages)
        if rng.random() < 0.25:
            deliver(path, 0)  # at-least-once: the same event again
        previous = batch
        if rng.random() < 0.15:
            optimize()
        if rng.random() < 0.6 or all(s.done() for s in streams):
            refine()
            for family, scd, ss in families:
                for s in ss:
                    checker.check(family, scd, s, f"after round {round_}")
    return round_


# --- AWS DMS ---------------------------------------------------------------------------------

DMS_COLS = ("commit_ts", "id", "v", "n")


class DmsStream:
    """One DMS table: `LOAD00000001.csv` (no header: commit_ts, id, v, n), then CDC files
    (`Op` first) named by time; `files` are the objects, `delivered` what bronze read."""

    def __init__(self, rng, prefix, schema, table, files=3, keys=6):
        self.prefix, self.schema, self.table = prefix, schema, table
        self.files = []  # (key, body, [(op, row_number, commit_us, id, v, n)])
        t = BASE_MS * 1000 + rng.randint(0, 10**6)
        state, rows = {}, []
        for k in range(1, 4):
            t += rng.randint(1, 10**6)
            state[k] = (f"{table}-{k}-load", rng.randint(0, 999))
            rows.append(("r", t, k, *state[k]))
        self.files.append(self._file("LOAD00000001.csv", rows, load=True))
        for f in range(files):
            rows = []
            for _ in range(rng.randint(2, 6)):
                t += rng.randint(1, 10**6)
                p = rng.random()
                if state and p < 0.25:
                    k = rng.choice(sorted(state))
                    rows.append(("d", t, k, *state.pop(k)))
                    continue
                free = [k for k in range(1, keys + 1) if k not in state]
                k = rng.choice(free) if free and (p > 0.7 or not state) else rng.choice(sorted(state))
                op = "u" if k in state else "c"
                state[k] = (f"{table}-{k}-{t}", rng.randint(0, 999))
                rows.append((op, t, k, *state[k]))
            name = dt.datetime.fromtimestamp(rows[0][1] / 1e6, dt.timezone.utc).strftime("%Y%m%d-%H%M%S") + f"{f:03}.csv"
            self.files.append(self._file(name, rows, load=False))
        self.delivered = {}  # object key -> rows

    def _file(self, name, rows, load):
        key = f"{self.prefix}{self.schema}/{self.table}/{name}"
        lines = []
        for op, t, k, v, n in rows:
            ts = dt.datetime.fromtimestamp(t // 10**6, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") + f".{t % 10**6:06}"
            fields = [ts, str(k), v, str(n)]
            if not load:
                fields.insert(0, {"c": "I", "u": "U", "d": "D"}[op])
            lines.append(",".join(fields))
        body = ("\n".join(lines) + "\n").encode()
        return key, body, [(op, i + 1, t, k, v, n) for i, (op, t, k, v, n) in enumerate(rows)], load

    def changes(self):
        out = []
        for key, (rows, load) in self.delivered.items():
            for op, row, t, k, v, n in rows:
                seq = f"{0 if load else 1}|{t:020}|{key}|{row:012}"
                row = {"commit_ts": t, "id": k, "v": v, "n": n}
                out.append((seq, Change(k, op, None, t // 1000, row, ts_us=t)))
        return out

    def landed(self, key):
        for k, body, rows, load in self.files:
            if k == key:
                self.delivered[k] = (rows, load)


def etag(body):
    return hashlib.md5(body).hexdigest()


def sqs_event(bucket, objects):
    """An SQS event with one S3 ObjectCreated notification per (key, body)."""
    recs = []
    for i, (key, body) in enumerate(objects):
        note = {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
                             "eventTime": "2026-11-30T01:00:00.000Z", "eventName": "ObjectCreated:Put",
                             "s3": {"s3SchemaVersion": "1.0", "configurationId": "landing",
                                    "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                                    "object": {"key": key, "size": len(body), "eTag": etag(body),
                                               "sequencer": f"{i:018X}"}}}]}
        recs.append({"messageId": f"m-{i}-{etag(key.encode())[:8]}", "receiptHandle": "h", "body": json.dumps(note),
                     "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                     "md5OfBody": "", "eventSource": "aws:sqs",
                     "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:landing", "awsRegion": "us-east-1"})
    return {"Records": recs}
