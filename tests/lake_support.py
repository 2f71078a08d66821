"""What the Python suites share (tests/e2e, tests/security): the lakestream binary (looked up in
one place: `LAKESTREAM_BIN`, else the debug build), the example config, lakes on the filesystem
and on the S3 emulator, running the CLI against a lake, reading a table back with Python
`deltalake`. A plain module (not a conftest) so a test imports it by a name no other suite
uses; the fixtures that wrap it live in tests/conftest.py."""
import json
import os
import re
import pathlib
import subprocess
import threading
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"
EXAMPLE = (ROOT / "lakestream.toml").read_text()
BIN = os.environ.get("LAKESTREAM_BIN", str(ROOT / "target/debug/lakestream"))
EXAMPLE_LAKE = ('[lake]\n# A filesystem path or s3://bucket/prefix. `lakestream demo --lake DIR` overrides it.\n'
                'root = "./lake"\n')


def backends():
    """The filesystem always; the S3 emulator when `LAKESTREAM_TEST_S3_ENDPOINT` is set (its
    absence fails the run under `LAKESTREAM_REQUIRE_S3=1`)."""
    b = ["fs"]
    if os.environ.get("LAKESTREAM_TEST_S3_ENDPOINT"):
        b.append("s3")
    elif os.environ.get("LAKESTREAM_REQUIRE_S3") == "1":
        raise RuntimeError("LAKESTREAM_REQUIRE_S3=1 but LAKESTREAM_TEST_S3_ENDPOINT is not set")
    return b


class CliError(AssertionError):
    """`lakestream` exited non-zero; the message holds the command, exit code and stderr."""

    def __init__(self, args, out):
        super().__init__(f"lakestream {' '.join(map(str, args))} exited {out.returncode}:\n{out.stderr}")
        self.returncode = out.returncode
        self.stdout = out.stdout
        self.stderr = out.stderr


def run_cli(*args, config=None, cwd=None, env=None):
    """Run `lakestream ARGS [--config CONFIG]`; the finished process, whatever its exit code."""
    cmd = [BIN, *map(str, args)] + (["--config", str(config)] if config is not None else [])
    return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd, env=env)


def cli(*args, config=None, cwd=None, env=None):
    """Run `lakestream ARGS [--config CONFIG]`; its stdout, or `CliError` with its stderr."""
    out = run_cli(*args, config=config, cwd=cwd, env=env)
    if out.returncode != 0:
        raise CliError(args, out)
    return out.stdout


def cli_fails(*args, config=None, cwd=None, env=None):
    """Run `lakestream ARGS` expecting it to fail; its stderr (an `AssertionError` if it passed)."""
    out = run_cli(*args, config=config, cwd=cwd, env=env)
    assert out.returncode != 0, f"lakestream {' '.join(map(str, args))} should have failed:\n{out.stdout}"
    return out.stderr


def checkpointed_version(out):
    """The version `lakestream checkpoint` says it checkpointed, from its output line (`None`
    when it wrote none): the meaning, not the wording (`Some(5)`, `version 5`)."""
    m = re.search(r"checkpoint[^,\n]*?(\d+)", out)
    return int(m.group(1)) if m else None


S3_BUCKET = "lakestream-test"


def s3_storage(endpoint):
    """Python `deltalake`'s storage options for the S3 emulator at `endpoint`."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}


def with_lake(example, lake_toml):
    """`example` (a config text holding the example's `[lake]` section) with its `[lake]`
    replaced by `lake_toml`."""
    text = example.replace(EXAMPLE_LAKE, "[lake]\n" + lake_toml)
    assert text != example, "the example config's [lake] section changed; update EXAMPLE_LAKE in tests/lake_support.py"
    return text


class LakeBase:
    """What every suite's lake shares: a root (a directory, or `s3://lakestream-test/<prefix>`),
    the `[lake]` table that points lakestream at it (through `endpoint` on S3: the emulator, or a
    fault proxy in front of it), and Python `deltalake` reading its tables (directly from the
    emulator at `reader_endpoint`, default `endpoint`). Subclasses write the config around
    `lake_toml` and add how their suite runs lakestream."""

    def __init__(self, root, endpoint=None, reader_endpoint=None, client=""):
        self.root = root
        self.endpoint = endpoint
        if endpoint is None:
            self.lake_toml = f'root = "{root}"\n'
            self.storage_options = {}
        else:
            self.lake_toml = (f'root = "{root}"\nendpoint_url = "{endpoint}"\nregion = "us-east-1"\n'
                              f"allow_http = true\n{client}")
            self.storage_options = s3_storage(reader_endpoint or endpoint)

    @property
    def prefix(self):
        """The key prefix of an S3 lake in the test bucket (`None` on the filesystem)."""
        head = f"s3://{S3_BUCKET}/"
        return self.root[len(head):] if self.root.startswith(head) else None

    def table_uri(self, name):
        return f"{self.root}/{name}"

    def delta(self, name, version=None):
        """Table `name` opened by Python `deltalake` (an independent reader)."""
        from deltalake import DeltaTable

        return DeltaTable(self.table_uri(name), version=version, storage_options=self.storage_options or None)

    def read(self, name, version=None):
        """Table `name` read by Python `deltalake`, as a pyarrow table."""
        return self.delta(name, version).to_pyarrow_table()


class Lake(LakeBase):
    """A fresh lake (a temp dir, or a fresh prefix of the test bucket on the emulator) plus the
    example config pointing at it."""

    def __init__(self, backend, tmp):
        self.backend = backend
        if backend == "fs":
            super().__init__(str(tmp / "lake"))
        else:
            super().__init__(f"s3://{S3_BUCKET}/pytest-{uuid.uuid4().hex[:12]}",
                             os.environ["LAKESTREAM_TEST_S3_ENDPOINT"])
        self.config = tmp / "lakestream.toml"
        self.config.write_text(with_lake(EXAMPLE, self.lake_toml))

    def cli(self, *args, env=None):
        """`lakestream ARGS --config <this lake's config>`: stdout, or `CliError`."""
        return cli(*args, config=self.config, env=env)

    def run(self, *args, env=None):
        """`lakestream ARGS --config <this lake's config>`: the finished process."""
        return run_cli(*args, config=self.config, env=env)

    def invoke(self, event, function="msk", extra=()):
        """`lakestream invoke FUNCTION --event events/EVENT`: the function's JSON output."""
        return json.loads(self.cli("invoke", function, "--event", EVENTS / event, *extra))


def files_under(directory):
    """Every file below `directory`, as paths relative to it (sorted)."""
    directory = pathlib.Path(directory)
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def delta_tables_under(directory):
    """Every Delta table below `directory` (a folder holding `_delta_log`), relative, sorted."""
    directory = pathlib.Path(directory)
    return sorted(str(p.parent.relative_to(directory)) or "." for p in directory.rglob("_delta_log"))


def run_all(fns):
    """Run callables at once on threads; re-raise the first error."""
    errors = []

    def wrap(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(fn,)) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def gold_difference(gold_rows, source, sql, groups, measures):
    """How a gold table (its rows as dicts) differs from `sql`, a GROUP BY run by DuckDB over
    `source` (a pyarrow table, named `src` in the query): `None` when every group and measure
    matches (floats to 1e-9 relative; NaN equals NaN, an infinity only itself), else a short
    description."""
    import duckdb
    import math

    def by_group(rows):
        out = {}
        for r in rows:
            key = tuple(str(r[g]) for g in groups)
            if key in out:
                raise AssertionError(f"group {key} twice")
            out[key] = tuple(r[m] for m in measures)
        return out

    def same(a, b):
        if a is None or b is None:
            return a is b
        if isinstance(a, float) or isinstance(b, float):
            a, b = float(a), float(b)
            if math.isnan(a) or math.isnan(b):  # SUM over a NaN (or both infinities) is NaN
                return math.isnan(a) and math.isnan(b)
            if math.isinf(a) or math.isinf(b):
                return a == b
            return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
        return a == b

    con = duckdb.connect()
    # Copied into DuckDB, not scanned: a filter pushed down into the Arrow scan compares NaN the
    # IEEE way (`NaN > -2` false), DuckDB's own engine as SQL does (NaN above every number).
    con.register("arrow_src", source)
    con.execute("CREATE TABLE src AS SELECT * FROM arrow_src")
    want = by_group(con.sql(sql).to_arrow_table().to_pylist())
    got = by_group(gold_rows)
    if got.keys() != want.keys():
        return (f"groups missing {sorted(want.keys() - got.keys())[:10]}, "
                f"extra {sorted(got.keys() - want.keys())[:10]}")
    bad = [(k, got[k], w) for k, w in want.items() if not all(same(x, y) for x, y in zip(got[k], w))]
    if bad:
        return f"{len(bad)} group(s) differ, e.g. {bad[:3]} (gold, GROUP BY)"
    return None
