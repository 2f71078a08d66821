"""CDC families under the fault proxy: the random Debezium streams of tests/cdc_reference.py
(SCD1 and SCD2, late and re-sent changes, redelivered batches) ingested and applied with >= 10%
of S3 requests refused, answered 500 after landing, or delayed past the client timeout; some
apply runs also abort at a commit step (`--crash-at`) or are SIGKILLed mid-way. Every failed
invocation is redelivered until it succeeds; after every apply run silver equals the plain
reference row by row and its change feed replays onto the previous reference."""
import signal
import subprocess
import time

from cdc_reference import STREAMS_CONF, Checker, random_schedule, two_families
from chaoslib import BIN, ChaosLake, record, rng, scaled

CRASH_STEPS = ["after-data-put:1", "after-log-put:1", "after-commit:1", "after-log-put:2"]


def test_cdc_apply_under_faults_crashes_and_kills_matches_the_reference(tmp_path, faulty):
    lake = ChaosLake(tmp_path, faulty.url, "cdc")
    lake.config.write_text(lake.config.read_text() + STREAMS_CONF)
    r = rng("cdc-faults")
    families = two_families(r, changes=scaled(16), tables=1)
    checker = Checker(lake.table)  # reads the emulator directly, not through the proxy
    crashed, killed = [0], [0]

    def refine():
        """Every third apply aborts at a commit step, every third is SIGKILLed mid-way; then
        it is redelivered until it succeeds."""
        n = checker.checks // 2
        if n % 3 == 0:
            with faulty.paused():  # so that it reaches its crash point
                out = lake.run(["refine"], crash_at=CRASH_STEPS[n // 3 % len(CRASH_STEPS)])
            crashed[0] += "crash point" in out.stderr
        elif n % 3 == 1:
            proc = subprocess.Popen([BIN, "refine", "--config", str(lake.config)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(r.uniform(0.05, 0.5))
            proc.send_signal(signal.SIGKILL)
            killed[0] += proc.wait() == -signal.SIGKILL
        lake.deliver(["refine"])

    def deliver(path, _new, _letters):
        lake.deliver(["invoke", "msk", "--event", str(path)])

    rounds = random_schedule(r, families, tmp_path, checker, deliver=deliver,
                             refine=refine,
                             optimize=lambda: lake.deliver(["optimize", "--all", "--min-files", "2"]))
    for _, _, streams in families:
        for s in streams:
            rows = lake.rows(f"bronze/{s.prefix}/{s.schema}/{s.table}")
            assert sorted(x["__offset"] for x in rows) == s.bronze_offsets(), s.topic
    assert sum(faulty.faults().values()) > 0
    assert checker.checks >= 6 and crashed[0] and killed[0], (checker.checks, crashed, killed)
    record("cdc_faults", rounds=rounds, checks=checker.checks, invocations=lake.invocations,
           failed_invocations=lake.failed, crashed_applies=crashed[0], killed_applies=killed[0],
           requests=faulty.counts["requests"], **faulty.faults())
