"""Issue 24 follow-up (sec-misc A): a folder under the per-bucket access-log prefix whose name the
lake refuses as a table path (`access_logs/a+b`, left by the pre-fix name attack or by another
engine) is skipped and reported, not a failure of the whole listing: `lakestream optimize --all`
and the maintenance function (`lakestream invoke maintenance`) still maintain every other table,
and name the skipped folder. On the filesystem and on the emulator."""
import json
import shutil
import subprocess

from lake_support import BIN, ROOT
from secnames import S3_BUCKET, lake_prefix, s3_client

FIXTURES = ROOT / "tests" / "fixtures" / "access-logs"
LOG0 = "_delta_log/00000000000000000000.json"


def cli(lake, *args):
    out = subprocess.run([BIN, *args, "--config", str(lake.config)], capture_output=True, text=True, check=False)
    return out.returncode, out.stdout, out.stderr


def plant_bad_folder(lake, name):
    """Copy a real access-log table's first commit to `access_logs/<name>/_delta_log/`."""
    if lake.backend == "fs":
        dst = ROOT / lake.root / "access_logs" / name / LOG0
        dst.parent.mkdir(parents=True)
        shutil.copy(f"{lake.root}/access_logs/datalake-prod/{LOG0}", dst)
    else:
        s3 = s3_client()
        prefix = lake_prefix(lake)
        s3.copy_object(Bucket=S3_BUCKET, Key=f"{prefix}/access_logs/{name}/{LOG0}",
                       CopySource={"Bucket": S3_BUCKET, "Key": f"{prefix}/access_logs/datalake-prod/{LOG0}"})


def test_a_badly_named_access_log_folder_is_skipped_not_fatal(lake, tmp_path):
    logs = tmp_path / "objects" / "raw-logs" / "logs"
    logs.mkdir(parents=True)
    shutil.copy(FIXTURES / "2026-11-29-08-00-00-A1B2C3D4E5F6.log", logs / "2026-11-29-08-00-00-A1B2C3D4E5F6")
    lake.invoke("sqs-s3-notifications.json", "s3-logs", ["--objects", str(tmp_path / "objects")])
    for ev in ["msk-orders.json", "msk-replay.json"]:
        lake.invoke(ev)
    plant_bad_folder(lake, "a+b")

    code, out, err = cli(lake, "optimize", "--all", "--min-files", "2")
    assert code == 0, err
    assert "raw/order: 2 -> 1 files" in out, out
    assert "access_logs/datalake-prod:" in out, out
    assert "access_logs/a+b: skipped" in out + err, (out, err)

    event = tmp_path / "checkpoint.json"
    event.write_text(json.dumps({"job": "checkpoint"}))
    code, out, err = cli(lake, "invoke", "maintenance", "--event", str(event))
    assert code == 0, err
    results = json.loads(out.splitlines()[-1])
    by_table = {r["table"]: r["outcome"] for r in results}
    assert "Ok" in by_table["raw/order"] and "Ok" in by_table["access_logs/datalake-prod"], results
    skipped = by_table["access_logs/a+b"]
    assert "skipped" in skipped["Ok"] and "table path" in skipped["Ok"]["skipped"], skipped
    assert "a+b" in err, err  # the warning names the folder

    # The other inspection commands list around it too.
    for args in (["lag"], ["report", "access", "--since", "3650"]):
        code, out, err = cli(lake, *args)
        assert code == 0, (args, err)
