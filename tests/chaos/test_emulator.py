"""The emulator must decide conditional PUTs like S3 does: of several concurrent
`If-None-Match: *` PUTs of one key, exactly one succeeds. moto on its own does not (it checks,
then writes), which once lost a whole commit in `test_eight_writers_with_different_data_all_land`
(two writers were both told they created the same log version); `scripts/moto_server.py`, which
`make moto-start` runs, makes the check and the write one step. Shown here on two fresh servers
with thread switching sped up so the race shows within seconds: plain moto lets two writers win,
the launcher never does."""
import socket
import subprocess
import sys
import threading
import time

import boto3
import requests

from chaoslib import ROOT


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(*flags):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts/moto_server.py"), *flags,
                             "--switch-interval", "0.000001", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            requests.get(url, timeout=1)
            break
        except requests.ConnectionError:
            time.sleep(0.1)
    boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
                 aws_secret_access_key="test").create_bucket(Bucket="race")
    return proc, url


def keys_with_two_winners(url, keys, writers=16, stop_at_first=False):
    doubles = 0
    for k in range(keys):
        wins = []

        def put(i, k=k, wins=wins):
            r = requests.put(f"{url}/race/{k:05d}.json", data=b"x" * (300_000 + i),
                             headers={"If-None-Match": "*"}, timeout=30)
            if r.status_code == 200:
                wins.append(i)

        threads = [threading.Thread(target=put, args=(i,)) for i in range(writers)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert wins, "one conditional PUT must succeed"
        doubles += len(wins) > 1
        if doubles and stop_at_first:
            break
    return doubles


def test_conditional_puts_have_one_winner_on_the_suites_emulator():
    plain, plain_url = start("--unpatched")
    fixed, fixed_url = start()
    try:
        assert keys_with_two_winners(fixed_url, keys=60) == 0, "the launcher must make conditional PUTs atomic"
        assert keys_with_two_winners(plain_url, keys=300, stop_at_first=True) > 0, "plain moto no longer races: the launcher may be unneeded"
    finally:
        plain.kill()
        fixed.kill()


def test_the_fault_proxy_passes_a_heads_length():
    """A HEAD's answer has no body but the object's length; the fault proxy answered 0, so a
    warm handle's identity check (a HEAD of its table's first commit) failed through it and the
    fault suite never kept a warm handle."""
    from chaoslib import MOTO_PORT
    from faultproxy import FaultProxy

    proxy = FaultProxy(MOTO_PORT, seed=1)
    try:
        s3 = boto3.client("s3", endpoint_url=proxy.url, region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
        s3.create_bucket(Bucket="head-length")
        s3.put_object(Bucket="head-length", Key="k", Body=b"x" * 1234)
        assert s3.head_object(Bucket="head-length", Key="k")["ContentLength"] == 1234
    finally:
        proxy.close()
