"""MSK ingestion through the fault proxy: concurrent writers (one per Kafka partition, as Lambda
runs them), >= 10% of S3 requests refused, answered 500 after landing, or delayed past the client
timeout; every failed invocation is redelivered until it succeeds, and some successful batches
are delivered again. Then every record is compared with what was sent."""
import threading

from chaoslib import ChaosLake, check_orders, msk_event, record, rng, scaled

PARTITIONS = 6
BATCH = 40


def test_msk_writers_under_faults_commit_every_record_once(tmp_path, faulty):
    lake = ChaosLake(tmp_path, faulty.url, "msk")
    batches = scaled(4)
    sent = set()
    redelivered = [0]
    errors = []

    def writer(p):
        r = rng(f"msk/{p}")
        done = []
        try:
            for b in range(batches):
                offsets = list(range(b * BATCH, (b + 1) * BATCH))
                path = lake.write_event(f"p{p}-b{b}", msk_event(p, offsets))
                lake.deliver(["invoke", "msk", "--event", str(path)])
                done.append(path)
                sent.update((p, o) for o in offsets)
                if r.random() < 0.3:  # an extra delivery of a batch that already succeeded
                    lake.deliver(["invoke", "msk", "--event", str(r.choice(done))])
                    redelivered[0] += 1
        except Exception as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(p,)) for p in range(PARTITIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    with faulty.paused():
        figures = check_orders(lake, sent)
    assert sum(faulty.faults().values()) > 0
    record("msk_faults", writers=PARTITIONS, invocations=lake.invocations, failed_invocations=lake.failed,
           extra_redeliveries=redelivered[0], requests=faulty.counts["requests"], **faulty.faults(), **figures)
