"""Maintenance through the CLI, with Python `deltalake` reading the table after every step."""

from lake_support import checkpointed_version


def snapshot(lake, name="raw/order"):
    t = lake.delta(name)
    rows = sorted((r["kafka_partition"], r["kafka_offset"], r["order_value"]) for r in t.to_pyarrow_table().to_pylist())
    return t, rows


def test_optimize_vacuum_manifest_keep_the_table_readable(lake):
    cli = lake.cli

    for ev in ["msk-orders.json", "msk-replay.json", "msk-self-managed.json"]:
        lake.invoke(ev)
    t, before = snapshot(lake)
    files_before = len(t.file_uris())
    assert len(before) == 10 and files_before == 3

    out = cli("optimize", "raw/order", "--min-files", "2")
    assert "3 -> 1 files" in out, out
    t, after = snapshot(lake)
    assert after == before and len(t.file_uris()) == 1
    assert t.history(1)[0]["operation"] == "OPTIMIZE"
    old = lake.delta("raw/order", version=2)
    assert len(old.file_uris()) == 3  # time travel still sees the small files

    # The curated and gold jobs have not run: they read raw/order from version 0, so the
    # compacted-away files are kept for them; once they have read past the compaction they can go.
    out = cli("vacuum", "raw/order", "--dry-run", "--retention-hours", "0", "--force")
    assert "kept 3 removed file(s) that refine jobs (curated, gold) still need (versions from 0)" in out, out
    assert "0 files" in out, out
    lake.invoke("msk-members.json")
    cli("refine")
    out = cli("vacuum", "raw/order", "--dry-run", "--retention-hours", "0", "--force")
    assert "3 files" in out and "dry run" in out, out
    assert snapshot(lake)[1] == before
    out = cli("vacuum", "raw/order", "--retention-hours", "0", "--force")
    assert "3 files" in out, out
    t, rows = snapshot(lake)
    assert rows == before

    out = cli("manifest", "raw/order")
    assert "1 written" in out, out
    out = cli("manifest", "raw/order")
    assert "0 written" in out and "1 unchanged" in out, out
    out = cli("checkpoint", "raw/order")
    # versions 3: OPTIMIZE, 4-5: VACUUM START/END; the checkpoint is written at the latest one.
    assert checkpointed_version(out) == 5 == snapshot(lake)[0].version(), out
    assert snapshot(lake)[1] == before


def test_the_cli_and_the_function_maintain_the_same_tables(tmp_path):
    """One table list (issue 24 defect 5): `lakestream validate` prints it, `lakestream optimize
    --all` and the maintenance function (`lakestream invoke maintenance`, the handler the Lambda
    runs) run on it, and it holds the refine outputs and the single-layout access-log table."""
    import base64, json, shutil, time
    import lake_support
    from lake_support import EXAMPLE, ROOT
    text = EXAMPLE.replace('root = "./lake"', f'root = "{tmp_path / "lake"}"')
    text = text.replace('layout = "per_bucket"', 'layout = "single"')
    assert 'layout = "single"' in text and str(tmp_path) in text
    config = tmp_path / "lakestream.toml"
    config.write_text(text)

    def cli(*args):
        return lake_support.cli(*args, config=config)

    # Orders joined with a membership a minute older; access logs; both refine jobs.
    t = time.time() - 1800
    iso = lambda s: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s))
    rec = lambda topic, off, v: {"topic": topic, "partition": 0, "offset": off, "timestamp": 0,
                                 "timestampType": "CREATE_TIME", "headers": [],
                                 "value": base64.b64encode(json.dumps(v).encode()).decode()}
    event = {"eventSource": "aws:kafka", "eventSourceArn": "arn:aws:kafka:us-east-1:1:cluster/x/y",
             "bootstrapServers": "b-1:9098", "records": {
                 "members-0": [rec("members", 0, {"order_owner": "alice", "membership": "gold", "timestamp": iso(t)})],
                 "orders-0": [rec("orders", 0, {"order_id": 1, "order_owner": "alice", "order_value": 5,
                                                "timestamp": iso(t + 60)})]}}
    (tmp_path / "msk.json").write_text(json.dumps(event))
    cli("invoke", "msk", "--event", str(tmp_path / "msk.json"))
    logs = tmp_path / "objects" / "raw-logs" / "logs"
    logs.mkdir(parents=True)
    fixtures = ROOT / "tests" / "fixtures" / "access-logs"
    shutil.copy(fixtures / "2026-11-29-08-00-00-A1B2C3D4E5F6.log", logs / "2026-11-29-08-00-00-A1B2C3D4E5F6")
    cli("invoke", "s3-logs", "--event", str(ROOT / "events" / "sqs-s3-notifications.json"),
        "--objects", str(tmp_path / "objects"))
    cli("refine")

    listed = cli("validate")
    expected = {"raw/order", "raw/member", "dead_letters", "access_logs", "curated/order", "processed/order",
                "gold/order_hourly"}
    for name in expected:
        assert f"\n  {name} " in listed, listed

    by_cli = {line.split(":")[0] for line in cli("optimize", "--all", "--dry-run", "--min-files", "2").splitlines()
              if line and not line.startswith(" ")}
    event = tmp_path / "optimize.json"
    event.write_text(json.dumps({"job": "optimize", "dry_run": True, "min_files": 2}))
    by_function = {r["table"] for r in json.loads(cli("invoke", "maintenance", "--event", str(event)).splitlines()[-1])}
    assert by_cli == by_function == expected, (by_cli, by_function)

    # The function's checkpoint step reaches the tables it skipped before.
    lake = tmp_path / "lake"
    derived = ["curated/order", "processed/order", "access_logs"]
    for name in derived:
        assert (lake / name / "_delta_log").is_dir(), name
        assert not (lake / name / "_delta_log" / "_last_checkpoint").exists(), name
    event.write_text(json.dumps({"job": "checkpoint"}))
    results = json.loads(cli("invoke", "maintenance", "--event", str(event)).splitlines()[-1])
    assert all("Ok" in r["outcome"] for r in results), results
    for name in derived:
        assert (lake / name / "_delta_log" / "_last_checkpoint").is_file(), name
