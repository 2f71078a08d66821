"""Maintenance through the CLI, with Python `deltalake` reading the table after every step."""
from deltalake import DeltaTable


def snapshot(lake, name="raw/order"):
    t = DeltaTable(lake.table_uri(name), storage_options=lake.storage_options or None)
    rows = sorted((r["kafka_partition"], r["kafka_offset"], r["order_value"]) for r in t.to_pyarrow_table().to_pylist())
    return t, rows


def test_optimize_vacuum_manifest_keep_the_table_readable(lake):
    import subprocess, os
    from conftest import ROOT
    bin_ = os.environ.get("LAKESTREAM_BIN", str(ROOT / "target/debug/lakestream"))

    def cli(*args):
        out = subprocess.run([bin_, *args, "--config", str(lake.config)], capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr
        return out.stdout

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
    old = DeltaTable(lake.table_uri("raw/order"), version=2, storage_options=lake.storage_options or None)
    assert len(old.file_uris()) == 3  # time travel still sees the small files

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
    assert "checkpoint Some(5)" in out, out  # versions 3: OPTIMIZE, 4-5: VACUUM START/END
    assert snapshot(lake)[1] == before
