"""Peak memory of `lakestream invoke` under the hostile CDC inputs of issue 38 (a benchmark, not
a test): each input runs alone on a fresh filesystem lake under `/usr/bin/time`, then an
ordinary batch shows the table still takes data. Prints one row per input: outcome, peak RSS,
wall time.

    make bench-hostile   # builds target/debug/lakestream, then runs this
    .venv/bin/python scripts/bench_hostile.py [path/to/lakestream]
"""
import io
import json
import pathlib
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "security")]

from secnames import sqs_event  # noqa: E402
from test_sec_cdc_objects import FAMILY, element, good_parquet, parquet  # noqa: E402
from test_sec_cdc_width import FAMILY as DEBEZIUM, record  # noqa: E402


def objects():
    """(name, key, bytes) of each landing object."""
    zstd = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(600)), "note": ["x" * 1_000_000] * 600}), zstd,
                   compression="zstd", use_dictionary=False)
    dictionary = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(450)), "note": ["x" * 1_000_000] * 450}), dictionary,
                   compression="zstd")
    nested = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(450)), "tags": [["x" * 1_000_000]] * 450}), nested,
                   compression="zstd")
    return [
        ("footer declaring 2^31-1 row groups", "rowgroups.parquet",
         parquet([element(1), element(0, leaf=True)], 2**31 - 1)),
        ("schema 200,000 levels deep", "deep.parquet",
         parquet([element(1) for _ in range(200_000)] + [element(0, leaf=True)], 0)),
        ("600 MB of zstd pages", "zstd.parquet", zstd.getvalue()),
        ("1 MB dictionary value x 450 rows", "dictionary.parquet", dictionary.getvalue()),
        ("the same inside a list", "nested.parquet", nested.getvalue()),
        ("ordinary Parquet (3 rows)", "good.parquet", good_parquet(3)),
    ]


def debezium():
    """(name, records) of each MSK batch, in order (one table)."""
    return [
        ("Debezium record adding 40,000 columns", [record(0, {"id": 1, **{f"c{i}": i for i in range(40_000)}})]),
        ("Debezium record adding 80,000 columns", [record(1, {"id": 2, **{f"c{i}": i for i in range(80_000)}})]),
        ("ordinary batch of 10 records", [record(2 + i, {"id": 10 + i, "name": "x"}) for i in range(10)]),
    ]


def run(binary, args):
    out = subprocess.run(["/usr/bin/time", "-f", "%M %e", binary, *args], capture_output=True, text=True)
    rss_kb, wall = out.stderr.strip().splitlines()[-1].split()
    return out.returncode, json.loads(out.stdout) if out.returncode == 0 else None, int(rss_kb), float(wall)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target" / "debug" / "lakestream")
    example = (ROOT / "lakestream.toml").read_text()
    print(f"{'input':42} {'bytes':>9} {'outcome':>10} {'peak RSS':>9} {'wall s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for name, key, data in objects():
            work = tmp / key
            (work / "objects/landing/files/shop/orders").mkdir(parents=True)
            (work / "objects/landing/files/shop/orders" / key).write_bytes(data)
            config = work / "c.toml"
            config.write_text(example.replace('root = "./lake"', f'root = "{work}/lake"') + FAMILY)
            event = sqs_event(work / "e.json", [("landing", f"files/shop/orders/{key}")])
            code, out, rss, wall = run(binary, ["invoke", "s3-logs", "--event", str(event), "--config",
                                                str(config), "--objects", str(work / "objects")])
            outcome = dict(out["report"]["objects"]["objects"]).popitem()[1]["outcome"] if out else f"exit {code}"
            print(f"{name:42} {len(data):>9} {outcome:>10} {rss / 1024:>7.0f}MB {wall:>7.2f}")
        work = tmp / "debezium"
        work.mkdir()
        config = work / "c.toml"
        config.write_text(example.replace('root = "./lake"', f'root = "{work}/lake"') + DEBEZIUM)
        for name, records in debezium():
            event = work / "e.json"
            event.write_text(json.dumps({"eventSource": "aws:kafka", "records": {"crm.public.people-0": records},
                                         "eventSourceArn": "arn:aws:kafka:us-east-1:1:cluster/c/x",
                                         "bootstrapServers": "b-1:9098"}))
            code, out, rss, wall = run(binary, ["invoke", "msk", "--event", str(event), "--config", str(config)])
            outcome = "ok" if out else f"exit {code}"
            print(f"{name:42} {event.stat().st_size:>9} {outcome:>10} {rss / 1024:>7.0f}MB {wall:>7.2f}")


if __name__ == "__main__":
    main()
