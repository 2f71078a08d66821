"""Delta's change data feed as an independent reader sees it: an SCD type 2 silver table written
by `lakestream refine` (bronze changes ingested through the MSK function) is read with Python
`deltalake`'s `DeltaTable.load_cdf`: protocol, property, and every run's `_change_type` rows."""
import base64
import json

CONF = '''
[[topics]]
topic = "bronze"
table = "raw/bronze"
schema_mode = "merge"
columns = [
  { name = "id", type = "int64" },
  { name = "v", type = "string" },
  { name = "__op", type = "string", nullable = false },
  { name = "__seq", type = "string", nullable = false },
  { name = "__source_ts", type = "timestamp" },
]

[[refine]]
job = "hist"
output = "silver/hist"
[refine.cdc]
source = "raw/bronze"
keys = ["id"]
scd = 2
'''


def event(changes, first_offset):
    records = []
    for i, (id_, v, op, seq) in enumerate(changes):
        value = {"id": id_, "v": v, "__op": op, "__seq": f"{seq:02}",
                 "__source_ts": f"2026-01-01T00:00:{seq:02}Z"}
        records.append({"topic": "bronze", "partition": 0, "offset": first_offset + i, "timestamp": 0,
                        "timestampType": "CREATE_TIME", "headers": [],
                        "value": base64.b64encode(json.dumps(value).encode()).decode()})
    return {"eventSource": "aws:kafka", "records": {"bronze-0": records},
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/demo/x",
            "bootstrapServers": "b-1:9098"}


def test_load_cdf_reads_the_scd2_change_feed(lake, tmp_path):
    lake.config.write_text(lake.config.read_text() + CONF)
    runs = [
        [(1, "a", "c", 10), (1, "b", "u", 20), (2, "x", "c", 15)],
        [(1, "late", "u", 12)],
        [(1, "b", "d", 30)],
    ]
    offset = 0
    for i, changes in enumerate(runs):
        ev = tmp_path / f"run-{i}.json"
        ev.write_text(json.dumps(event(changes, offset)))
        offset += len(changes)
        lake.invoke(ev)
        lake.cli("refine")
    dt = lake.delta("silver/hist")
    protocol = dt.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 4)
    assert dt.metadata().configuration["delta.enableChangeDataFeed"] == "true"
    import pyarrow as pa

    rows = pa.table(dt.load_cdf(starting_version=0).read_all()).to_pylist()
    got = sorted((r["_commit_version"], r["_change_type"], r["id"], r["__seq"], r["__END_SEQ"]) for r in rows)
    v1, v2, v3 = sorted({r["_commit_version"] for r in rows})
    assert got == sorted([
        (v1, "insert", 1, "10", "20"), (v1, "insert", 1, "20", None), (v1, "insert", 2, "15", None),
        (v2, "insert", 1, "12", "20"),
        (v2, "update_preimage", 1, "10", "20"), (v2, "update_postimage", 1, "10", "12"),
        (v3, "update_preimage", 1, "20", None), (v3, "update_postimage", 1, "20", "30"),
    ])
    # The table itself: the history, as any reader sees it.
    current = sorted((r["id"], r["__seq"], r["__END_SEQ"]) for r in dt.to_pyarrow_table().to_pylist())
    assert current == [(1, "10", "12"), (1, "12", "20"), (1, "20", "30"), (2, "15", None)]
