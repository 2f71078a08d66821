"""Crashes: the process aborts at each step of a commit (`--crash-at`, test only) or is
SIGKILLed at a random moment, then the event is redelivered until it succeeds (and once more).
Nothing may be lost or duplicated, and a compaction that dies half-way leaves the data as it was."""
import signal
import subprocess
import time

from chaoslib import BIN, MOTO, ChaosLake, check_orders, msk_event, record, rng, scaled

STEPS = ["after-data-put:1", "after-log-put:1", "after-commit:1", "after-data-put:2", "after-log-put:2"]


def test_crash_at_every_commit_step_then_redelivery(tmp_path):
    lake = ChaosLake(tmp_path, MOTO, "crash")
    sent = set()
    crashes = 0
    for i, step in enumerate(STEPS * scaled(1)):
        offsets = range(i * 20, i * 20 + 20)  # each batch holds a dead letter: two commits
        path = lake.write_event(f"b{i}", msk_event(0, list(offsets)))
        out = lake.run(["invoke", "msk", "--event", str(path)], crash_at=step)
        assert out.returncode != 0 and "crash point" in out.stderr, (step, out.stderr[-2000:])
        crashes += 1
        lake.deliver(["invoke", "msk", "--event", str(path)])
        lake.deliver(["invoke", "msk", "--event", str(path)])
        sent.update((0, o) for o in offsets)
    check_orders(lake, sent)
    # A crashed compaction (its rewritten files landed, or its commit landed unseen), then a rerun.
    batch = len(STEPS) * scaled(1)
    for step in ("after-data-put:1", "after-log-put:1"):
        for _ in range(3):  # small files to compact
            offsets = list(range(batch * 20, batch * 20 + 20))
            lake.deliver(["invoke", "msk", "--event", str(lake.write_event(f"b{batch}", msk_event(0, offsets)))])
            sent.update((0, o) for o in offsets)
            batch += 1
        out = lake.run(["optimize", "raw/order", "--min-files", "2"], crash_at=step)
        assert out.returncode != 0 and "crash point" in out.stderr, (step, out.stdout, out.stderr[-2000:])
        crashes += 1
        lake.deliver(["optimize", "raw/order", "--min-files", "2"])
        check_orders(lake, sent)
    assert "OPTIMIZE" in [h["operation"] for h in lake.table("raw/order").history()]
    figures = check_orders(lake, sent)
    record("crash_points", crash_points=len(STEPS) * scaled(1) + 2, crashes=crashes,
           invocations=lake.invocations, **figures)


def test_random_sigkills_then_redelivery(tmp_path):
    lake = ChaosLake(tmp_path, MOTO, "kill")
    r = rng("kill")
    sent, killed = set(), 0
    for i in range(scaled(12)):
        offsets = list(range(i * 25, i * 25 + 25))
        path = lake.write_event(f"b{i}", msk_event(i % 3, offsets))
        p = subprocess.Popen([BIN, "invoke", "msk", "--event", str(path), "--config", str(lake.config)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(r.uniform(0.0, 1.2))
        p.send_signal(signal.SIGKILL)
        killed += p.wait() == -signal.SIGKILL
        lake.deliver(["invoke", "msk", "--event", str(path)])
        sent.update((i % 3, o) for o in offsets)
    figures = check_orders(lake, sent)
    assert killed > 0, "no invocation was killed mid-way: the delays are too long"
    record("sigkill", invocations=lake.invocations + scaled(12), killed_mid_invocation=killed, **figures)
