"""Fixtures of the Python suites (tests/e2e, tests/security): a fresh `lake` on each backend, the
`cli` that runs the lakestream binary, and `read_table` (Python `deltalake` -> pyarrow). The
helpers behind them are in lake_support.py; this file is the one place both suites get them
from, so `pytest tests/e2e tests/security` collects in one run."""
import pytest

import lake_support


@pytest.fixture(params=lake_support.backends())
def lake(request, tmp_path):
    """A fresh lake on the filesystem, and on the S3 emulator when the run has one."""
    return lake_support.Lake(request.param, tmp_path)


@pytest.fixture
def cli():
    """`cli(*args, config=None, cwd=None, env=None)` runs `lakestream` and returns its stdout,
    raising `lake_support.CliError` (with stderr) when it fails; `cli.fails(...)` expects a
    failure and returns stderr; `cli.run(...)` returns the finished process."""

    class Cli:
        __call__ = staticmethod(lake_support.cli)
        fails = staticmethod(lake_support.cli_fails)
        run = staticmethod(lake_support.run_cli)

    return Cli()


@pytest.fixture
def read_table():
    """`read_table(lake, name, version=None)`: the table as Python `deltalake` reads it (pyarrow)."""
    return lambda lake, name, version=None: lake.read(name, version)
