"""Warm-invocation loop of one msk-ingest binary against a filesystem lake (release-profile
comparisons): `python scripts/warm_loop.py target/release/msk-ingest` after one `make bench-compare`
(it reuses its cached orders and Runtime API stand-in). Prints the median of 99 warm 1,000-record
invocations."""
import os, pathlib, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_compare as bc
binary = sys.argv[1]
work = pathlib.Path(tempfile.mkdtemp())
config = work / "lakestream.toml"
config.write_text((bc.ROOT / "lakestream.toml").read_text().replace('root = "./lake"', f'root = "{work}/lake"'))
data = bc.OUT / "cache" / "orders-100000"
values = (data / "values.ndjson").read_bytes().splitlines()
meta = [tuple(map(int, l.split(","))) for l in (data / "meta.csv").read_text().splitlines()[1:]]
records = [(v, p, o) for v, (p, o) in zip(values, meta)]
api = bc.RuntimeApi()
class F(bc.Function):
    def __init__(self, path, api, config, log):
        env = {**os.environ, "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{api.port}", "AWS_LAMBDA_FUNCTION_NAME": "x",
               "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
               "AWS_LAMBDA_LOG_STREAM_NAME": "b", "AWS_LAMBDA_LOG_GROUP_NAME": "/x", "LAKESTREAM_CONFIG": str(config),
               "AWS_REGION": "us-east-1"}
        self.log = log; self.started = time.perf_counter()
        self.proc = subprocess.Popen(["taskset", "-c", "0", path], env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
fn = F(binary, api, config, work / "log")
walls = []
for i in range(100):
    t0 = time.perf_counter()
    _, status, body = api.invoke(bc.msk_event(records[i*1000:(i+1)*1000]))
    assert status == "response", body[:300]
    walls.append(time.perf_counter() - t0)
fn.stop()
w = sorted(walls[1:])
print(f"warm 1,000-record invocation, fs lake: median {1000*statistics.median(w):.2f} ms, p10 {1000*w[len(w)//10]:.2f} ms")
