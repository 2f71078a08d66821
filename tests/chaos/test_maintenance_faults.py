"""Maintenance through the fault proxy: optimize, checkpoint, manifest and vacuum, each retried
until it succeeds, leave every row exactly once, every referenced file in place, manifests that
list exactly the live files, and no file that vacuum should have deleted: besides the live files
only orphans of failed attempts remain, which no log entry references and which are younger than
vacuum's 1 h floor for untracked files (a writer may be about to commit them)."""
import json
from urllib.parse import unquote
from chaoslib import MOTO, ChaosLake, append, check_orders, manifest_files, record, s3_keys


def test_maintenance_under_faults_never_changes_the_data(tmp_path, faulty):
    direct = ChaosLake(tmp_path, MOTO, "maintfaults")
    sent = set()
    for k in range(12):
        append(direct, k % 2, k, sent)
    before = check_orders(direct, sent)
    lake = ChaosLake(tmp_path, faulty.url, prefix=direct.prefix)  # the same tables, through the proxy
    # No refine job reads raw/order here: one that has not run yet would be kept for, and vacuum
    # would rightly keep the compacted-away files (tests/it/refine_readers.rs).
    text = lake.config.read_text()
    assert "[[refine]]" in text, "the example config's refine jobs moved; update this test"
    lake.config.write_text(text[:text.index("[[refine]]")])
    for job in (["optimize", "--min-files", "2"], ["checkpoint"], ["manifest"],
                ["vacuum", "--retention-hours", "0", "--force"], ["optimize", "--min-files", "2"],
                ["manifest"]):
        lake.deliver([job[0], "raw/order", *job[1:]])
    with faulty.paused():
        after = check_orders(direct, sent)
        table = direct.table("raw/order")
        live = sorted(table.file_uris())
        assert manifest_files(direct, "raw/order") == live
        keys, s3 = s3_keys(direct, "raw/order")
        data = sorted(f"s3://lakestream-test/{k}" for k in keys
                      if k.endswith(".parquet") and "/_delta_log/" not in k)
        root = f"s3://lakestream-test/{direct.prefix}/raw/order/"
        logged = set()  # every file a commit added or removed
        for k in keys:
            if "/_delta_log/" in k and k.endswith(".json"):
                body = s3.get_object(Bucket="lakestream-test", Key=k)["Body"].read().decode()
                for line in body.splitlines():
                    action = json.loads(line)
                    for kind in ("add", "remove"):
                        if kind in action:
                            logged.add(root + unquote(action[kind]["path"]))
        assert set(live) <= set(data), "every live file is in place"
        extra = sorted(set(data) - set(live))
        assert not set(extra) & logged, f"vacuum (window 0) left removed files: {sorted(set(extra) & logged)}"
        ops = [h["operation"] for h in table.history()]
    assert after == before
    assert "OPTIMIZE" in ops and sum(faulty.faults().values()) > 0
    record("maintenance_faults", jobs=6, invocations=lake.invocations, failed_invocations=lake.failed,
           requests=faulty.counts["requests"], **faulty.faults(), files_after=len(live),
           orphans_kept=len(extra), **after)
