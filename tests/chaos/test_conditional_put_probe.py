"""Commits are create-only PUTs (`If-None-Match: *`) of the next log entry: an S3 endpoint that
ignores the condition lets two writers both "create" one version, and the second silently
replaces the first's commit. Before its first write to an S3 lake, a process checks that the
endpoint refuses a second create-only PUT of one probe object (`<lake>/_lakestream/probe/<uuid>`)
and refuses to write at all when it does not. Shown through the fault proxy with conditions
stripped (an endpoint ignoring them) and straight against the emulator (honoured)."""
from chaoslib import BUCKET, MOTO, ChaosLake, msk_event, s3_keys
from faultproxy import FaultProxy


def probe_keys(lake):
    keys, _ = s3_keys(lake, "_lakestream/probe")
    return keys


def test_an_endpoint_that_ignores_if_none_match_is_refused_before_any_commit(tmp_path):
    proxy = FaultProxy(int(MOTO.rsplit(":", 1)[-1]), seed=1, ignore_conditions=True)
    try:
        lake = ChaosLake(tmp_path, proxy.url, name="probe-ignored")
        event = lake.write_event("b0", msk_event(0, range(0, 5)))
        out = lake.run(["invoke", "msk", "--event", str(event)])
        assert out.returncode != 0, out.stdout
        err = out.stderr
        assert "If-None-Match" in err and proxy.url in err, err[-3000:]
        assert "assume_conditional_put" in err, err[-3000:]
        log, _ = s3_keys(lake, "raw/order/_delta_log")
        assert log == [], f"nothing may be committed through that endpoint: {log}"
        letters, _ = s3_keys(lake, "dead_letters/_delta_log")
        assert letters == [], letters
        assert probe_keys(lake) == [], "the probe object is removed"
        # The proxy forwarded PUTs (the probe's), so the refusal comes from the probe.
        assert proxy.counts["requests"] > 0

        # The same lake straight on the emulator (conditions honoured) takes the batch.
        direct = ChaosLake(tmp_path, MOTO, name="probe-honoured", prefix=lake.prefix)
        ok = direct.run(["invoke", "msk", "--event", str(event)])
        assert ok.returncode == 0, ok.stderr[-3000:]
        assert sorted(r["kafka_offset"] for r in direct.rows("raw/order")) == [0, 1, 2, 3, 4]
        assert probe_keys(direct) == []
        assert direct.root.startswith(f"s3://{BUCKET}/")
    finally:
        proxy.close()


def test_the_probe_can_be_skipped_by_config_when_the_operator_vouches_for_the_endpoint(tmp_path):
    proxy = FaultProxy(int(MOTO.rsplit(":", 1)[-1]), seed=1, ignore_conditions=True)
    try:
        lake = ChaosLake(tmp_path, proxy.url, name="probe-skipped")
        text = lake.config.read_text().replace("allow_http = true\n",
                                               "allow_http = true\nassume_conditional_put = true\n", 1)
        lake.config.write_text(text)
        event = lake.write_event("b0", msk_event(0, range(0, 3)))
        out = lake.run(["invoke", "msk", "--event", str(event)])
        assert out.returncode == 0, out.stderr[-3000:]
        assert probe_keys(lake) == [], "no probe was written"
        assert len(lake.rows("raw/order")) == 3
    finally:
        proxy.close()
