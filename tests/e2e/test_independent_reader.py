"""The tables the msk-ingest handler writes, read back by an independent reader (Python
`deltalake`, i.e. delta-rs's Python binding with its own log replay, plus pyarrow), on the
filesystem and on the S3 emulator."""
import datetime as dt


UTC = dt.timezone.utc


def read(lake, name):
    t = lake.delta(name)
    return t, t.to_pyarrow_table().to_pylist()


def ts(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)


# raw/order after msk-orders, msk-replay and msk-self-managed: (order_id, owner, value,
# timestamp, kafka_partition, kafka_offset), each Kafka record once.
ORDERS_AFTER_REPLAYS = sorted([
    (1, "alice", 120, ts("2022-04-04T10:15:30.123Z"), 1, 1205207),
    (2, "bob", 845, ts("2022-04-04T10:15:31.123Z"), 2, 1206118),
    (3, "carol", 33, ts("2022-04-04T10:15:32.123Z"), 0, 1204310),
    (4, "dave", 410, ts("2022-04-04T10:15:33.123Z"), 1, 1205208),
    (5, "erin", 999, ts("2022-04-04T10:15:34.123Z"), 2, 1206119),
    (6, "frank", 7, ts("2022-04-04T10:15:35.123Z"), 0, 1204311),
    (1, "alice", 121, ts("2022-04-04T10:16:00.500Z"), 1, 1205209),
    (2, "bob", 846, ts("2022-04-04T10:16:01.500Z"), 2, 1206120),
    (3, "carol", 77, ts("2022-04-04T10:20:00Z"), 0, 1204900),
    (6, "frank", 78, ts("2022-04-04T10:20:00Z"), 0, 1204901),
])


def test_orders_exactly_once_through_replays(lake):
    r1 = lake.invoke("msk-orders.json")
    assert (r1["received"], r1["written"], r1["duplicates"]) == (6, 6, 0)
    r2 = lake.invoke("msk-orders.json")
    assert (r2["written"], r2["duplicates"]) == (0, 6)
    r3 = lake.invoke("msk-replay.json")
    assert (r3["written"], r3["duplicates"]) == (2, 4)
    r4 = lake.invoke("msk-self-managed.json")
    assert r4["written"] == 2

    table, rows = read(lake, "raw/order")
    got = sorted((r["order_id"], r["order_owner"], r["order_value"], r["timestamp"], r["kafka_partition"], r["kafka_offset"]) for r in rows)
    expected = ORDERS_AFTER_REPLAYS
    assert got == expected
    assert table.metadata().partition_columns == ["year", "month", "day", "hour"]
    assert all(len(r["year"]) == 2 and len(r["hour"]) == 2 for r in rows)
    # Replays commit nothing: create, re-split replay (2 new), self-managed batch.
    assert table.version() == 2
    ops = [h["operation"] for h in table.history()]
    assert ops == ["WRITE", "WRITE", "CREATE TABLE"]


def test_dead_letters_keep_raw_bytes_and_reasons(lake):
    r = lake.invoke("msk-bad-records.json")
    assert (r["received"], r["written"], r["dead_lettered"], r["duplicates"]) == (10, 1, 9, 0)
    _, rows = read(lake, "dead_letters")
    by_offset = {(row["topic"], row["offset"]): row for row in rows}
    assert len(by_offset) == 9
    reason = lambda off: by_offset[("orders", off)]["error"]
    assert "not a JSON object" in reason(501)
    assert "order_id" in reason(502) and "seven" in reason(502)
    assert "order_id" in reason(503)
    assert "order_id" in reason(504)
    assert "UTF-8" in reason(505)
    assert "null value" in reason(506)
    assert "base64" in reason(507)
    assert "last tuesday" in reason(508)
    assert "no table is configured for topic `payments`" in by_offset[("payments", 42)]["error"]
    assert by_offset[("orders", 501)]["raw_base64"] == "bm90IGpzb24gYXQgYWxs"
    assert by_offset[("orders", 506)]["raw_base64"] is None
    assert by_offset[("orders", 507)]["raw_base64"] == "this is %% not base64"
    assert all(row["target_table"] == "raw/order" for k, row in by_offset.items() if k[0] == "orders")
    # Redelivery adds nothing anywhere.
    again = lake.invoke("msk-bad-records.json")
    assert (again["written"], again["dead_lettered"], again["duplicates"]) == (0, 0, 10)
    assert len(read(lake, "dead_letters")[1]) == 9
    assert len(read(lake, "raw/order")[1]) == 1


def test_schema_evolution_is_visible_to_other_readers(lake):
    lake.invoke("msk-members.json")
    t0, _ = read(lake, "raw/member")
    assert "points" not in t0.schema().to_arrow().names
    r = lake.invoke("msk-new-field.json")
    assert r["tables"][0]["columns_added"] == ["points"]
    table, rows = read(lake, "raw/member")
    assert len(rows) == 8
    points = {(row["order_owner"], row["membership"]): row["points"] for row in rows}
    assert points[("alice", "platinum")] == 250
    assert points[("bob", "gold")] is None
    assert points[("alice", "gold")] is None  # older rows read null
    # Time travel: version 0 has no `points` column.
    old = lake.delta("raw/member", version=0)
    assert "points" not in old.to_pyarrow_table().column_names
    assert table.metadata().partition_columns == ["order_owner"]
