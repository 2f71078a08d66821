"""Warm Lambda containers for the chaos suite (and the security suite's log-privacy test): the real function binaries (`msk-ingest`,
`maintenance`, `refine`, built by `cargo build --workspace --bins`) started once and fed one
event after another through a local stand-in of the Lambda Runtime API, as Lambda keeps a
container between invocations (its table handles, log-read and `txn` caches stay warm).

The CLI has no warm mode (`lakestream invoke` handles one event per process); these are the
binaries Lambda runs. There are no crash points here (`--crash-at` is a CLI flag)."""
import itertools
import json
import os
import pathlib
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RuntimeApi:
    """`/2018-06-01/runtime/invocation/next` hands out queued events; responses and errors are
    recorded per request id."""

    def __init__(self):
        self.events, self.done = [], {}
        self.cv = threading.Condition()
        self.seq = itertools.count(1)
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *a):
                pass

            def reply(self, code, body=b"", headers=()):
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                with api.cv:
                    api.cv.wait_for(lambda: api.events)
                    rid, body = api.events.pop(0)
                try:
                    self.reply(200, body, [
                        ("Lambda-Runtime-Aws-Request-Id", rid),
                        ("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 900_000)),
                        ("Lambda-Runtime-Invoked-Function-Arn",
                         "arn:aws:lambda:us-east-1:123456789012:function:chaos"),
                        ("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000"),
                        ("Content-Type", "application/json")])
                except OSError:  # the process went away: hand the event to the next one
                    with api.cv:
                        api.events.insert(0, (rid, body))
                        api.cv.notify_all()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.strip("/").split("/")
                rid = parts[3] if len(parts) > 4 else "init"
                with api.cv:
                    api.done[rid] = (parts[-1], body)
                    api.cv.notify_all()
                self.reply(202)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def invoke(self, event, timeout):
        """Queue one event and wait for its outcome: ("response" | "error", parsed body)."""
        rid = f"req-{next(self.seq)}"
        with self.cv:
            self.events.append((rid, json.dumps(event).encode()))
            self.cv.notify_all()
            if not self.cv.wait_for(lambda: rid in self.done or "init" in self.done, timeout):
                raise TimeoutError(f"no answer to {event} within {timeout} s")
            if rid not in self.done:
                raise AssertionError(f"the function failed to start: {self.done['init'][1][:2000]}")
            kind, body = self.done.pop(rid)
        return kind, json.loads(body or b"null")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class WarmFunction:
    """One long-lived function process (one container) and its Runtime API."""

    def __init__(self, binary, config, endpoint, log, base_env=None):
        """`base_env` (default: this process's environment) is what the function inherits
        before the Lambda variables are added."""
        self.api = RuntimeApi()
        self.invocations = 0
        self.errors = 0
        self.lock = threading.Lock()  # one invocation at a time, as one container
        env = {**(os.environ if base_env is None else base_env), "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{self.api.port}",
               "AWS_LAMBDA_FUNCTION_NAME": pathlib.Path(binary).name,
               "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
               "AWS_LAMBDA_LOG_STREAM_NAME": "chaos", "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/chaos",
               "LAKESTREAM_CONFIG": str(config), "AWS_ACCESS_KEY_ID": "test",
               "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}
        if endpoint:
            env["AWS_ENDPOINT_URL"] = endpoint
        self.log = open(log, "ab")
        self.proc = subprocess.Popen([str(binary)], env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def invoke(self, event, timeout=300):
        with self.lock:
            assert self.proc.poll() is None, f"the warm function exited ({self.proc.returncode})"
            kind, body = self.api.invoke(event, timeout)
            self.invocations += 1
            self.errors += kind != "response"
            return kind, body

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.api.close()
        self.log.close()
