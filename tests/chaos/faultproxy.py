"""A fault-injecting HTTP proxy for S3/SQS on loopback, in front of the emulator.

Every request is forwarded as is (method, path, headers, body: the SDKs sign for the proxy's
host and moto does not check signatures). With the configured probabilities, drawn from one
seeded generator, a request instead

- `refuse`: gets 503 SlowDown without being forwarded (the write did not happen);
- `land_then_500`: is forwarded, then answered 500 InternalError (the write happened unseen);
- `delay`: waits `delay_s` (longer than the client's timeout), then is forwarded (a write may
  land after the client gave up and retried).

`ignore_conditions=True` makes the endpoint one that ignores conditional writes: `If-None-Match`
and `If-Match` are dropped before forwarding, so every PUT is a plain overwrite (some
S3-compatible servers behave so; Lakestream must refuse to write there).

`only(method, path)`, when given, limits faults to the requests it accepts (e.g. a "slow
storage" proxy that delays every data-file GET, to hold a compaction between its plan and its
commit). Counters say how many of each were injected. `paused()` turns faults off for set-up
and checks.
"""
import http.client
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate (injected)</Message></Error>")
INTERNAL = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
            b"<Message>We encountered an internal error (injected after the write)</Message></Error>")


class FaultProxy:
    def __init__(self, upstream_port, seed, refuse=0.0, land_then_500=0.0, delay=0.0, delay_s=1.5,
                 only=None, ignore_conditions=False):
        self.only = only
        self.ignore_conditions = ignore_conditions
        self.upstream_port = upstream_port
        self.rates = {"refuse": refuse, "land_then_500": land_then_500, "delay": delay}
        self.delay_s = delay_s
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.enabled = True
        self.counts = {"requests": 0, "refuse": 0, "land_then_500": 0, "delay": 0}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Without this every keep-alive reply stalls ~40 ms (Nagle + delayed ACK).
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _body(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _reply(self, status, headers, body):
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                # A HEAD's answer has no body but the object's length (a warm handle checks its
                # table's identity with one): passed on, not the empty body's 0.
                length = str(len(body))
                if self.command == "HEAD":
                    length = next((v for k, v in headers if k.lower() == "content-length"), length)
                self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _forward(self, body):
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                if proxy.ignore_conditions:
                    headers = {k: v for k, v in headers.items()
                               if k.lower() not in ("if-none-match", "if-match")}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                return resp.status, resp.getheaders(), data

            def _handle(self):
                body = self._body()
                fault = proxy._draw(self.command, self.path)
                try:
                    if fault == "refuse":
                        self._reply(503, [("Content-Type", "application/xml")], SLOW_DOWN)
                        return
                    if fault == "delay":
                        time.sleep(proxy.delay_s)
                    status, headers, data = self._forward(body)
                    if fault == "land_then_500":
                        self._reply(500, [("Content-Type", "application/xml")], INTERNAL)
                        return
                    self._reply(status, headers, data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _draw(self, method, path):
        with self.lock:
            self.counts["requests"] += 1
            if not self.enabled or (self.only and not self.only(method, path)):
                return None
            r = self.rng.random()
            for kind, rate in self.rates.items():
                if r < rate:
                    self.counts[kind] += 1
                    return kind
                r -= rate
            return None

    def paused(self):
        proxy = self

        class Paused:
            def __enter__(self):
                proxy.enabled = False

            def __exit__(self, *exc):
                proxy.enabled = True

        return Paused()

    def faults(self):
        return {k: v for k, v in self.counts.items() if k != "requests"}

    def close(self):
        self.server.shutdown()
        self.server.server_close()
