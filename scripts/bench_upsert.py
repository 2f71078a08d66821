#!/usr/bin/env python3
"""`make bench-upsert`: Lakestream's upsert vs Python `deltalake`'s MERGE, side by side.

A 10,000,000-row table of 100 files (file i holds ids [i*100k, (i+1)*100k)) is generated once
and cached under target/bench-upsert/cache-<rows>. Two sources of 100,000 rows (90,000 updates of
existing ids, 10,000 new ids, all with a newer `ts`) are upserted into a fresh copy
(BENCH_UPSERT_ROWS scales all of it, e.g. 1000000 for a quick run):
  spread  - the updated ids are spread over all 100 files (every file is rewritten);
  newest  - the updated ids are the newest 90,000 (one file is rewritten).
Lakestream: `lakestream refine` (release build) with an upsert job, key `id`, order by `ts`.
Python: DeltaTable.merge(predicate="t.id = s.id").when_matched_update_all()
.when_not_matched_insert_all(). Each run is its own process pinned to one core on a fresh copy;
wall time and peak RSS come from /usr/bin/time. Each pair runs BENCH_REPEAT times (default 3,
alternating engines, as these machines are noisy); the table shows the median and the range.
Writes target/bench-upsert/results.json.
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
OUT = ROOT / "target" / "bench-upsert"
ROWS = int(os.environ.get("BENCH_UPSERT_ROWS", "10000000"))
CACHE = OUT / f"cache-{ROWS}"
FILES, UPDATES, INSERTS = 100, ROWS * 9 // 1000, ROWS // 1000
PER_FILE = ROWS // FILES
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))


def generate():
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import write_deltalake

    base = CACHE / "base"
    if (base / "_delta_log").exists():
        return
    shutil.rmtree(CACHE, ignore_errors=True)
    ts0 = pa.scalar(1_767_225_600_000_000, pa.timestamp("us", tz="UTC"))  # 2026-01-01
    for i in range(FILES):
        ids = pa.array(range(i * PER_FILE, (i + 1) * PER_FILE), pa.int64())
        t = pa.table({
            "id": ids,
            "value": pc.multiply(ids, 7),
            "ts": pa.array([ts0.value] * PER_FILE, pa.timestamp("us", tz="UTC")),
            "note": pa.array([f"row {j:09d} initial" for j in range(i * PER_FILE, (i + 1) * PER_FILE)]),
        })
        write_deltalake(str(base), t, mode="append")
    import random
    rng = random.Random(42)
    ts1 = 1_767_312_000_000_000  # 2026-01-02
    for shape, updated in (
        ("spread", sorted(rng.sample(range(ROWS), UPDATES))),
        ("newest", list(range(ROWS - UPDATES, ROWS))),
    ):
        ids = updated + list(range(ROWS, ROWS + INSERTS))
        t = pa.table({
            "id": pa.array(ids, pa.int64()),
            "value": pa.array([-x for x in ids], pa.int64()),
            "ts": pa.array([ts1] * len(ids), pa.timestamp("us", tz="UTC")),
            "note": pa.array([f"row {x:09d} updated" for x in ids]),
        })
        write_deltalake(str(CACHE / f"src-{shape}"), t, mode="overwrite")


def timed(cmd, env=None):
    """(wall seconds, peak RSS MiB) of `cmd` pinned to core 0."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", "taskset", "-c", "0", *cmd],
        capture_output=True, text=True, env=env, check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed:\n{out.stdout}\n{out.stderr}")
    wall, kb = out.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kb) / 1024, out.stdout


def lakestream(work, shape):
    cfg = work / "lakestream.toml"
    cfg.write_text(f"""pipeline = "bench"
[lake]
root = "{work}"
[[refine]]
job = "upsert"
output = "target"
max_mib_per_run = 1024
[refine.upsert]
source = "src-{shape}"
key = ["id"]
order_by = ["ts"]
""")
    return timed([str(ROOT / "target/release/lakestream"), "refine", "--config", str(cfg), "--json"])


def python_merge(work, shape):
    return timed([sys.executable, __file__, "merge", str(work / "target"), str(work / f"src-{shape}")])


def merge(target, source):
    from deltalake import DeltaTable

    src = DeltaTable(source).to_pyarrow_table()
    started = time.perf_counter()
    (DeltaTable(target).merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    print(json.dumps({"merge_s": time.perf_counter() - started}))


def check(work):
    from deltalake import DeltaTable
    import pyarrow.compute as pc

    t = DeltaTable(str(work / "target")).to_pyarrow_table(columns=["id", "value"])
    updated = pc.sum(pc.less(t.column("value"), 0)).as_py()
    return t.num_rows, updated


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "merge":
        return merge(sys.argv[2], sys.argv[3])
    run()


def run():
    """Generate (cached), run every pair REPEAT times, print the table; returns the results."""
    generate()
    runs = {}
    for shape in ("spread", "newest"):
        for _ in range(REPEAT):
            for engine, run in (("lakestream", lakestream), ("python deltalake merge", python_merge)):
                work = OUT / "work"
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir(parents=True)
                shutil.copytree(CACHE / "base", work / "target")
                shutil.copytree(CACHE / f"src-{shape}", work / f"src-{shape}")
                wall, rss, _ = run(work, shape)
                rows, updated = check(work)
                assert rows == ROWS + INSERTS and updated == UPDATES + INSERTS, (engine, shape, rows, updated)
                runs.setdefault((shape, engine), []).append((wall, rss))
    shutil.rmtree(OUT / "work", ignore_errors=True)
    results = []
    for (shape, engine), rs in runs.items():
        walls, rsss = [r[0] for r in rs], [r[1] for r in rs]
        results.append({
            "shape": shape, "engine": engine, "runs": len(rs),
            "wall_s": statistics.median(walls), "wall_s_range": [min(walls), max(walls)],
            "peak_rss_mib": round(statistics.median(rsss)),
            "peak_rss_mib_range": [round(min(rsss)), round(max(rsss))],
        })
    print(f"{'shape':<8} {'engine':<24} {'wall s (median, range)':>24} {'peak RSS MiB (median, range)':>30}")
    for r in results:
        w, m = r["wall_s_range"], r["peak_rss_mib_range"]
        print(f"{r['shape']:<8} {r['engine']:<24} {r['wall_s']:>7.2f} ({w[0]:.2f}-{w[1]:.2f}){'':>4}"
              f" {r['peak_rss_mib']:>13} ({m[0]}-{m[1]})")
    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
