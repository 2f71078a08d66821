"""Issue 24 follow-up (sec-misc C): `lakestream sql` is a read-only query over the lake's tables.
`COPY ... TO` a local file, `CREATE EXTERNAL TABLE` over a local file, and other DDL/DML or
session statements are refused with a clear error: nothing is written, nothing outside the lake is
read."""
import os
import subprocess

import pytest

from lake_support import BIN

SECRET = "sec-misc-secret-line-7f3a"


def sql(lake, query):
    out = subprocess.run([BIN, "sql", query, "--config", str(lake.config)], capture_output=True, text=True,
                         check=False)
    return out.returncode, out.stdout, out.stderr


def test_copy_to_a_local_file_is_refused(lake, tmp_path):
    lake.invoke("msk-orders.json")
    target = tmp_path / "exfil.csv"
    code, out, err = sql(lake, f"COPY (SELECT * FROM raw_order) TO '{target}' STORED AS CSV")
    assert code != 0, out
    assert "read-only" in err, err
    assert not target.exists() and not list(tmp_path.glob("exfil*"))


@pytest.mark.parametrize("query", [
    "CREATE EXTERNAL TABLE p STORED AS CSV LOCATION '{secret}'",
    "CREATE EXTERNAL TABLE p (line VARCHAR) STORED AS CSV LOCATION '{secret}'",
    "DROP TABLE raw_order",
    "CREATE TABLE t AS SELECT * FROM raw_order",
    "INSERT INTO raw_order SELECT * FROM raw_order",
    "SET datafusion.execution.batch_size = 1",
])
def test_ddl_dml_and_statements_are_refused(lake, tmp_path, query):
    lake.invoke("msk-orders.json")
    secret = tmp_path / "secret.csv"
    secret.write_text(f"line\n{SECRET}\n")
    code, out, err = sql(lake, query.format(secret=secret))
    assert code != 0, out
    assert "read-only" in err, err
    assert SECRET not in out + err


def test_select_still_works(lake):
    lake.invoke("msk-orders.json")
    code, out, err = sql(lake, "SELECT count(*) AS n FROM raw_order")
    assert code == 0, err
