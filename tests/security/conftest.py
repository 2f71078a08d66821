"""Hostile-input suite (issue 24): crafted log lines, notifications and configs, each test asserting
where data may and may not land. Reuses the e2e fixtures (the `lake` fixture on the filesystem and
on the S3 emulator, the `lakestream` binary) and adds helpers that list everything written in and
around a lake."""
import importlib.util
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("e2e_fixtures", ROOT / "tests" / "e2e" / "conftest.py")
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)
Lake = _e2e.Lake
lake = _e2e.lake  # noqa: F811 - re-exported fixture
EVENTS = _e2e.EVENTS
EXAMPLE = _e2e.EXAMPLE
BIN = os.environ.get("LAKESTREAM_BIN", str(ROOT / "target/debug/lakestream"))


def files_under(directory):
    """Every file below `directory`, as paths relative to it (sorted)."""
    directory = pathlib.Path(directory)
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def delta_tables_under(directory):
    """Every Delta table below `directory` (a folder holding `_delta_log`), relative, sorted."""
    directory = pathlib.Path(directory)
    return sorted(str(p.parent.relative_to(directory)) or "." for p in directory.rglob("_delta_log"))


@pytest.fixture
def sandbox(tmp_path):
    """A directory with the lake one level down (`sandbox/lake`), so a test can walk the
    directory around the lake and assert nothing escaped it."""
    (tmp_path / "lake").mkdir()
    return tmp_path
