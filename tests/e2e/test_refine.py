"""The curated job against a reference written here in Python: raw tables are replayed from their
Delta logs version by version (only `add` actions with dataChange=true, read with pyarrow), the
lateness rule and the interval join are recomputed, and the result must equal `curated/order`
as Python `deltalake` reads it, row by row. Ingestion and refine runs are interleaved, a raw
batch is redelivered, a source is compacted between runs, and late rows exist on both sides."""
import base64
import datetime as dt
import json
import random
from collections import Counter

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable


HOUR_US = 3_600_000_000
OWNERS = ["alice", "bob", "carol", "dave", "erin", "frank"]
LEVELS = ["bronze", "silver", "gold", "platinum"]


def lakestream(lake, *args):
    return lake.cli(*args)


def iso(us):
    return dt.datetime.fromtimestamp(us / 1e6, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def msk_event(records):
    """records: (topic, partition, offset, json dict) -> an MSK event."""
    by_key = {}
    for topic, part, off, value in records:
        by_key.setdefault(f"{topic}-{part}", []).append({
            "topic": topic, "partition": part, "offset": off, "timestamp": 0,
            "timestampType": "CREATE_TIME", "headers": [],
            "value": base64.b64encode(json.dumps(value).encode()).decode(),
        })
    return {"eventSource": "aws:kafka", "records": by_key,
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/demo/x",
            "bootstrapServers": "b-1:9098"}


def generate(seed=7):
    """Batches of Kafka records: in-order traffic every ~40 s plus, now and then, a row hours in
    the past on either topic (late under the 3 h / 2 h delays)."""
    rng = random.Random(seed)
    t = 1_764_000_000 * 1_000_000
    offsets = Counter()
    batches = []
    for b in range(14):
        batch = []
        for _ in range(30):
            t += rng.randint(5, 70) * 1_000_000
            if rng.random() < 0.3:
                owner = rng.choice(OWNERS)
                rec = ("members", 0, {"order_owner": owner, "membership": rng.choice(LEVELS), "timestamp": iso(t)})
            else:
                oid = rng.randint(1, 6)
                rec = ("orders", oid % 2, {"order_id": oid, "order_owner": OWNERS[oid - 1],
                                           "order_value": rng.randint(1, 999), "timestamp": iso(t)})
            batch.append(rec)
        if b in (5, 9):
            old = t - rng.randint(4, 6) * HOUR_US
            batch.append(("members", 0, {"order_owner": "alice", "membership": "gold", "timestamp": iso(old)}))
            batch.append(("orders", 1, {"order_id": 1, "order_owner": "alice", "order_value": 5,
                                        "timestamp": iso(old + 600_000_000)}))
        # Minutes later: past the members' watermark window but still joinable by the interval.
        if b == 7:
            batch.append(("members", 0, {"order_owner": "bob", "membership": "silver", "timestamp": iso(t - 3 * HOUR_US)}))
        out = []
        for topic, part, value in batch:
            out.append((topic, part, offsets[(topic, part)], value))
            offsets[(topic, part)] += 1
        batches.append(out)
    return batches


def filesystem(lake):
    if lake.backend == "fs":
        return pafs.LocalFileSystem(), lake.root
    so = lake.storage_options
    fs = pafs.S3FileSystem(endpoint_override=so["AWS_ENDPOINT_URL"], scheme="http", region="us-east-1",
                           access_key="test", secret_key="test")
    return fs, lake.root[len("s3://"):]


def versions(lake, table):
    """[(version, rows added with dataChange=true as a list of dicts)] from the log itself."""
    fs, base = filesystem(lake)
    root = f"{base}/{table}"
    out = []
    v = 0
    while True:
        path = f"{root}/_delta_log/{v:020d}.json"
        try:
            with fs.open_input_stream(path) as f:
                text = f.read().decode()
        except (FileNotFoundError, OSError):
            break
        rows = []
        for line in text.splitlines():
            action = json.loads(line) if line.strip() else {}
            add = action.get("add")
            if not add or not add.get("dataChange"):
                assert not (action.get("remove") or {}).get("dataChange"), "sources are append-only here"
                continue
            from urllib.parse import unquote
            with fs.open_input_file(f"{root}/{unquote(add['path'])}") as f:
                t = pq.read_table(f)
            for r in t.to_pylist():
                r.update(add.get("partitionValues") or {})
                rows.append(r)
        out.append((v, rows))
        v += 1
    return out


def micros(x):
    if isinstance(x, dt.datetime):
        return int(x.replace(tzinfo=x.tzinfo or dt.timezone.utc).timestamp() * 1_000_000)
    return x


def with_lateness(vs, delay_us):
    """Rows with a `late` flag: late when below (max time of earlier versions) - delay."""
    best = None
    out = []
    for _, rows in vs:
        wm = None if best is None else best - delay_us
        for r in rows:
            r = dict(r, _t=micros(r["timestamp"]))
            r["_late"] = wm is not None and r["_t"] < wm
            out.append(r)
        for r in rows:
            t = micros(r["timestamp"])
            best = t if best is None else max(best, t)
    return out


def reference(lake):
    orders = with_lateness(versions(lake, "raw/order"), 3 * HOUR_US)
    members = with_lateness(versions(lake, "raw/member"), 2 * HOUR_US)
    rows = Counter()
    for o in orders:
        if o["_late"]:
            continue
        for m in members:
            if not m["_late"] and o["order_owner"] == m["order_owner"] and m["_t"] <= o["_t"] <= m["_t"] + HOUR_US:
                rows[(o["order_id"], o["order_owner"], o["order_value"], o["_t"], m["membership"], m["_t"],
                      o["year"], o["month"], o["day"], o["hour"])] += 1
    late = sum(r["_late"] for r in orders) + sum(r["_late"] for r in members)
    return rows, late


def curated(lake):
    t = DeltaTable(lake.table_uri("curated/order"), storage_options=lake.storage_options).to_pyarrow_table()
    rows = Counter()
    for r in t.to_pylist():
        rows[(r["order_id"], r["order_owner"], r["order_value"], micros(r["timestamp"]), r["membership"],
              micros(r["membership_timestamp"]), r["year"], r["month"], r["day"], r["hour"])] += 1
    return rows


def processed_reference(curated_rows):
    """Latest row per order_id by (timestamp, membership_timestamp) over everything curated has
    (latest-wins never goes back in time, so the incremental result is the overall maximum)."""
    best = {}
    for row in curated_rows.elements():
        key, rank = row[0], (row[3], row[5])
        if key not in best or rank > best[key][0]:
            best[key] = (rank, row)
    return Counter(r for _, r in best.values())


def processed(lake):
    t = DeltaTable(lake.table_uri("processed/order"), storage_options=lake.storage_options).to_pyarrow_table()
    rows = Counter()
    for r in t.to_pylist():
        rows[(r["order_id"], r["order_owner"], r["order_value"], micros(r["timestamp"]), r["membership"],
              micros(r["membership_timestamp"]), r["year"], r["month"], r["day"], r["hour"])] += 1
    return rows


def test_curated_matches_the_python_reference(lake, tmp_path):
    batches = generate()
    for i, batch in enumerate(batches):
        ev = tmp_path / f"batch-{i}.json"
        ev.write_text(json.dumps(msk_event(batch)))
        lake.invoke(ev)
        if i == 3:
            lake.invoke(tmp_path / "batch-1.json")  # a redelivered raw batch
        if i % 3 == 2:
            lakestream(lake, "refine")
        if i == 8:
            lakestream(lake, "optimize", "raw/member", "--min-files", "2")
    report = json.loads(lakestream(lake, "refine", "--json"))
    again = json.loads(lakestream(lake, "refine", "--json"))
    assert again[0]["runs"] == [], "a second run must find nothing new"
    expected, late = reference(lake)
    got = curated(lake)
    assert late >= 3, "the data must contain late rows on both sides"
    assert sum(expected.values()) > 500
    missing, extra = expected - got, got - expected
    assert not missing and not extra, f"missing {list(missing)[:3]}, extra {list(extra)[:3]}"
    letters = DeltaTable(lake.table_uri("dead_letters"), storage_options=lake.storage_options).to_pyarrow_table()
    late_letters = [e for e in letters.column("error").to_pylist() if e.startswith("late:")]
    assert len(late_letters) == late
    assert report[0]["job"] == "curated"
    # processed/order: the latest row per order of everything curated holds, one row per order.
    assert report[1]["job"] == "processed"
    want = processed_reference(got)
    have = processed(lake)
    assert len(want) == 6 and sum(have.values()) == 6
    assert have == want, f"missing {list(want - have)[:3]}, extra {list(have - want)[:3]}"
