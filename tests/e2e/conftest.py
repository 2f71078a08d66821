"""Shared fixtures: the lakestream binary and lakes on the filesystem and on the S3 emulator."""
import os
import pathlib
import subprocess
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
EXAMPLE = (ROOT / "lakestream.toml").read_text()


def _backends():
    b = ["fs"]
    if os.environ.get("LAKESTREAM_TEST_S3_ENDPOINT"):
        b.append("s3")
    elif os.environ.get("LAKESTREAM_REQUIRE_S3") == "1":
        raise RuntimeError("LAKESTREAM_REQUIRE_S3=1 but LAKESTREAM_TEST_S3_ENDPOINT is not set")
    return b


class Lake:
    """A fresh lake plus a config file pointing at it."""

    def __init__(self, backend, tmp):
        self.backend = backend
        if backend == "fs":
            self.root = str(tmp / "lake")
            lake_toml = f'root = "{self.root}"\n'
            self.storage_options = {}
        else:
            endpoint = os.environ["LAKESTREAM_TEST_S3_ENDPOINT"]
            self.root = f"s3://lakestream-test/pytest-{uuid.uuid4().hex[:12]}"
            lake_toml = (
                f'root = "{self.root}"\nendpoint_url = "{endpoint}"\n'
                'region = "us-east-1"\nallow_http = true\n'
            )
            self.storage_options = {
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_ALLOW_HTTP": "true",
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test",
            }
        text = EXAMPLE.replace('[lake]\n# A filesystem path or s3://bucket/prefix. `lakestream demo --lake DIR` overrides it.\nroot = "./lake"\n', "[lake]\n" + lake_toml)
        assert text != EXAMPLE, "example config layout changed; update conftest"
        self.config = tmp / "lakestream.toml"
        self.config.write_text(text)

    def table_uri(self, name):
        return f"{self.root}/{name}"

    def invoke(self, event, function="msk", extra=()):
        out = subprocess.run(
            [os.environ.get("LAKESTREAM_BIN", str(ROOT / "target/debug/lakestream")),
             "invoke", function, "--event", str(EVENTS / event), "--config", str(self.config), *extra],
            capture_output=True, text=True, check=False,
        )
        assert out.returncode == 0, out.stderr
        import json
        return json.loads(out.stdout)


@pytest.fixture(params=_backends())
def lake(request, tmp_path):
    return Lake(request.param, tmp_path)
