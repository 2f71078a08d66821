"""`make bench-memory`: peak RSS of the largest runs the functions take, to size `RefineMemory`
and `MskIngestMemory` (a benchmark, not a test).

A plain-files CDC family (`source = "files"`, every row an upsert, key `id`, SCD1 with the
change data feed) lands ROWS rows of incompressible text (~100 bytes a row, several landing
objects) into bronze with `lakestream invoke s3-logs`, then `lakestream refine` applies them
twice, each under /usr/bin/time:
  insert  - every row new (silver is empty);
  update  - every row again with new values: every silver file is rewritten and every old
            image is kept for the change data feed (the worst case of a CDC apply).
BENCH_MEMORY_TEXT picks the text: `random` (hex, compresses ~1.4x) or `words` (a 2,000-word
vocabulary, ~2x; a chunk of the same Parquet bytes holds more rows decoded). Each run reads at
most `max_mib_per_run` (BENCH_MEMORY_CHUNK_MIB, default 24: what the function
reads at the template's RefineMemory of 768 MB) of bronze per chunk, so the peak
is one chunk's, whatever ROWS is, once ROWS holds more than a chunk - except the first run
(and `--rebuild`), which reads bronze's whole snapshot at once. Prints bronze's size, the runs
each apply took and peak RSS. Then one MSK batch at Lambda's 6 MB payload limit (Debezium
records of ~1 KB, one table) through `lakestream invoke msk`.

    make bench-memory                        # release CLI
    MALLOC_ARENA_MAX=2 BENCH_MEMORY_TEXT=words make bench-memory   # as the template runs refine
    BENCH_MEMORY_ROWS=200000 .venv/bin/python scripts/bench_memory.py [path/to/lakestream]
"""
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "security")]

from secnames import sqs_event  # noqa: E402
from test_sec_cdc_width import FAMILY as DEBEZIUM, record  # noqa: E402

ROWS = int(os.environ.get("BENCH_MEMORY_ROWS", "1500000"))
# The chunk: what the refine function reads per run at RefineMemory / 32 (the template's
# 768 MB: 24; 1,024 MB: 32; 2,048 MB: 64).
CHUNK_MIB = int(os.environ.get("BENCH_MEMORY_CHUNK_MIB", "24"))
PER_OBJECT = 125_000
# "random": hex that barely compresses (~1.4x decoded per Parquet byte); "words": text from a
# vocabulary of 2,000 words, which Parquet compresses as real text does (a chunk of the same
# Parquet bytes decodes to several times more).
TEXT = os.environ.get("BENCH_MEMORY_TEXT", "random")
VOCAB = [os.urandom(4).hex()[: 4 + i % 7] for i in range(2000)]
FAMILY = f"""
[[cdc]]
family = "shop"
source = "files"
location = "s3://landing/files/"
keys = {{ "shop.orders" = ["id"] }}
max_mib_per_run = {CHUNK_MIB}
"""


def landing(first, n, rev):
    """A Parquet landing object of rows first..first+n, its text per TEXT (random text
    barely compresses, words ~2x)."""
    ids = list(range(first, first + n))
    if TEXT == "words":
        rng = random.Random(first * 7 + rev)
        w = lambda k: " ".join(rng.choice(VOCAB) for _ in range(k))  # noqa: E731
        name = [w(3)[:20] for _ in range(n)]
        email = [w(4).replace(" ", ".")[:24] + "@mail.example" for _ in range(n)]
        note = [w(7)[:40] for _ in range(n)]
    else:
        text = [os.urandom(n * k).hex() for k in (10, 15, 20)]
        name = [text[0][20 * i:20 * i + 20] for i in range(n)]
        email = [text[1][30 * i:30 * i + 30] for i in range(n)]
        note = [text[2][40 * i:40 * i + 40] for i in range(n)]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": name,
        "email": email,
        "note": note,
        "city": [f"city-{i % 100}" for i in ids],
        "amount": pa.array([float(i % 997) + rev for i in ids], pa.float64()),
        "rev": pa.array([rev] * n, pa.int64()),
    })


def timed(binary, args):
    out = subprocess.run(["/usr/bin/time", "-f", "%M %e", binary, *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args[:2])} failed ({out.returncode}): {out.stderr[-2000:]}")
    rss_kb, wall = out.stderr.strip().splitlines()[-1].split()
    return out.stdout, int(rss_kb) / 1024, float(wall)


def land(binary, work, config, rev):
    keys = []
    for first in range(0, ROWS, PER_OBJECT):
        key = f"files/shop/orders/rev{rev}-{first:09d}.parquet"
        path = work / "objects" / "landing" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(landing(first, min(PER_OBJECT, ROWS - first), rev), path)
        keys.append(("landing", key))
    peak = 0.0
    for k in keys:  # one object per invocation, as the SQS trigger's small batches deliver them
        event = sqs_event(work / "e.json", [k])
        _, rss, _ = timed(binary, ["invoke", "s3-logs", "--event", str(event), "--config", str(config),
                                   "--objects", str(work / "objects")])
        peak = max(peak, rss)
    return peak


def size_mib(path):
    return sum(p.stat().st_size for p in path.rglob("*.parquet")) / 2**20


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target" / "release" / "lakestream")
    example = (ROOT / "lakestream.toml").read_text()
    print(f"{ROWS:,} rows (~100 bytes of {TEXT} text each), key id, SCD1 + change data feed, "
          f"max_mib_per_run {CHUNK_MIB}; binary {binary}")
    print(f"{'step':10} {'bronze MiB':>10} {'runs':>5} {'peak RSS':>9} {'wall s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        config = work / "c.toml"
        config.write_text(example.replace('root = "./lake"', f'root = "{work}/lake"') + FAMILY)
        bronze = work / "lake" / "bronze" / "shop" / "shop" / "orders"
        for rev, step in ((1, "insert"), (2, "update")):
            ingest = land(binary, work, config, rev)
            print(f"{'ingest':10} {size_mib(bronze):>10.1f} {'':>5} {ingest:>7.0f}MB {'':>7}")
            out, rss, wall = timed(binary, ["refine", "--json", "--config", str(config)])
            runs = sum(len(r["runs"]) for r in json.loads(out))
            print(f"{step:10} {'':>10} {runs!s:>5} {rss:>7.0f}MB {wall:>7.1f}")
        msk(binary, work, example)


def msk(binary, work, example):
    """One MSK batch as large as Lambda's 6 MB invocation payload allows."""
    config = work / "d.toml"
    config.write_text(example.replace('root = "./lake"', f'root = "{work}/msk"') + DEBEZIUM)
    records, size, offset = [], 0, 0
    while size < 6_000_000:
        text = os.urandom(300).hex()
        records.append(record(offset, {"id": offset, "name": text[:100], "email": text[100:300],
                                       "note": text[300:], "amount": offset * 0.5}))
        size += len(json.dumps(records[-1])) + 2
        offset += 1
    event = work / "msk.json"
    event.write_text(json.dumps({"eventSource": "aws:kafka", "records": {"crm.public.people-0": records[:-1]},
                                 "eventSourceArn": "arn:aws:kafka:us-east-1:1:cluster/c/x",
                                 "bootstrapServers": "b-1:9098"}))
    _, rss, wall = timed(binary, ["invoke", "msk", "--event", str(event), "--config", str(config)])
    mb = event.stat().st_size / 1e6
    print(f"{'msk batch':10} {mb:>8.1f}MB {offset - 1:>5} {rss:>7.0f}MB {wall:>7.1f}   (records in the runs column)")


if __name__ == "__main__":
    main()
