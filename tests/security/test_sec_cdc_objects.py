"""Issue 38 (1, 3): CDC landing objects are untrusted. Any principal that can put an object under
a DMS / files family's `location` controls its bytes; a Parquet object whose footer declares two
billion row groups (parquet-rs reserved 206 GB: the process aborted) or a schema nested 200,000
levels deep (a stack overflow) took down the whole SQS batch, access logs included. Now every
object is checked against `[cdc_limits]` before it is decoded: an object outside a bound is one
dead letter with the reason, its own message is acknowledged, and every other object of the
batch lands. Text records longer than the line bound are dead-lettered alone."""
import io
import struct

import pyarrow as pa
import pyarrow.parquet as pq

from secnames import invoke_s3_logs, log_line, raw, rows, sqs_event

FAMILY = """
[[cdc]]
family = "shop"
source = "files"
location = "s3://landing/files/"
"""
T_I32, T_I64, T_BINARY, T_LIST, T_STRUCT = 5, 6, 8, 9, 12


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zz(v):
    return varint((v << 1) ^ (v >> 63))


def element(children, leaf=False):
    """A thrift SchemaElement: an INT32 leaf, or a group of `children`."""
    # A leaf: type (1) INT32, repetition (3) REQUIRED, name (4); a group: name (4), children (5).
    out = (bytes([0x10 | T_I32]) + zz(1) + bytes([0x20 | T_I32]) + zz(0)) if leaf else b""
    out += bytes([(0x10 if leaf else 0x40) | T_BINARY]) + varint(1) + b"c"
    if children:
        out += bytes([0x10 | T_I32]) + zz(children)
    return out + b"\0"


def parquet(schema, row_groups):
    """A Parquet object: magic, no pages, a FileMetaData with `schema` (encoded elements) and a
    row-group list header declaring `row_groups` (none present)."""
    meta = bytes([0x10 | T_I32]) + zz(1)
    meta += bytes([0x10 | T_LIST, 0xF0 | T_STRUCT]) + varint(len(schema)) + b"".join(schema)
    meta += bytes([0x10 | T_I64]) + zz(0)
    meta += bytes([0x10 | T_LIST, 0xF0 | T_STRUCT]) + varint(row_groups) + b"\0"
    return b"PAR1" + meta + struct.pack("<I", len(meta)) + b"PAR1"


def good_parquet(n):
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(1, n + 1)), "tier": ["gold"] * n}), buf)
    return buf.getvalue()


def put(objects, key, data):
    p = objects / key
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def setup(lake, tmp_path_factory, limits=""):
    lake.config.write_text(lake.config.read_text() + FAMILY + limits)
    work = tmp_path_factory.mktemp("work")
    return work, work / "objects"


def outcomes_and_letters(lake, out):
    outcomes = {uri: o["outcome"] for uri, o in out["report"]["objects"]["objects"]}
    letters = rows(lake, "dead_letters")
    return outcomes, letters


def test_a_hostile_parquet_object_is_one_dead_letter_and_the_batch_lands(lake, tmp_path_factory):
    work, objects = setup(lake, tmp_path_factory)
    # The audit's objects: a footer declaring 2^31-1 row groups in a few bytes, and a schema
    # 200,000 levels deep (1.2 MB).
    put(objects, "landing/files/shop/orders/rowgroups.parquet", parquet([element(1), element(0, leaf=True)], 2**31 - 1))
    deep = [element(1) for _ in range(200_000)] + [element(0, leaf=True)]
    put(objects, "landing/files/shop/orders/deep.parquet", parquet(deep, 0))
    put(objects, "landing/files/shop/orders/good.parquet", good_parquet(3))
    put(objects, "raw-logs/ok.log", (log_line("observed-bucket", 1) + "\n").encode())
    keys = [("landing", "files/shop/orders/rowgroups.parquet"), ("landing", "files/shop/orders/deep.parquet"),
            ("landing", "files/shop/orders/good.parquet"), ("raw-logs", "ok.log")]
    event = sqs_event(work / "event.json", keys)

    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0, err[-2000:]
    assert out["response"]["batchItemFailures"] == [], out["response"]
    outcomes, letters = outcomes_and_letters(lake, out)
    assert outcomes["s3://landing/files/shop/orders/good.parquet"] == "committed", outcomes
    assert outcomes["s3://raw-logs/ok.log"] == "committed", outcomes
    assert sorted(r["id"] for r in rows(lake, "bronze/shop/shop/orders")) == [1, 2, 3]
    assert len(rows(lake, "access_logs/observed-bucket")) == 1
    by_object = {}
    for letter in letters:
        by_object.setdefault(letter["object_uri"], []).append(letter["error"])
    for key, why in [("rowgroups", "list of 2147483647 items"), ("deep", "max_nesting")]:
        uri = f"s3://landing/files/shop/orders/{key}.parquet"
        assert outcomes[uri] == "refused", outcomes
        assert len(by_object[uri]) == 1 and why in by_object[uri][0] and "cdc_limits" in by_object[uri][0], by_object
    assert len(letters) == 2, letters
    # Counted in the metric the dead-letter alarm watches (`LinesDeadLettered`).
    assert out["report"]["objects"]["lines_dead_lettered"] == 2, out["report"]["objects"]

    # Delivered again (at least once): nothing more lands and no second letter is written.
    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0 and out["response"]["batchItemFailures"] == [], err[-2000:]
    assert len(rows(lake, "bronze/shop/shop/orders")) == 3
    assert len(rows(lake, "dead_letters")) == 2


def test_sizes_past_the_configured_bounds_are_refused_per_object(lake, tmp_path_factory):
    limits = ("\n[cdc_limits]\nmax_page_mib = 1\nmax_row_group_mib = 4\nmax_object_mib = 8\nmax_line_kib = 64\n"
              "max_decoded_mib = 2\n")
    work, objects = setup(lake, tmp_path_factory, limits)
    # One 3 MB value: a single 3 MB page (zstd: a few KB stored) past the 1 MiB page bound.
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1], "note": ["x" * 3_000_000]}), buf, compression="zstd", use_dictionary=False)
    put(objects, "landing/files/shop/notes/page.parquet", buf.getvalue())
    # Six 0.9 MB values, a page each: 5.4 MB in one row group, past the 4 MiB row-group bound.
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(6)), "note": ["y" * 900_000] * 6}), buf, compression="zstd",
                   use_dictionary=False, data_page_size=1000)
    put(objects, "landing/files/shop/notes/rowgroup.parquet", buf.getvalue())
    # Three columns with a 0.9 MB page each: every page and the row group within their bounds,
    # but 2.7 MB decompressed at once, past `max_decoded_mib = 2`.
    buf = io.BytesIO()
    pq.write_table(pa.table({c: ["w" * 900_000] for c in "abc"}), buf, compression="zstd", use_dictionary=False)
    put(objects, "landing/files/shop/notes/live.parquet", buf.getvalue())
    # A 9 MB CSV: past the object bound, refused unread.
    put(objects, "landing/files/shop/notes/big.csv", b"id,note\n" + b"1,z\n" * (9 << 18))
    # JSON lines with one 200 KB line between good ones: that line alone is a dead letter.
    secret = "alice.secret@example.com"
    lines = ['{"id": 10, "note": "a"}', '{"id": 11, "note": "' + secret + "q" * 200_000 + '"}', '{"id": 12, "note": "b"}']
    put(objects, "landing/files/shop/notes/lines.jsonl", "\n".join(lines).encode())
    keys = [("landing", f"files/shop/notes/{k}") for k in ["page.parquet", "rowgroup.parquet", "live.parquet", "big.csv", "lines.jsonl"]]
    code, out, err = invoke_s3_logs(lake, sqs_event(work / "event.json", keys), objects)
    assert code == 0, err[-2000:]
    assert out["response"]["batchItemFailures"] == [], out["response"]
    outcomes, letters = outcomes_and_letters(lake, out)
    by_object = {}
    for letter in letters:
        by_object.setdefault(letter["object_uri"], []).append(letter)
    for name, why in [("page.parquet", "max_page_mib"), ("rowgroup.parquet", "max_row_group_mib"),
                      ("live.parquet", "max_decoded_mib"), ("big.csv", "max_object_mib")]:
        uri = f"s3://landing/files/shop/notes/{name}"
        assert outcomes[uri] == "refused", outcomes
        assert [why in letter["error"] for letter in by_object[uri]] == [True], by_object[uri]
    uri = "s3://landing/files/shop/notes/lines.jsonl"
    assert outcomes[uri] == "committed", outcomes
    assert sorted(r["id"] for r in rows(lake, "bronze/shop/shop/notes")) == ["10", "12"]  # undeclared: text
    [long_line] = by_object[uri]
    assert "max_line_kib" in long_line["error"] and long_line["line_number"] == 2, long_line
    kept = raw(long_line)
    assert len(kept) == 64 * 1024 and kept.startswith(lines[1][:64].encode()), len(kept)
    assert secret not in err


def test_dictionary_text_is_expanded_within_the_decoded_bound(lake, tmp_path_factory):
    """A dictionary page holding one 1 MB value that every row references: 30 MB decoded from a
    file of a few KB. It lands whole, in chunks of at most `max_decoded_mib` expanded (two rows
    here), never as one 30 MB batch."""
    from deltalake import DeltaTable

    work, objects = setup(lake, tmp_path_factory, "\n[cdc_limits]\nmax_decoded_mib = 2\n")
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(30)), "note": ["x" * 1_000_000] * 30}), buf, compression="zstd")
    assert len(buf.getvalue()) < 20_000
    put(objects, "landing/files/shop/blobs/dict.parquet", buf.getvalue())
    event = sqs_event(work / "event.json", [("landing", "files/shop/blobs/dict.parquet")])
    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0 and out["response"]["batchItemFailures"] == [], err[-2000:]
    landed = rows(lake, "bronze/shop/shop/blobs")
    assert sorted(r["id"] for r in landed) == list(range(30))
    assert all(r["note"] == "x" * 1_000_000 for r in landed)
    table = DeltaTable(lake.table_uri("bronze/shop/shop/blobs"), storage_options=lake.storage_options)
    # One commit per chunk: 15 chunks of two rows (versions 0..14 at least).
    assert table.version() >= 14, f"version {table.version()}: the 30 MB were not split"


def test_a_type_clash_with_bronze_never_logs_the_value(lake, tmp_path_factory):
    """Issue 38 (3): a plain CSV file whose column clashes with bronze's type (an e-mail address
    where bronze has int64) is refused; the value reaches the dead letter (with its bytes), never
    stderr (CloudWatch): arrow's `Cannot cast string '<value>'` is scrubbed."""
    work, objects = setup(lake, tmp_path_factory)
    secret = "alice.secret@example.com"
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1], "contact": [42]}), buf)
    put(objects, "landing/files/shop/people/a.parquet", buf.getvalue())
    put(objects, "landing/files/shop/people/b.csv", f"id,contact\n2,{secret}\n".encode())
    for name in ["a.parquet", "b.csv"]:
        event = sqs_event(work / f"{name}.json", [("landing", f"files/shop/people/{name}")])
        code, out, err = invoke_s3_logs(lake, event, objects)
        assert code == 0 and out["response"]["batchItemFailures"] == [], err[-2000:]
        assert secret not in err, f"the value reached the logs:\n{err[-2000:]}"
    outcomes, letters = outcomes_and_letters(lake, out)
    assert outcomes["s3://landing/files/shop/people/b.csv"] == "refused", outcomes
    assert [r["contact"] for r in rows(lake, "bronze/shop/shop/people")] == [42]
    assert len(letters) == 1 and "Int64" in letters[0]["error"], letters


def test_a_nested_field_name_cannot_write_ddl(lake, tmp_path_factory):
    """Issue 38 (8): a Parquet object whose nested field name closes the column and adds a
    LOCATION lands in bronze (its data is data), but `lakestream ddl --manifest` (and the Glue
    column type, built by the same function) refuses the name instead of writing it into DDL."""
    work, objects = setup(lake, tmp_path_factory)
    evil = "x:int>) LOCATION 's3://attacker-bucket/x/' --"
    nested = pa.array([{evil: 1}], type=pa.struct([(evil, pa.int64())]))
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1], "payload": nested}), buf)
    put(objects, "landing/files/shop/nested/a.parquet", buf.getvalue())
    event = sqs_event(work / "event.json", [("landing", "files/shop/nested/a.parquet")])
    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0 and out["response"]["batchItemFailures"] == [], err[-2000:]
    assert [r["id"] for r in rows(lake, "bronze/shop/shop/nested")] == [1]
    proc = lake.run("ddl", "bronze/shop/shop/nested", "--manifest")
    assert proc.returncode != 0, proc.stdout
    assert "attacker-bucket" not in proc.stdout
    assert "cannot be written into Athena / Glue DDL" in proc.stderr, proc.stderr


def test_a_message_naming_many_missing_objects_costs_one_dead_letter_commit(lake, tmp_path_factory):
    """Issue 38 (11): one forged message naming 40 missing CDC objects made 40 dead-letter
    commits; now the letters of whole objects are one commit per invocation (40 letters)."""
    from deltalake import DeltaTable

    work, objects = setup(lake, tmp_path_factory)
    (objects / "landing").mkdir(parents=True)
    keys = [("landing", f"files/shop/orders/missing-{i}.parquet") for i in range(40)]
    # One of them notified twice in the same batch (at-least-once delivery): still one letter.
    event = sqs_event(work / "event.json", keys + keys[:1])
    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0 and out["response"]["batchItemFailures"] == [], err[-2000:]
    outcomes, letters = outcomes_and_letters(lake, out)
    assert set(outcomes.values()) == {"missing"}, outcomes
    assert len(letters) == 40
    table = DeltaTable(lake.table_uri("dead_letters"), storage_options=lake.storage_options)
    assert table.version() == 0, f"{table.version() + 1} commits for 40 letters"
