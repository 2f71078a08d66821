#!/usr/bin/env python3
"""The gold-table bench (`make bench-compare`, row "gold"; alone: `make bench-gold`).

A raw/order-shaped source (order_id, order_owner of 100, order_value, timestamp over 30 days) of
ROWS rows in 100 files is generated once per size and cached under target/bench-gold/cache-<rows>,
with the example's gold job (lakestream.toml: count/sum/min/max/avg/count by owner, UTC date and
hour) built over it by `lakestream refine gold`. Then a day of seed-like new rows (one order every
3 s: 28,800 rows in 24 hourly commits, timestamps in the last day, so they update existing groups
of one day partition) is appended, and timed side by side on the same copy, each pinned to core 0:
  lakestream  `lakestream refine gold`: the incremental run (reads the 24 new files, rewrites the
              touched day partition of gold);
  datafusion  the same aggregate recomputed with DataFusion (its Python package, the release
              build PyPI ships) over the whole source (ROWS + 28,800 rows, the Delta table's files
              via `deltalake`'s pyarrow dataset).
Both sizes run (BENCH_GOLD_ROWS, default "1000000,10000000"), so the incremental run's cost is seen
not to grow with the table. BENCH_REPEAT runs per pair (fresh copies), median and range.
LAKESTREAM_BIN picks the binary (default: the release build, built first).
"""
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "target" / "bench-gold"
SIZES = [int(x) for x in os.environ.get("BENCH_GOLD_ROWS", "1000000,10000000").split(",")]
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
FILES, OWNERS, DAYS = 100, 100, 30
DAY_ROWS, DAY_COMMITS = 28_800, 24
T0 = 1_764_547_200_000_000  # 2025-12-01T00:00:00Z, µs
JOB = """
[[refine]]
job = "gold"
output = "gold/order_hourly"
partition_by = ["day"]
max_files_per_run = 1000
[refine.aggregate]
source = "raw/order"
group_by = ["order_owner", "date(timestamp) as day", "hour(timestamp) as hour"]
measures = ["count(*) as orders", "sum(order_value) as total", "min(order_value) as smallest",
            "max(order_value) as largest", "avg(order_value) as mean", "count(order_value) as valued"]
"""
SQL = """SELECT order_owner, to_date(timestamp) AS day, CAST(date_part('hour', timestamp) AS INT) AS hour,
count(*) AS orders, sum(order_value) AS total, min(order_value) AS smallest, max(order_value) AS largest,
avg(order_value) AS mean, count(order_value) AS valued FROM src GROUP BY 1, 2, 3"""


def binary():
    b = os.environ.get("LAKESTREAM_BIN")
    if b:
        return b
    subprocess.run(["cargo", "build", "-q", "--release", "--bin", "lakestream"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "release" / "lakestream")


def orders(first, n, t_lo, t_hi, seed):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    values = rng.integers(1, 1000, n).astype("int32")
    valid = rng.random(n) >= 0.02
    return pa.table({
        "order_id": pa.array(np.arange(first, first + n, dtype="int32")),
        "order_owner": pa.array([f"owner-{i:03d}" for i in rng.integers(0, OWNERS, n)]),
        "order_value": pa.array(values, mask=~valid),
        "timestamp": pa.array(rng.integers(t_lo, t_hi, n), pa.timestamp("us", tz="UTC")),
    })


def config(lake):
    p = lake.parent / "lakestream.toml"
    p.write_text(f'pipeline = "orders-raw"\n[lake]\nroot = "{lake}"\n{JOB}')
    return p


def prepared(bin_, rows):
    """The cached lake: source of `rows`, gold built, then a day appended (gold not run on it)."""
    from deltalake import write_deltalake

    cache = OUT / f"cache-{rows}"
    lake = cache / "lake"
    if (cache / ".ready").exists():
        return cache
    shutil.rmtree(cache, ignore_errors=True)
    lake.mkdir(parents=True)
    per = rows // FILES
    for i in range(FILES):
        write_deltalake(str(lake / "raw/order"), orders(i * per, per, T0, T0 + DAYS * 86_400_000_000, i),
                        mode="append")
    cfg = config(lake)
    subprocess.run([bin_, "refine", "gold", "--config", str(cfg)], check=True, capture_output=True)
    last = T0 + (DAYS - 1) * 86_400_000_000
    per = DAY_ROWS // DAY_COMMITS
    for h in range(DAY_COMMITS):
        lo = last + h * 3_600_000_000
        write_deltalake(str(lake / "raw/order"), orders(rows + h * per, per, lo, lo + 3_600_000_000, 1000 + h),
                        mode="append")
    (cache / ".ready").write_text("")
    return cache


def fresh_copy(cache):
    work = OUT / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(cache, work)
    return work, config(work / "lake")


def ours(bin_, cache):
    work, cfg = fresh_copy(cache)
    t = time.perf_counter()
    out = subprocess.run(["taskset", "-c", "0", bin_, "refine", "gold", "--json", "--config", str(cfg)],
                         check=True, capture_output=True, text=True)
    secs = time.perf_counter() - t
    runs = json.loads(out.stdout)[0]["runs"]
    assert sum(r["sides"][0]["rows"] for r in runs) == DAY_ROWS, out.stdout
    return secs, work


def datafusion_recompute(work):
    code = f"""
import time, datafusion
from deltalake import DeltaTable
t = time.perf_counter()
ctx = datafusion.SessionContext()
ctx.register_dataset("src", DeltaTable({str(work / 'lake/raw/order')!r}).to_pyarrow_dataset())
batches = ctx.sql({SQL!r}).collect()
print(time.perf_counter() - t, sum(b.num_rows for b in batches))
"""
    t = time.perf_counter()
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], check=True, capture_output=True,
                         text=True)
    wall = time.perf_counter() - t
    inner, groups = out.stdout.split()
    return wall, float(inner), int(groups)


def check(work, groups):
    """Our gold table has the groups DataFusion computed (same count; values are tested in CI)."""
    from deltalake import DeltaTable

    n = DeltaTable(str(work / "lake/gold/order_hourly")).to_pyarrow_dataset().count_rows()
    assert n == groups, (n, groups)


def run():
    import importlib.util

    # The peer and the generator's numpy: bench-only, not in the test requirements.
    for module in ("datafusion", "numpy"):
        if importlib.util.find_spec(module) is None:
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", module], check=True)
    bin_ = binary()
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for rows in SIZES:
        cache = prepared(bin_, rows)
        a, b, inner = [], [], []
        for _ in range(REPEAT):
            secs, work = ours(bin_, cache)
            a.append(secs)
            wall, q, groups = datafusion_recompute(work)
            check(work, groups)
            b.append(wall)
            inner.append(q)
        results.append({"source_rows": rows + DAY_ROWS, "new_rows": DAY_ROWS, "groups": groups,
                        "lakestream_incremental_s": statistics.median(a), "lakestream_range": [min(a), max(a)],
                        "datafusion_recompute_s": statistics.median(b), "datafusion_range": [min(b), max(b)],
                        "datafusion_query_only_s": statistics.median(inner), "binary": bin_})
    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    for r in run():
        print(f"source {r['source_rows']:>11,} rows, +{r['new_rows']:,} new, {r['groups']:,} groups: "
              f"lakestream incremental {r['lakestream_incremental_s']:.2f} s, DataFusion recompute "
              f"{r['datafusion_recompute_s']:.2f} s (query {r['datafusion_query_only_s']:.2f} s) -> "
              f"{r['datafusion_recompute_s'] / r['lakestream_incremental_s']:.1f}x")
