"""Event times and field names a Delta reader cannot take (issue 23, defects 4 and 5), through
the `lakestream invoke msk` path, read back by Python `deltalake` + pyarrow on the filesystem
and on the S3 emulator: an epoch in microseconds read as milliseconds (year 57,885) is
dead-lettered and the table stays readable; a merge-mode field that differs from a column only
in case lands in that column."""
import base64
import json


def _event(tmp_path, name, records):
    """An MSK event with `records` = [(topic, partition, offset, value dict)]."""
    by_key = {}
    for topic, partition, offset, value in records:
        by_key.setdefault(f"{topic}-{partition}", []).append({
            "topic": topic, "partition": partition, "offset": offset,
            "timestamp": 1764537184835, "timestampType": "CREATE_TIME",
            "value": base64.b64encode(json.dumps(value).encode()).decode(),
            "headers": [],
        })
    path = tmp_path / name
    path.write_text(json.dumps({"eventSource": "aws:kafka", "records": by_key}))
    return str(path)


def _rows(lake, name):
    t = lake.delta(name)
    return t, t.to_pyarrow_table().to_pylist()


def test_a_microsecond_epoch_is_dead_lettered_and_the_table_stays_readable(lake, tmp_path):
    order = lambda i, ts: {"order_id": i, "order_owner": "alice", "order_value": i, "timestamp": ts}
    event = _event(tmp_path, "orders.json", [
        ("orders", 0, 10, order(1, "2026-11-30T21:13:04.835Z")),
        ("orders", 0, 11, order(2, 1764537184835000)),  # epoch µs, read as ms: year 57,885
        ("orders", 0, 12, order(3, 1764537184836)),
    ])
    r = lake.invoke(event)
    assert (r["received"], r["written"], r["dead_lettered"]) == (3, 2, 1), r
    _, rows = _rows(lake, "raw/order")
    assert sorted(row["order_id"] for row in rows) == [1, 3]
    assert sorted(row["timestamp"].isoformat() for row in rows) == [
        "2025-11-30T21:13:04.836000+00:00", "2026-11-30T21:13:04.835000+00:00"]
    _, letters = _rows(lake, "dead_letters")
    assert [(row["offset"], "outside the years 0001-9999" in row["error"]) for row in letters] == [(11, True)]


def test_a_field_differing_from_a_column_only_in_case_lands_in_it(lake, tmp_path):
    member = lambda owner, **f: {"order_owner": owner, "timestamp": "2026-11-30T21:13:04.835Z", **f}
    first = _event(tmp_path, "m1.json", [("members", 0, 1, member("alice", membership="gold"))])
    assert lake.invoke(first)["written"] == 1
    second = _event(tmp_path, "m2.json", [
        ("members", 0, 2, member("bob", Membership="silver")),
        ("members", 0, 3, member("carol", Tier="a")),
        ("members", 0, 4, member("dave", tier="b")),
    ])
    r = lake.invoke(second)
    assert (r["written"], r["dead_lettered"]) == (3, 0), r
    table, rows = _rows(lake, "raw/member")
    names = [f.name for f in table.schema().fields]
    assert sorted(n.lower() for n in names) == ["membership", "order_owner", "tier", "timestamp"]
    got = sorted((row["order_owner"], row["membership"]) for row in rows)
    assert got == [("alice", "gold"), ("bob", "silver"), ("carol", None), ("dave", None)]
