"""Issue 24 follow-up (sec-misc D): the CLI's `--objects` directory stands in for the raw-logs
bucket; a symlink inside it (`raw-logs/logs -> /`, or to a directory next to the lake) must not
let a notified key (`logs/etc/passwd`, `logs/creds`) read a file outside the directory. The object
is refused (dead-lettered without its content); nothing of the file lands in any table."""
import os
import uuid

from lake_support import delta_tables_under
from secnames import invoke_s3_logs, log_line, rows, sqs_event
from test_sec_names_foreign import every_value

SOURCE = "raw-logs"


def test_symlinks_in_the_objects_directory_do_not_leave_it(lake, sandbox, tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    secret = f"SECRET-{uuid.uuid4().hex}"
    outside = work / "outside"
    outside.mkdir()
    # A valid log line with the secret in it: read through the link it would land in a table.
    (outside / "creds").write_text(log_line("stolen-bucket", 1).replace(" k1 ", f" {secret} ") + "\n"
                                   f"password = {secret}\n")
    objects = work / "objects"
    (objects / SOURCE).mkdir(parents=True)
    os.symlink(outside, objects / SOURCE / "logs")  # a directory link
    os.symlink("/", objects / SOURCE / "root")  # the whole file system
    os.symlink(outside / "creds", objects / SOURCE / "file.log")  # a file link
    (objects / SOURCE / "ok.log").write_text(log_line("observed-bucket", 2) + "\n")
    event = sqs_event(work / "event.json", [(SOURCE, "logs/creds"), (SOURCE, "root/etc/passwd"),
                                            (SOURCE, "file.log"), (SOURCE, "ok.log")])

    code, out, err = invoke_s3_logs(lake, event, objects)
    assert code == 0, err
    assert out["response"]["batchItemFailures"] == [], out

    tables, text = every_value(lake, sandbox if lake.backend == "fs" else None)
    assert "access_logs/observed-bucket" in tables, tables  # the plain object was read
    assert "access_logs/stolen-bucket" not in tables, tables
    assert secret not in text and "root:x:0:0" not in text, "a file outside the objects directory was read"
    assert secret not in err and "root:x:0:0" not in err
    outcomes = dict(out["report"]["objects"]["objects"])
    assert outcomes[f"s3://{SOURCE}/ok.log"]["outcome"] == "committed", outcomes
    letters = {r["object_uri"]: r["error"] for r in rows(lake, "dead_letters")}
    for k in ["logs/creds", "root/etc/passwd", "file.log"]:
        assert outcomes[f"s3://{SOURCE}/{k}"]["outcome"] == "refused", outcomes
        assert "outside the objects directory" in letters[f"s3://{SOURCE}/{k}"], letters
