"""Fixtures of the fault suite: the fault proxy in front of the emulator, and the figures
report printed at the end of the run (also saved to target/chaos-figures.json)."""
import json
import time

import pytest

from chaoslib import FIGURES, MOTO, MOTO_PORT, ROOT, SCALE, SEED
from faultproxy import FaultProxy

if not MOTO:
    raise RuntimeError("the fault suite needs the S3 emulator: run it with `make test` (LAKESTREAM_TEST_S3_ENDPOINT)")


@pytest.fixture
def faulty():
    """A proxy injecting each kind of fault into >= 10% of requests."""
    p = FaultProxy(MOTO_PORT, seed=SEED, refuse=0.1, land_then_500=0.1, delay=0.1, delay_s=0.8)
    yield p
    p.close()


@pytest.fixture(autouse=True)
def _timed(request):
    start = time.monotonic()
    yield
    FIGURES.setdefault(request.node.name, {})["seconds"] = round(time.monotonic() - start, 1)


def pytest_sessionfinish(session):
    """Under pytest-xdist (`make test-py`), a worker hands its figures to the controller."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["chaos_figures"] = json.dumps(FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller gathers every worker's figures (an xdist hook)."""
    FIGURES.update(json.loads(getattr(node, "workeroutput", {}).get("chaos_figures", "{}")))


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    terminalreporter.section(f"fault suite figures (seed {SEED}, scale {SCALE})")
    for name, figs in FIGURES.items():
        terminalreporter.write_line(f"{name}: " + ", ".join(f"{k}={v}" for k, v in figs.items()))
    out = ROOT / "target" / "chaos-figures.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"seed": SEED, "scale": SCALE, "scenarios": FIGURES}, indent=2))
