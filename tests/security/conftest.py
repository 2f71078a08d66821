"""Hostile-input suite (issue 24): crafted log lines, notifications and configs, each test asserting
where data may and may not land. Uses the shared fixtures of tests/conftest.py (the `lake`
fixture on the filesystem and on the S3 emulator, `cli`) and the helpers of lake_support.py
that list everything written in and around a lake; adds the `sandbox` around a lake."""
import pytest


@pytest.fixture
def sandbox(tmp_path):
    """A directory with the lake one level down (`sandbox/lake`), so a test can walk the
    directory around the lake and assert nothing escaped it."""
    (tmp_path / "lake").mkdir()
    return tmp_path
