"""Concurrency on one table, everything counted: many writers with different data, the same
batch from several writers at once, and vacuum/manifest/checkpoint while writers run. (The two
compaction races, two compactions with appends and a compaction racing a delete by another
engine, are staged deterministically on the commit hook: crates/lakestream-core/tests/it/
compaction_races.rs.)"""
import time

from chaoslib import (MOTO, ChaosLake, append, check_orders, manifest_files, msk_event, record,
                      run_all, scaled)


def test_eight_writers_with_different_data_all_land(tmp_path):
    lake = ChaosLake(tmp_path, MOTO, "writers")
    writers, commits = 8, scaled(10)
    sent = set()
    append(lake, 8, 0, sent)  # the table exists; the race is on appends (partitions 0-7)
    start = time.monotonic()
    run_all([lambda w=w: [append(lake, w, k, sent) for k in range(commits)] for w in range(writers)])
    elapsed = time.monotonic() - start
    figures = check_orders(lake, sent)
    versions = sorted(h["version"] for h in lake.table("raw/order").history())
    assert versions == list(range(writers * commits + 1)), "every commit is exactly one version, no gaps"
    record("eight_writers", writers=writers, commits=writers * commits, invocations=lake.invocations,
           failed_invocations=lake.failed, seconds=round(elapsed, 1),
           commits_per_s=round(writers * commits / elapsed, 1), **figures)


def test_same_batch_from_three_writers_at_once(tmp_path):
    lake = ChaosLake(tmp_path, MOTO, "same")
    sent = set()
    for k, label in ((0, "new table"), (1, "existing table")):
        offsets = list(range(k * 100, k * 100 + 30))  # with dead letters: two tables race
        path = lake.write_event(f"k{k}", msk_event(0, offsets))
        run_all([lambda: lake.deliver(["invoke", "msk", "--event", str(path)])] * 3)
        sent.update((0, o) for o in offsets)
        check_orders(lake, sent)
        assert lake.table("raw/order").version() == k, f"{label}: one commit, not three"
    record("same_batch_x3", invocations=lake.invocations, **check_orders(lake, sent))


def test_maintenance_while_writers_run(tmp_path):
    lake = ChaosLake(tmp_path, MOTO, "maint")
    sent = set()
    append(lake, 4, 0, sent)  # the table exists (writers use partitions 0-3)
    done = []
    runs = {"optimize": 0, "vacuum": 0, "manifest": 0, "checkpoint": 0}

    def writers():
        run_all([lambda p=p: [append(lake, p, k, sent) for k in range(scaled(8))] for p in range(4)])
        done.append(True)

    def maintenance():
        while not done:
            for job, args in (("optimize", ["--min-files", "2"]), ("manifest", []), ("vacuum", []),
                              ("checkpoint", [])):
                lake.deliver([job, "raw/order", *args])
                runs[job] += 1

    run_all([writers, maintenance])
    lake.deliver(["manifest", "raw/order"])
    figures = check_orders(lake, sent)
    live = sorted(lake.table("raw/order").file_uris())
    assert manifest_files(lake, "raw/order") == live, "the manifests list exactly the live files"
    record("maintenance_with_writers", **runs, invocations=lake.invocations, **figures)
