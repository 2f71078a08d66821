"""Concurrency on one table, everything counted: many writers with different data, the same
batch from several writers at once, compactions with appends, a compaction racing a delete by
another engine (Python deltalake), and vacuum/manifest/checkpoint while writers run."""
import time

from faultproxy import FaultProxy

from chaoslib import (MOTO, MOTO_PORT, PATIENT_CLIENT, SEED, ChaosLake, append, check_orders,
                      manifest_files, msk_event, order, record, run_all, scaled)


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


def slow_storage():
    """A proxy that delays every data-file GET (not the log): a compaction through it plans at
    normal speed, then stays between its plan and its commit for seconds while it reads its
    files, so the race with another commit happens on every run."""
    return FaultProxy(MOTO_PORT, seed=SEED, delay=1.0, delay_s=4.0,
                      only=lambda method, path: method == "GET" and ".parquet" in path
                      and "_delta_log" not in path)


OPTIMIZE = ["optimize", "raw/order", "--min-files", "2"]


def test_two_compactions_while_appends_run(tmp_path):
    """A slow compaction plans, a fast one compacts the same files and commits, appends keep
    landing; the slow one must drop its bins (their files are gone), not commit duplicates."""
    lake = ChaosLake(tmp_path, MOTO, "compact")
    sent = set()
    run_all([lambda p=p: [append(lake, p, k, sent) for k in range(8)] for p in range(4)])
    slow = slow_storage()
    slow_lake = ChaosLake(tmp_path, slow.url, prefix=lake.prefix, client=PATIENT_CLIENT)
    out = {}

    def fast_later():
        time.sleep(1.5)
        lake.deliver(OPTIMIZE)

    try:
        run_all([lambda: out.update(slow=slow_lake.deliver(OPTIMIZE).stdout), fast_later]
                + [lambda p=p: [append(lake, p, k, sent) for k in range(8, 14)] for p in range(4)])
    finally:
        slow.close()
    figures = check_orders(lake, sent)
    assert "skipped (concurrent change)" in out["slow"], f"the race did not happen: {out['slow']}"
    ops = [h["operation"] for h in lake.table("raw/order").history()]
    assert ops.count("OPTIMIZE") == 1, ops
    record("two_compactions_with_appends", compactions=ops.count("OPTIMIZE"), invocations=lake.invocations,
           slow_reads=slow.counts["delay"], **figures)


def test_compaction_racing_a_delete(tmp_path):
    """Python deltalake deletes rows while a (slow) lakestream compaction of the same files is
    between its plan and its commit: deleted rows stay deleted (the compaction must not
    resurrect them) and every other row stays exactly once."""
    lake = ChaosLake(tmp_path, MOTO, "remove")
    slow = slow_storage()
    slow_lake = ChaosLake(tmp_path, slow.url, prefix=lake.prefix, client=PATIENT_CLIENT)
    sent, deleted = set(), set()
    delete_retries = [0]
    try:
        for rnd in range(scaled(2)):
            run_all([lambda p=p: [append(lake, p, rnd * 10 + k, sent) for k in range(6)] for p in range(3)])
            cutoff = 1500 * (rnd % 5 + 1)  # up to 7,500 of 10,000: every round keeps rows
            out = {}

            def delete():
                time.sleep(1.5)  # the compaction has planned and is reading its files
                for _ in range(20):
                    try:
                        lake.table("raw/order").delete(f"order_value < {cutoff}")
                        return
                    except Exception:  # noqa: BLE001 - a commit conflict: try again, as a user would
                        delete_retries[0] += 1
                        time.sleep(0.1)
                raise AssertionError("the delete never committed")

            run_all([lambda: out.update(slow=slow_lake.deliver(OPTIMIZE).stdout), delete])
            deleted |= {k for k in sent if order(*k)["order_value"] < cutoff}
            got = [(x["kafka_partition"], x["kafka_offset"]) for x in lake.rows("raw/order")]
            assert len(got) == len(set(got)), f"{len(got) - len(set(got))} duplicate rows"
            assert not set(got) & deleted, f"{len(set(got) & deleted)} deleted rows came back"
            assert set(got) == sent - deleted, f"{len(sent - deleted - set(got))} rows lost"
            assert "skipped (concurrent change)" in out["slow"], f"the race did not happen: {out['slow']}"
    finally:
        slow.close()
    ops = [h["operation"] for h in lake.table("raw/order").history()]
    record("compaction_vs_delete", rows_sent=len(sent), rows_deleted=len(deleted), rows_read_back=len(got),
           deletes=ops.count("DELETE"), delete_retries=delete_retries[0], duplicates=0)


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
