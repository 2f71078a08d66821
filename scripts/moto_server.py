"""moto's server with S3's conditional writes made atomic, for the test suites.

moto checks `If-None-Match: *` / `If-Match` on PutObject (and CompleteMultipartUpload) and then
writes, as two steps: two concurrent PUTs of one key can both pass the check and both answer
200, the second overwriting the first. Real S3 decides conditional writes atomically (one gets
412), and our commit protocol relies on exactly that (put-if-absent of `_delta_log/<v>.json`),
so with eight racing writers the emulator now and then lost a whole commit (seen in
`tests/chaos` as "7 records lost": two writers were both told they created the same version).
Holding one lock around object writes gives the emulator S3's semantics; nothing else changes.

Usage: python scripts/moto_server.py -H 127.0.0.1 -p PORT   (same arguments as `moto_server`)
Test-only flags (tests/chaos/test_emulator.py): `--switch-interval S` makes threads switch far
more often so the race shows in seconds; `--unpatched` leaves moto as it is, to show the race.
"""

import sys
import threading

from moto.s3.responses import S3Response
from moto.server import main

_WRITES = threading.Lock()


def _atomic(method):
    def locked(self, *args, **kwargs):
        with _WRITES:
            return method(self, *args, **kwargs)

    locked.__name__ = method.__name__
    return locked


def _flag(name, with_value=False):
    if name not in sys.argv:
        return None
    i = sys.argv.index(name)
    value = sys.argv[i + 1] if with_value else True
    del sys.argv[i : i + (2 if with_value else 1)]
    return value


if __name__ == "__main__":
    if (interval := _flag("--switch-interval", with_value=True)) is not None:
        sys.setswitchinterval(float(interval))
    if not _flag("--unpatched"):
        # PutObject (the If-None-Match / If-Match check and the write) and POST on a key
        # (CompleteMultipartUpload's If-None-Match check and the write).
        S3Response.put_object = _atomic(S3Response.put_object)
        S3Response._key_response_post = _atomic(S3Response._key_response_post)
    main()
