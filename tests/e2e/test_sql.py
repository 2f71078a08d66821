"""`lakestream sql` (DataFusion, cargo feature `sql`): tables named by path, an old version with
`--at`, the three output formats, and an error that lists the lake's tables."""
import csv
import io
import json


def sql(lake, query, *extra, ok=True):
    out = lake.run("sql", query, *extra)
    assert (out.returncode == 0) == ok, out.stderr
    return out


def test_sql_counts_match_the_tables_and_time_travel_works(lake):
    for ev in ["msk-orders.json", "msk-replay.json", "msk-self-managed.json", "msk-members.json"]:
        lake.invoke(ev)
    rows = lake.read("raw/order").to_pylist()
    per_owner = {}
    for r in rows:
        per_owner[r["order_owner"]] = per_owner.get(r["order_owner"], 0) + r["order_value"]
    out = sql(lake, "SELECT order_owner, sum(order_value) AS total FROM raw_order GROUP BY order_owner ORDER BY order_owner",
              "--format", "json")
    got = {r["order_owner"]: r["total"] for r in map(json.loads, out.stdout.splitlines())}
    assert got == per_owner and len(got) == 6
    out = sql(lake, "SELECT count(*) AS n FROM raw_order_v0", "--at", "raw/order=0", "--format", "csv")
    assert list(csv.DictReader(io.StringIO(out.stdout))) == [{"n": "6"}]
    # A join across two tables: every (order, membership) pair of the same owner, as the rows
    # Python `deltalake` reads give it.
    members = lake.read("raw/member").to_pylist()
    want = sorted((o["order_id"], o["order_owner"], m["membership"])
                  for o in rows for m in members if o["order_owner"] == m["order_owner"])
    query = ("SELECT o.order_id, o.order_owner, m.membership FROM raw_order o JOIN raw_member m "
             "ON o.order_owner = m.order_owner")
    out = sql(lake, query, "--format", "json")
    got = sorted((r["order_id"], r["order_owner"], r["membership"]) for r in map(json.loads, out.stdout.splitlines()))
    assert want and got == want, (got, want)
    table = sql(lake, query + " ORDER BY 1, 3 LIMIT 1").stdout  # the table format
    assert "+--" in table and "order_id" in table and f" {want[0][2]} " in table, table
    err = sql(lake, "SELECT * FROM no_such_table", ok=False)
    assert "raw_order" in err.stderr and "dead_letters" in err.stderr, err.stderr


def test_sql_refuses_a_name_two_tables_share(lake):
    """Issue 24 (11c, found in `sql` too): `raw_order` and `raw-order` both map to the SQL name
    `raw_order`; a query on it must not silently read whichever table came last, but fail naming
    both. A table whose name is unique is still queryable."""
    import pyarrow as pa
    from deltalake import write_deltalake

    lake.config.write_text(lake.config.read_text() + """
[[topics]]
topic = "orders-underscore"
table = "raw_order"
columns = [{ name = "id", type = "int64" }]

[[topics]]
topic = "orders-dash"
table = "raw-order"
columns = [{ name = "id", type = "int64" }]
""")
    opts = lake.storage_options or None
    write_deltalake(lake.table_uri("raw_order"), pa.table({"id": [1]}), storage_options=opts)
    write_deltalake(lake.table_uri("raw-order"), pa.table({"id": [2, 3]}), storage_options=opts)
    write_deltalake(lake.table_uri("raw/member"), pa.table({"id": [7, 8, 9]}), storage_options=opts)
    out = sql(lake, "SELECT count(*) AS n FROM raw_order", "--format", "csv", ok=False)
    assert out.returncode != 0, out.stdout
    assert "`raw_order`" in out.stderr and "`raw-order`" in out.stderr and "`raw/order`" in out.stderr, out.stderr
    ok = sql(lake, "SELECT count(*) AS n FROM raw_member", "--format", "csv")
    assert ok.stdout.split() == ["n", "3"], ok.stdout
