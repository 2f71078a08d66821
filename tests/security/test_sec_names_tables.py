"""Issue 24 defect 1: a log line's `bucket` field names a table. Hostile bucket fields (`..`,
percent-encoded dots, `/`, `?`, `#`, `\\`, over-long names) must never make a table anywhere but
`access_logs/<valid bucket>`: such lines are dead-lettered with their raw bytes and the reason,
every line is accounted for, and a name too long for the storage fails only its object. Runs the
real binary (`lakestream invoke s3-logs`) on a filesystem lake inside a sandbox directory (the
whole sandbox is walked) and on the S3 emulator (the whole bucket is listed before and after)."""
from lake_support import delta_tables_under, files_under
from secnames import (bucket_keys, directories_under, invoke_s3_logs, lake_prefix, log_line, put_objects,
                      raw, rows, sqs_event)

HOSTILE = ["../escape", "%2e%2e", "a/b", "../../outside", "victim?x", "victim#x", "a\\b",
           "..", ".", "victim/../victim", "Victim", "x" * 300, "192.168.1.1", "victim..x", "-victim"]
VALID = ["victim", "good-bucket"]
SOURCE = "raw-logs"


def hostile_object():
    """Lines: valid `victim`, every hostile bucket field, valid `good-bucket` (in that order)."""
    buckets = [VALID[0], *HOSTILE, VALID[1]]
    return buckets, "\n".join(log_line(b, n) for n, b in enumerate(buckets, start=1)) + "\n"


def allowed_s3_keys(lake, tables):
    prefix = lake_prefix(lake)
    return tuple(f"{prefix}/{t}/" for t in tables) + (f"{prefix}/_lakestream/probe/",)


def test_hostile_bucket_fields_make_no_table_outside_access_logs(lake, sandbox, tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    buckets, text = hostile_object()
    objects = put_objects(work / "objects", {(SOURCE, "logs/hostile.log"): text})
    event = sqs_event(work / "event.json", [(SOURCE, "logs/hostile.log")])
    before = bucket_keys() if lake.backend == "s3" else None

    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0, err
    assert out["response"]["batchItemFailures"] == []
    report = out["report"]["objects"]
    # Every line accounted for: 2 written, every hostile one dead-lettered.
    assert report["rows_written"] == len(VALID)
    assert report["lines_dead_lettered"] == len(HOSTILE)

    tables = ["access_logs/good-bucket", "access_logs/victim", "dead_letters"]
    if lake.backend == "fs":
        # Nothing anywhere in the sandbox but the lake's three tables and the config.
        assert delta_tables_under(sandbox) == [f"lake/{t}" for t in tables]
        outside = [f for f in files_under(sandbox) if not f.startswith("lake/")]
        assert outside == ["lakestream.toml"]
        dirs = [d for d in directories_under(sandbox)
                if not any(d == f"lake/{t}" or d.startswith(f"lake/{t}/") for t in tables)]
        assert dirs == ["lake", "lake/access_logs"], dirs
    else:
        new = bucket_keys() - before
        assert new, "nothing was written"
        stray = sorted(k for k in new if not k.startswith(allowed_s3_keys(lake, tables)))
        assert stray == []

    # `victim?x` and `victim#x` never reach `victim`'s table: it holds line 1 only.
    victim = rows(lake, "access_logs/victim")
    assert [(r["bucket"], r["log_line"]) for r in victim] == [("victim", 1)]
    good = rows(lake, "access_logs/good-bucket")
    assert [(r["bucket"], r["log_line"]) for r in good] == [("good-bucket", len(buckets))]

    letters = sorted(rows(lake, "dead_letters"), key=lambda r: r["line_number"])
    assert [r["line_number"] for r in letters] == list(range(2, 2 + len(HOSTILE)))
    lines = text.splitlines()
    for letter in letters:
        n = letter["line_number"]
        assert letter["object_uri"] == f"s3://{SOURCE}/logs/hostile.log"
        assert raw(letter) == lines[n - 1].encode(), "the raw line is kept"
        assert "bucket name" in letter["error"] and "not a valid S3 bucket name" in letter["error"], letter["error"]

    # Redelivery adds nothing.
    code, again, err = invoke_s3_logs(lake, event, objects)
    assert code == 0, err
    assert again["response"]["batchItemFailures"] == []
    assert len(rows(lake, "dead_letters")) == len(HOSTILE)
    assert len(rows(lake, "access_logs/victim")) == 1


def path_limit(lake, sandbox):
    """(bytes of the per-bucket tables' location before the bucket segment, the storage's limit).
    The lake refuses a table whose location plus 160 bytes (room for its log, partition
    directories and data files) exceeds 4,095 bytes on a file system or 1,024 on S3."""
    if lake.backend == "fs":
        return len(str(sandbox / "lake").encode()) + 1, 4095
    return len(lake_prefix(lake)) + 1, 1024


def test_a_table_name_too_long_for_the_storage_fails_only_its_object(lake, sandbox, tmp_path_factory):
    """A 63-character bucket (the longest valid name) under a long `table_prefix`: its object is
    dead-lettered (the table is refused for good), and the other object of the batch lands."""
    base, limit = path_limit(lake, sandbox)
    # The prefix (segments of at most 200 bytes) makes `abc`'s table fit and the 63-byte one not.
    want = limit - 160 - 30 - base  # location of `<prefix>/abc` + 160 <= limit < `<prefix>/<63>` + 160
    segments = []
    while want > 0:
        n = min(200, want - 1 if want > 1 else 1)
        segments.append("p" * n)
        want -= n + 1
    prefix = "/".join(segments)
    long_bucket = "b" * 63
    assert base + len(prefix) + 1 + 3 + 160 <= limit < base + len(prefix) + 1 + 63 + 160
    lake.config.write_text(lake.config.read_text().replace(
        'table_prefix = "access_logs"', f'table_prefix = "{prefix}"'))

    work = tmp_path_factory.mktemp("work")
    objects = put_objects(work / "objects", {
        (SOURCE, "logs/short.log"): log_line("abc", 1) + "\n" + log_line("abc", 2) + "\n",
        (SOURCE, "logs/long.log"): log_line(long_bucket, 1) + "\n",
    })
    event = sqs_event(work / "event.json", [(SOURCE, "logs/short.log"), (SOURCE, "logs/long.log")])
    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0, err
    # Both messages are done: the short object landed, the long one is a dead letter (not retried).
    assert out["response"]["batchItemFailures"] == []
    outcomes = dict(out["report"]["objects"]["objects"])
    assert outcomes[f"s3://{SOURCE}/logs/short.log"]["outcome"] == "committed"
    assert outcomes[f"s3://{SOURCE}/logs/long.log"] == {"outcome": "committed", "rows": 0, "dead_lettered": 1}
    assert len(rows(lake, f"{prefix}/abc")) == 2
    letters = rows(lake, "dead_letters")
    assert len(letters) == 1
    assert letters[0]["object_uri"] == f"s3://{SOURCE}/logs/long.log"
    assert letters[0]["target_table"] == f"{prefix}/{long_bucket}"
    assert "too long" in letters[0]["error"], letters[0]["error"]
    if lake.backend == "fs":
        assert delta_tables_under(sandbox) == ["lake/dead_letters", f"lake/{prefix}/abc"]
