"""Maintenance through the fault proxy: optimize, checkpoint, manifest and vacuum, each retried
until it succeeds, leave every row exactly once, every referenced file in place, manifests that
list exactly the live files, and no file that vacuum should have deleted."""
from chaoslib import MOTO, ChaosLake, append, check_orders, manifest_files, record, s3_keys


def test_maintenance_under_faults_never_changes_the_data(tmp_path, faulty):
    direct = ChaosLake(tmp_path, MOTO, "maintfaults")
    sent = set()
    for k in range(12):
        append(direct, k % 2, k, sent)
    before = check_orders(direct, sent)
    lake = ChaosLake(tmp_path, faulty.url, prefix=direct.prefix)  # the same tables, through the proxy
    for job in (["optimize", "--min-files", "2"], ["checkpoint"], ["manifest"],
                ["vacuum", "--retention-hours", "0", "--force"], ["optimize", "--min-files", "2"],
                ["manifest"]):
        lake.deliver([job[0], "raw/order", *job[1:]])
    with faulty.paused():
        after = check_orders(direct, sent)
        table = direct.table("raw/order")
        live = sorted(table.file_uris())
        assert manifest_files(direct, "raw/order") == live
        keys, _ = s3_keys(direct, "raw/order")
        data = sorted(f"s3://lakestream-test/{k}" for k in keys
                      if k.endswith(".parquet") and "/_delta_log/" not in k)
        assert data == live, "vacuum (window 0) leaves exactly the live files"
        ops = [h["operation"] for h in table.history()]
    assert after == before
    assert "OPTIMIZE" in ops and sum(faulty.faults().values()) > 0
    record("maintenance_faults", jobs=6, invocations=lake.invocations, failed_invocations=lake.failed,
           requests=faulty.counts["requests"], **faulty.faults(), files_after=len(live), **after)
