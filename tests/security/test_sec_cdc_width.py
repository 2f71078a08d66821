"""Issue 38 (2): wide records are bounded. One Debezium record adding 40,000 columns took 33 s and
1 GB, and the table it widened needed 1.84 GB for every later 10-record batch (above the
function's memory: the partition stopped for good); JSON lines adding one key per line grew
quadratically. Now a record or row that would add more than `max_new_columns` columns, or take its
table past `max_table_columns`, is one dead letter with the reason, the table keeps its width, and
the next ordinary batch lands."""
import base64
import json
import subprocess

from lake_support import BIN
from secnames import invoke_s3_logs, rows, sqs_event

FAMILY = """
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*"]

[[cdc]]
family = "shop"
source = "files"
location = "s3://landing/files/"
"""


def record(offset, after):
    value = {"before": None, "after": after, "op": "c",
             "source": {"lsn": 1000 + offset, "ts_ms": 1764547200000 + offset}}
    return {"topic": "crm.public.people", "partition": 0, "offset": offset, "timestamp": 1764547200000,
            "timestampType": "CREATE_TIME", "key": base64.b64encode(json.dumps({"id": after["id"]}).encode()).decode(),
            "value": base64.b64encode(json.dumps(value).encode()).decode(), "headers": []}


def invoke_msk(lake, path, records):
    path.write_text(json.dumps({"eventSource": "aws:kafka", "records": {"crm.public.people-0": records},
                                "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/c/x",
                                "bootstrapServers": "b-1:9098"}))
    out = subprocess.run([BIN, "invoke", "msk", "--event", str(path), "--config", str(lake.config)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_a_record_past_the_width_bounds_is_a_dead_letter_and_the_table_goes_on(lake, tmp_path):
    lake.config.write_text(lake.config.read_text() + FAMILY)
    wide = {"id": 2, **{f"c{i}": i for i in range(40_000)}}
    batch = [record(0, {"id": 1, "name": "ann"}), record(1, wide), record(2, {"id": 3, "name": "cy"})]
    invoke_msk(lake, tmp_path / "wide.json", batch)
    people = rows(lake, "bronze/crm/public/people")
    assert sorted(r["id"] for r in people) == [1, 3]
    assert len(people[0]) < 20, f"bronze took {len(people[0])} columns"
    letters = [r for r in rows(lake, "dead_letters") if r.get("topic") == "crm.public.people"]
    assert [r["offset"] for r in letters] == [1], letters
    assert "max_new_columns" in letters[0]["error"], letters[0]["error"]
    # 100 new columns pass (the bound), 101 do not; the next ordinary batch lands.
    at_bound = {"id": 4, **{f"d{i}": i for i in range(99)}}
    over = {"id": 5, **{f"e{i}": i for i in range(101)}}
    invoke_msk(lake, tmp_path / "next.json", [record(3, at_bound), record(4, over), record(5, {"id": 6})])
    assert sorted(r["id"] for r in rows(lake, "bronze/crm/public/people")) == [1, 3, 4, 6]
    letters = [r for r in rows(lake, "dead_letters") if r.get("topic") == "crm.public.people"]
    assert sorted(r["offset"] for r in letters) == [1, 4], letters


def test_json_lines_adding_a_key_per_line_stop_at_the_table_bound(lake, tmp_path_factory):
    limits = "\n[cdc_limits]\nmax_table_columns = 50\n"
    lake.config.write_text(lake.config.read_text() + FAMILY + limits)
    work = tmp_path_factory.mktemp("work")
    objects = work / "objects"
    path = objects / "landing/files/shop/events/a.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps({"id": i, f"k{i}": i}) for i in range(200)))
    event = sqs_event(work / "event.json", [("landing", "files/shop/events/a.jsonl")])
    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0 and out["response"]["batchItemFailures"] == [], err[-2000:]
    landed = rows(lake, "bronze/shop/shop/events")
    # `id` plus one key per row: rows 0..48 fit in 50 columns, the rest are dead letters.
    assert sorted(int(r["id"]) for r in landed) == list(range(49))
    letters = rows(lake, "dead_letters")
    assert len(letters) == 151 and all("max_table_columns" in r["error"] for r in letters), letters[:2]


def test_a_record_keyed_by_other_fields_never_rekeys_the_table(lake, tmp_path):
    """Issue 38 (6): the table's keys are fixed at creation (here by the first record key,
    `{"id"}`); a later record keyed `{"country"}` is a dead letter instead of re-keying the table
    (which merged every person of a country into one silver row)."""
    lake.config.write_text(lake.config.read_text() + FAMILY)
    people = [record(i, {"id": i, "country": "NL"}) for i in range(3)]
    invoke_msk(lake, tmp_path / "people.json", people)
    forged = record(3, {"id": 99, "country": "NL"})
    forged["key"] = base64.b64encode(json.dumps({"country": "NL"}).encode()).decode()
    invoke_msk(lake, tmp_path / "forged.json", [forged, record(4, {"id": 4, "country": "NL"})])
    assert sorted(r["id"] for r in rows(lake, "bronze/crm/public/people")) == [0, 1, 2, 4]
    letters = [r for r in rows(lake, "dead_letters") if r.get("topic") == "crm.public.people"]
    assert [r["offset"] for r in letters] == [3] and "the table's keys are [id]" in letters[0]["error"], letters
    lake.cli("refine")
    assert sorted(r["id"] for r in rows(lake, "silver/crm/public/people")) == [0, 1, 2, 4]


def cdc_keys_in_lag(lake, source):
    """`lakestream lag --json`'s keys of the CDC job reading `source`: `[keys, keys_from]`."""
    lag = json.loads(lake.cli("lag", "--json"))
    found = [r["keys"] for r in lag["refine"] if r["source"] == source]
    assert len(found) == 1, lag["refine"]
    return found[0]


def test_lag_says_where_a_tables_keys_came_from(lake, tmp_path):
    """Issue 38 (6): keys fixed by the first record (data) are told apart from declared ones, so
    an operator sees which tables' identity an upstream writer chose: `lakestream lag` names the
    keys and their source (`key-schema`: a wrapped key's schema; `key-payload`: an unwrapped key's
    fields; `config`: declared)."""
    declared = '\n[cdc.keys]\n"public.orders" = ["order_id"]\n'
    lake.config.write_text(lake.config.read_text() + FAMILY.replace('topics = ["crm.public.*"]\n',
                                                                    'topics = ["crm.public.*"]\n' + declared, 1))
    invoke_msk(lake, tmp_path / "people.json", [record(0, {"id": 1, "name": "ann"})])
    order = record(1, {"order_id": 7, "id": 1})
    order["topic"] = "crm.public.orders"
    wrapped = {"schema": {"type": "struct", "fields": [{"field": "id", "type": "int64"}]}, "payload": {"id": 2}}
    shipment = record(2, {"id": 2})
    shipment["topic"] = "crm.public.shipments"
    shipment["key"] = base64.b64encode(json.dumps(wrapped).encode()).decode()
    for rec, name in [(order, "orders"), (shipment, "shipments")]:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"eventSource": "aws:kafka", "records": {f"crm.public.{name}-0": [rec]},
                                    "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/c/x",
                                    "bootstrapServers": "b-1:9098"}))
        out = subprocess.run([BIN, "invoke", "msk", "--event", str(path), "--config", str(lake.config)],
                             capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr[-3000:]
    assert cdc_keys_in_lag(lake, "bronze/crm/public/people") == ["id", "key-payload"]
    assert cdc_keys_in_lag(lake, "bronze/crm/public/orders") == ["order_id", "config"]
    assert cdc_keys_in_lag(lake, "bronze/crm/public/shipments") == ["id", "key-schema"]
    text = lake.cli("lag")
    assert "keys [id] from the records (key-payload)" in text, text
    assert "keys [order_id] declared" in text, text


def test_the_width_bounds_count_the_bronze_table_not_only_the_object(lake, tmp_path_factory):
    """Issue 38 (2): the files bounds counted one chunk's columns, so each new object (or chunk)
    could bring `max_table_columns` more to the same bronze table, and its first row was exempt
    from `max_new_columns`. Now they count the bronze table's columns: a JSON row or a Parquet
    schema adding more than `max_new_columns` to an existing table, or taking it past
    `max_table_columns`, is refused; one within both lands."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    limits = "\n[cdc_limits]\nmax_table_columns = 50\nmax_new_columns = 5\n"
    lake.config.write_text(lake.config.read_text() + FAMILY + limits)
    work = tmp_path_factory.mktemp("work")
    objects = work / "objects"
    folder = objects / "landing/files/shop/events"
    folder.mkdir(parents=True)

    def ingest(name):
        event = sqs_event(work / f"{name}.json", [("landing", f"files/shop/events/{name}")])
        code, out, err = invoke_s3_logs(lake, event, objects)
        assert code == 0 and out["response"]["batchItemFailures"] == [], err[-2000:]

    # A new table: its first row brings 41 columns.
    (folder / "a.jsonl").write_text(json.dumps({"id": 1, **{f"a{i}": i for i in range(40)}}) + "\n")
    ingest("a.jsonl")
    assert len([k for k in rows(lake, "bronze/shop/shop/events")[0] if not k.startswith("__")]) == 41
    # The next object's first row adds 6 (> 5): refused; 3 new: lands.
    (folder / "b.jsonl").write_text("\n".join([
        json.dumps({"id": 2, **{f"b{i}": i for i in range(6)}}),
        json.dumps({"id": 3, **{f"c{i}": i for i in range(3)}})]) + "\n")
    ingest("b.jsonl")
    assert sorted(int(r["id"]) for r in rows(lake, "bronze/shop/shop/events")) == [1, 3]
    letters = rows(lake, "dead_letters")
    assert len(letters) == 1 and "max_new_columns" in letters[0]["error"], letters
    # 44 columns now: a Parquet object with 5 new ones (49) lands; then 5 more (54 > 50) does not.
    for name, prefix in [("d.parquet", "d"), ("e.parquet", "e")]:
        pq.write_table(pa.table({"id": [4], **{f"{prefix}{i}": [i] for i in range(5)}}), folder / name)
        ingest(name)
    assert sorted(int(r["id"]) for r in rows(lake, "bronze/shop/shop/events")) == [1, 3, 4]
    letters = rows(lake, "dead_letters")
    assert len(letters) == 2 and any("max_table_columns" in r["error"] and "e.parquet" in (r.get("object") or r["error"])
                                     for r in letters), letters
    width = len([k for k in rows(lake, "bronze/shop/shop/events")[0] if not k.startswith("__")])
    assert width == 49, width
