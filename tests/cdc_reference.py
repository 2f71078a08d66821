"""Random CDC change streams and the plain reference the silver tables are checked against
(tests/e2e/test_cdc_reference.py, tests/chaos/test_cdc_faults.py). Nothing here uses
Lakestream's code: the reference is the documented semantics (README "CDC table families"),
written out in Python.

A `Stream` is one source table's history as the database made it: snapshot rows, inserts,
updates, deletes and re-inserts of a few keys, and a column added half way, in commit order,
each change at its own log position (`lsn`) and commit time; the snapshot rows carry their read
time, later than the commit times of the first streaming changes (source time is not monotone
in `lsn` order); a re-snapshot two thirds in re-sends every live row unchanged as `r` at a new
position; the database restarts its positions once (`LsnClock`: far lower positions from then on,
declared in the family's `position_resets`); in a `toast` stream a PostgreSQL UPDATE that leaves the large `doc` column alone sends
the placeholder `__debezium_unavailable_value` for it (such a stream is delivered in order, as
Kafka delivers one key's changes). `Delivery` sends it the way
Debezium and Kafka do (one message per change, each delete followed by its tombstone, whose
Kafka timestamp is the delete's commit time + 5 ms) and the way at-least-once and log compaction
break it: some changes re-sent later at a new offset (a connector restart), some delivered
behind later changes, some deletes removed by log compaction (only their tombstone left),
batches of random size, some batches delivered twice. The reference applies what was delivered
(by Kafka offset, once):
- a tombstone is a delete ranked just above the highest `__seq` of its key's changes at lower
  offsets (`<that __seq>|tombstone`), at its Kafka timestamp; when the nearest of those changes
  is a delete, or there are none, it changes nothing (README "CDC: deletes known only from
  their tombstone"); bronze holds a tombstone (`__seq` empty) unless the message before it in
  its batch is its delete;
- per key, the changes in `__seq` order (`<lsn, 20 digits>`: the log position alone, so a
  change re-sent at a new offset is the same change, kept once; after `e<k:04>|` when committed
  at or after the k-th declared position reset); a `doc` placeholder takes the
  previous change's `doc` (none, or a delete before: null);
- SCD1: the change with the greatest `__seq` (values, `__seq`, `__source_ts`); a delete there
  leaves no row;
- SCD2: an upsert (`c`, `u`, `r`) whose row values equal the open version's is no version (and
  does not move the clock); any other closes the open version and opens one; a delete closes
  the open version. Times run on a clock per key: a version starts at max(its commit time, the
  previous version's start or the previous delete's time), and is closed (`__END_SEQ`,
  `__END_AT`) at the closing change's `__seq` and (so clamped) time;
- the change feed: replayed commit by commit onto the previous reference, it gives the next
  (for SCD1 in the row values: a change that only moves a row's `__seq` / `__source_ts`, an
  unchanged re-snapshot, has no feed rows).

`DmsStream` is the same for an AWS DMS table: a full load file, then CDC files (`Op` I/U/D, a
commit-timestamp column) delivered as S3 notifications in random order, some twice; its
`__seq` is `2|<object written µs, 20 digits>|<phase>|<object key>|<row, 12 digits>` (DMS writes a
table's files in commit order, so when a file was written orders its rows; the test tells the
stream when it put each object).
"""
import base64
import datetime as dt
import hashlib
import json
import random

import pyarrow as pa

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
BASE_MS = 1_795_939_200_000  # 2026-11-29T08:00:00Z
LSN0 = 24_000_000
ROW_COLS = ("id", "v", "n", "note", "doc")
PLACEHOLDER = "__debezium_unavailable_value"
COMPACTED = 0.3  # the share of deletes log compaction removed (their tombstones stay)


class LsnClock:
    """A database's log position, shared by every table of it, and its commit clock (ms). The
    position grows with the clock, except at `reset_ms`: there the source starts its positions
    again (a MySQL binlog restart, a PostgreSQL cluster rebuilt), far below where they were,
    while the clock goes on."""

    def __init__(self, rng, reset_ms=None):
        self.rng = rng
        self.lsn = LSN0
        self.ms = BASE_MS
        self.reset_ms = reset_ms
        self.resets = [] if reset_ms is None else [reset_ms * 1000]  # µs, as declared

    def tick(self, snapshot=False):
        """The next change's (position, commit ms). A snapshot is never cut by the restart: its
        ticks stop just before it."""
        step = self.rng.randint(8, 400)
        ms = self.ms + step * 10
        if self.reset_ms is not None and ms >= self.reset_ms:
            if snapshot:
                ms = max(self.ms, self.reset_ms - 1)
            else:
                self.lsn, self.reset_ms = LSN0 // 1000, None  # positions start again
        self.lsn += step
        self.ms = ms
        return self.lsn, self.ms

    def read_time(self, first_ms):
        """A snapshot's read time: 20 s after its first row's position, before the restart
        when that is still to come (a snapshot is read within one life of the positions)."""
        t = first_ms + 20_000
        return t if self.reset_ms is None else min(t, self.reset_ms - 1)


def ranked_seq(lsn, ts_us, resets):
    """`__seq` of a change (README "CDC: position resets"): its position, after `e<k:04>|` when
    it was committed at or after the k-th declared reset."""
    k = sum(1 for r in resets if r <= ts_us)
    return (f"e{k:04}|" if k else "") + f"{lsn:020}"


class Change:
    """One change of a key: `ts_us` is its commit time (µs), `row` its row (None: a delete)."""

    def __init__(self, key, op, lsn, ts_ms, row, ts_us=None):
        self.key, self.op, self.lsn, self.ts_ms, self.row = key, op, lsn, ts_ms, row
        self.ts_us = ts_ms * 1000 if ts_us is None else ts_us

    def __repr__(self):
        return f"{self.op}{self.key}@{self.lsn}"


def history(rng, clock, name, changes=30, keys=6, snapshot=3, toast=False):
    """One table's changes in commit order (see the module doc)."""
    state, out = {}, []
    read_time = None
    for k in range(1, snapshot + 1):
        lsn, ts = clock.tick(snapshot=True)
        read_time = read_time or clock.read_time(ts)  # the snapshot's rows carry its read time
        state[k] = {"id": k, "v": f"{name}-{k}-{lsn}", "n": rng.randint(0, 999), "doc": f"doc-{k}-{lsn}"}
        out.append(Change(k, "r", lsn, read_time, dict(state[k])))
    for i in range(changes):
        lsn, ts = clock.tick()
        if i == (2 * changes) // 3:  # a re-snapshot: every live row again, unchanged
            for k in sorted(state):
                out.append(Change(k, "r", lsn, ts, dict(state[k])))
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
        keep_doc = op == "u" and rng.random() < 0.5
        doc = state[k]["doc"] if keep_doc else f"doc-{k}-{lsn}"
        row = {"id": k, "v": f"{name}-{k}-{lsn}", "n": rng.randint(0, 999), "doc": doc}
        if i >= changes // 2:  # the source table gained a column
            row["note"] = f"note-{lsn % 97}"
        state[k] = row
        sent = dict(row)
        if toast and keep_doc:
            sent["doc"] = PLACEHOLDER  # an UPDATE that did not touch the TOASTed column
        out.append(Change(k, op, lsn, ts, sent))
    return out


def delivery_order(rng, changes, late=0.25, resend=0.1):
    """The changes in the order they reach Kafka: some behind later ones, some twice. A late
    change never passes a re-snapshot row of its key (README: a change that changes nothing
    leaves no trace, so one sorting before it must have arrived first; Kafka keeps a key's
    changes in order anyway)."""
    order = list(changes)
    for c in list(changes):
        if rng.random() < late:
            i = order.index(c)
            to = min(len(order), i + rng.randint(2, 7))
            moved = order.pop(i)
            passed = range(i, min(to, len(order)))
            blocked = [j for j in passed if order[j].key == c.key and order[j].op == "r"]
            order.insert(min([to] + blocked), moved)
        if rng.random() < resend:
            i = order.index(c)
            order.insert(min(len(order), i + rng.randint(1, 8)), c)
    return order


class Hostile:
    """A record a producer to the topic forged (issue 38): each is dead-lettered alone with the
    reason `why`, and changes nothing in bronze or silver."""

    KINDS = {
        # One record adding 1,001 columns (past `max_table_columns`).
        "width": "max_table_columns",
        # Keyed by other fields than the table's (fixed by its first record).
        "key": "the record key names",
        # A commit time a century ahead.
        "future": "more than 7 days",
        # A truncate at a position past int64 (it would void every later change).
        "lsn": "64-bit",
        # Not a row change.
        "op": "not a Debezium row change",
    }

    def __init__(self, kind, key, lsn, ts_ms):
        self.kind, self.key, self.lsn, self.ts_ms = kind, key, lsn, ts_ms
        self.why = Hostile.KINDS[kind]

    def __repr__(self):
        return f"hostile-{self.kind}"


class Stream:
    """One Debezium topic: its messages (offset order) and what of them bronze has."""

    def __init__(self, rng, clock, prefix, schema, table, changes=30, keys=6, toast=False, hostile=0.0):
        self.topic = f"{prefix}.{schema}.{table}"
        self.prefix, self.schema, self.table = prefix, schema, table
        self.messages = []  # (offset, Change, None for a tombstone, or Hostile)
        self.tombs = {}  # offset -> (key, Kafka timestamp ms) of each tombstone
        changes = history(rng, clock, table, changes, keys, toast=toast)
        # Forged records from their own generator (keyed by the topic and the schedule's state,
        # drawing nothing from it), so the stream's schedule is the same with them or without.
        forge = random.Random(f"{self.topic}/{rng.getstate()[1][:4]}")
        for c in delivery_order(rng, changes, late=0 if toast else 0.25):
            if self.messages and forge.random() < hostile:
                kind = forge.choice(sorted(Hostile.KINDS))
                self.messages.append((len(self.messages), Hostile(kind, c.key, c.lsn, c.ts_ms)))
            if c.op != "d" or rng.random() >= COMPACTED:
                self.messages.append((len(self.messages), c))
            if c.op == "d":  # its tombstone (the delete itself may be compacted away)
                self.tombs[len(self.messages)] = (c.key, c.ts_ms + 5)
                self.messages.append((len(self.messages), None))
        self.cursor = 0
        self.delivered = {}  # offset -> Change, what bronze holds
        self.tombstoned = {}  # offset -> (key, ts ms) of the tombstones delivered
        self.tomb_rows = set()  # offsets of the tombstones bronze holds
        self.letters = set()  # offsets of the forged records dead-lettered
        self.resets = clock.resets  # the family's `position_resets` (µs)

    def take(self, n):
        """The next `n` messages (fewer at the end)."""
        out = self.messages[self.cursor:self.cursor + n]
        self.cursor += len(out)
        return out

    def done(self):
        return self.cursor >= len(self.messages)

    def record(self, offset, change):
        """An MSK record (`schemas.enable=false`, PostgreSQL source block, key `{"id": ..}`)."""
        if isinstance(change, Hostile):
            return self.forged(offset, change)
        key = change.key if change else self.tombs[offset][0]
        ts = BASE_MS + offset if change else self.tombs[offset][1]
        rec = {"topic": self.topic, "partition": 0, "offset": offset,
               "timestamp": ts, "timestampType": "CREATE_TIME", "headers": [],
               "key": b64({"id": key}),
               "value": b64(self.value(change)) if change else None}
        return rec

    def forged(self, offset, h):
        """The MSK record of forged record `h`."""
        c = Change(h.key, "u", h.lsn, h.ts_ms, {"id": h.key, "v": "forged", "n": 0, "doc": "forged"})
        value, key = self.value(c), {"id": h.key}
        if h.kind == "width":
            value["after"] = {"id": h.key, **{f"x{i}": i for i in range(1001)}}
        elif h.kind == "key":
            key = {"id": h.key, "tenant": 7}
        elif h.kind == "future":
            value["source"]["ts_ms"] = 4_102_444_800_000  # 2100-01-01
        elif h.kind == "lsn":
            value.update(op="t", before=None, after=None)
            value["source"]["lsn"] = 2**64 - 1
        else:
            value["op"] = "x"
        return {"topic": self.topic, "partition": 0, "offset": offset, "timestamp": BASE_MS + offset,
                "timestampType": "CREATE_TIME", "headers": [], "key": b64(key), "value": b64(value)}

    def value_bytes(self, offset):
        """The raw value bytes of the message at `offset` (what a dead letter keeps)."""
        return base64.b64decode(self.record(offset, self.messages[offset][1])["value"])

    def value(self, c):
        source = {"version": "2.7.3.Final", "connector": "postgresql", "name": self.prefix,
                  "ts_ms": c.ts_ms, "snapshot": "true" if c.op == "r" else "false", "db": self.prefix,
                  "sequence": f'[null,"{c.lsn}"]', "schema": self.schema, "table": self.table,
                  "txId": 700 + c.lsn % 1000, "lsn": c.lsn, "xmin": None}
        # REPLICA IDENTITY DEFAULT: a delete's `before` holds the key only.
        return {"before": {"id": c.key} if c.op == "d" else None, "after": c.row, "source": source,
                "op": c.op, "ts_ms": c.ts_ms + 7, "transaction": None}

    def _orphans(self, messages):
        """The tombstones of a batch that do not follow their delete in it."""
        out = set()
        for i, (offset, c) in enumerate(messages):
            if c is None:
                prev = messages[i - 1][1] if i > 0 else None
                follows = isinstance(prev, Change) and prev.op == "d" and prev.key == self.tombs[offset][0]
                if not follows:
                    out.add(offset)
        return out

    def _written_through(self):
        """The partition's committed offset (`txn`): the highest offset bronze wrote or
        dead-lettered."""
        return max(list(self.delivered) + list(self.tomb_rows) + list(self.letters), default=-1)

    def new_rows(self, messages):
        """How many rows bronze gains from this batch."""
        through = self._written_through()
        changes = sum(1 for o, c in messages if isinstance(c, Change) and o not in self.delivered)
        return changes + sum(1 for o in self._orphans(messages) if o > through)

    def new_letters(self, messages):
        """The forged records of this batch not dead-lettered yet (offset, Hostile)."""
        through = self._written_through()
        return [(o, c) for o, c in messages if isinstance(c, Hostile) and o > through]

    def landed(self, messages):
        """Bronze took these messages (a redelivery adds nothing)."""
        through = self._written_through()
        self.tomb_rows |= {o for o in self._orphans(messages) if o > through}
        for offset, c in messages:
            if isinstance(c, Hostile):
                self.letters.add(offset)
            elif c is not None:
                self.delivered[offset] = c
            else:
                self.tombstoned[offset] = self.tombs[offset]

    def bronze_offsets(self):
        """The Kafka offsets of bronze's rows."""
        return sorted(list(self.delivered) + list(self.tomb_rows))

    def changes(self):
        """What bronze holds, as (seq, change): a tombstone as the delete it stands for."""
        ranked = {off: (ranked_seq(c.lsn, c.ts_us, self.resets), c) for off, c in self.delivered.items()}
        out = list(ranked.values())
        for offset, (key, ts_ms) in self.tombstoned.items():
            earlier = sorted((off, seq, c) for off, (seq, c) in ranked.items() if c.key == key and off < offset)
            if not earlier or earlier[-1][2].op == "d":
                continue  # its delete came just before, or nothing to delete
            out.append((max(seq for _, seq, _ in earlier) + "|tombstone", Change(key, "d", -1, ts_ms, None)))
        return out


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


def per_key(changes):
    """{key: [(seq, change, row)]} in `__seq` order, one change per `__seq`, `row` with the
    `doc` placeholder resolved to the previous change's value (None for a delete)."""
    by_key = {}
    for seq, c in changes:
        by_key.setdefault(c.key, {})[seq] = c
    out = {}
    for k, by_seq in by_key.items():
        prev, rows = None, []
        for seq in sorted(by_seq):
            c = by_seq[seq]
            row = None
            if c.op != "d":
                row = {f: ((prev or {}).get(f) if v == PLACEHOLDER else v) for f, v in c.row.items()}
            rows.append((seq, c, row))
            prev = row
        out[k] = rows
    return out


def scd1(changes, cols=ROW_COLS):
    """SCD1 reference: {key: row} with `__seq` and `__source_ts` (µs)."""
    out = {}
    for k, rows in per_key(changes).items():
        seq, c, row = rows[-1]
        if row is not None:
            out[k] = {**row_of(row, cols), "__seq": seq, "__source_ts": c.ts_us}
    return out


def scd2(changes, cols=ROW_COLS):
    """SCD2 reference: {(key, seq): row} with `__START_AT`, `__END_AT`, `__END_SEQ` (µs)."""
    out = {}
    for k, rows in per_key(changes).items():
        open_, values, clock = None, None, None
        for seq, c, row in rows:
            at = c.ts_us if clock is None else max(clock, c.ts_us)
            if row is None:  # a delete closes the open version
                if open_ is not None:
                    out[open_].update({"__END_SEQ": seq, "__END_AT": at})
                open_, values, clock = None, None, at
                continue
            if open_ is not None and row_of(row, cols) == values:
                continue  # changes nothing: no version, the clock stays
            if open_ is not None:
                out[open_].update({"__END_SEQ": seq, "__END_AT": at})
            open_, values, clock = (k, seq), row_of(row, cols), at
            out[open_] = {**values, "__seq": seq, "__START_AT": at, "__END_AT": None, "__END_SEQ": None}
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


def values_only(scd, row):
    """SCD1 feed rows are about row values: a commit that only moves a row's `__seq` /
    `__source_ts` (an unchanged re-snapshot) has none, so the replay compares values."""
    if scd != 1:
        return row
    return {c: v for c, v in row.items() if c not in ("__seq", "__source_ts")}


def replay_feed(scd, before, feed_rows, cols=ROW_COLS):
    """Apply change feed rows (Delta CDF, every commit in order) to `before`; returns the state
    after them. Fails when a row contradicts the state it applies to (an insert of a row that
    is there, a preimage or delete of one that is not, an update whose images are equal)."""
    state = {k: values_only(scd, row) for k, row in before.items()}
    by_version = {}
    for r in feed_rows:
        by_version.setdefault(r["_commit_version"], []).append(r)
    for v in sorted(by_version):
        rows = []
        for r in by_version[v]:
            k, row = as_reference(scd, [r], cols).popitem()
            rows.append((r["_change_type"], (k, values_only(scd, row))))
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
            values = {k: values_only(scd, row) for k, row in want.items()}
            assert replayed == values, f"{name} {where}: its change feed v{last + 1}..v{version} replayed:\n{diff(values, replayed)}"
        self.seen[name] = (version, want)
        self.checks += 1


# --- the random schedule ---------------------------------------------------------------------

# When each family's source restarts its positions (`LsnClock`): 30 s into `shop` (within its
# first table's changes), 100 s into `audit` (within its second table's, when it has one).
SHOP_RESET_MS = BASE_MS + 30_000
AUDIT_RESET_MS = BASE_MS + 100_000

STREAMS_CONF = """
[[cdc]]
family = "shop"
source = "debezium"
topics = ["shop.public.*"]
position_resets = ["2026-11-29T08:00:30Z"]

[[cdc]]
family = "audit"
source = "debezium"
topics = ["audit.public.*"]
scd = 2
position_resets = ["2026-11-29T08:01:40Z"]
"""


def two_families(rng, changes=30, tables=3, hostile=0.08):
    """`shop` (SCD1: orders, users, items) and `audit` (SCD2: accounts, grants, roles), the
    first `tables` of each, as `STREAMS_CONF` declares them: [(family, scd, [Stream])]; about
    `hostile` of the messages are forged records (`Hostile`), each one dead letter."""
    # One database per family, each restarting its positions once (`STREAMS_CONF`).
    clock = LsnClock(rng, SHOP_RESET_MS)
    # The first table of each family is a PostgreSQL table with a TOASTed column.
    shop = [Stream(rng, clock, "shop", "public", t, changes, toast=i == 0, hostile=hostile)
            for i, t in enumerate(("orders", "users", "items")[:tables])]
    clock = LsnClock(rng, AUDIT_RESET_MS)
    audit = [Stream(rng, clock, "audit", "public", t, changes, toast=i == 0, hostile=hostile)
             for i, t in enumerate(("accounts", "grants", "roles")[:tables])]
    return [("shop", 1, shop), ("audit", 2, audit)]


def random_schedule(rng, families, tmp_path, checker, deliver, refine, optimize):
    """Deliver every stream in random rounds: a batch of 2-9 messages per topic in one MSK event
    (sometimes re-split: the last batch again with the new one), sometimes delivered twice,
    sometimes a compaction; an apply run (`refine`) after 60% of the rounds and after the last,
    each followed by a check of every silver table. `deliver(path, new, letters)` must land the
    event (`new`: the changes bronze has not seen; `letters`: the forged records it has not
    dead-lettered yet, [(stream, offset, Hostile)]). Returns the number of rounds."""
    streams = [s for _, _, ss in families for s in ss]
    previous, round_ = [], 0
    while not all(s.done() for s in streams) or round_ == 0:
        round_ += 1
        batch = [(s, s.take(rng.randint(2, 9))) for s in streams]
        if previous and rng.random() < 0.2:
            batch = [(s, old + new) for (s, old), (_, new) in zip(previous, batch)]
        path = tmp_path / f"round-{round_}.json"
        path.write_text(json.dumps(msk_event(batch)))
        new = sum(st.new_rows(ms) for st, ms in batch)
        letters = [(st, o, h) for st, ms in batch for o, h in st.new_letters(ms)]
        deliver(path, new, letters)
        for s, messages in batch:
            s.landed(messages)
        if rng.random() < 0.25:
            deliver(path, 0, [])  # at-least-once: the same event again
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
    (`Op` first) named by time; `files` are the objects, `delivered` what bronze read; a task
    reload (`reload`) writes `LOAD00000001.csv` again with the table as it is then, at a later
    transfer time."""

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
        t += rng.randint(1, 10**6)
        self.reload = self._file("LOAD00000001.csv", [("r", t, k, *state[k]) for k in sorted(state)], load=True)
        self.delivered = {}  # (object key, etag) -> rows
        self.written = {}  # (object key, etag) -> when it was put (µs), told by the test

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
        for (key, tag), (rows, load) in self.delivered.items():
            for op, row, t, k, v, n in rows:
                seq = f"2|{self.written[(key, tag)]:020}|{0 if load else 1}|{key}|{row:012}"
                row = {"commit_ts": t, "id": k, "v": v, "n": n}
                out.append((seq, Change(k, op, None, t // 1000, row, ts_us=t)))
        return out

    def landed(self, key, body):
        for k, b, rows, load in self.files + [self.reload]:
            if (k, b) == (key, body):
                self.delivered[(k, etag(b))] = (rows, load)


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
