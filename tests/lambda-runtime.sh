#!/usr/bin/env bash
# Local Lambda runtime check: the real Runtime API path, on the packaged bootstraps. Starts the
# Runtime API of `cargo lambda watch --only-lambda-apis` on 127.0.0.1 (it compiles nothing), starts
# each function's bootstrap as built by `make package-check` (the same `cargo lambda build` that
# packages them, so the functions are compiled once, not again by `watch`) with the Lambda
# environment, invokes each with `cargo lambda invoke --data-file events/...`, and checks the
# responses and the tables afterwards. The lake is a temporary directory; s3-log-ingest reads the
# log objects from the S3 emulator (moto, started by `make moto-start`).
# Usage: tests/lambda-runtime.sh   (needs .venv with cargo-lambda, the bootstraps under
#        LAMBDA_DIR (default target/lambda-check) and target/debug/lakestream; MOTO_PORT, default
#        5055; LAMBDA_PORT, default 9455). `make lambda-check` builds both and runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
export PATH="$PWD/$VENV/bin:$PATH"
PORT="${LAMBDA_PORT:-9455}"
MOTO="http://127.0.0.1:${MOTO_PORT:-5055}"
LAMBDA_DIR="${LAMBDA_DIR:-target/lambda-check}"
FUNCTIONS="msk-ingest s3-log-ingest maintenance refine"
for f in $FUNCTIONS; do
  [ -x "$LAMBDA_DIR/$f/bootstrap" ] || { echo "lambda-runtime: no $LAMBDA_DIR/$f/bootstrap (run make package-check)"; exit 1; }
done
[ -x target/debug/lakestream ] || { echo "lambda-runtime: no target/debug/lakestream (cargo build --workspace --bins --features lakestream-cli/sql)"; exit 1; }
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

sed "s#^root = \"./lake\"#root = \"$work/lake\"#" lakestream.toml > "$work/lakestream.toml"
cat > "$work/env" <<ENV
LAKESTREAM_CONFIG=$work/lakestream.toml
AWS_ENDPOINT_URL=$MOTO
AWS_ACCESS_KEY_ID=test
AWS_SECRET_ACCESS_KEY=test
AWS_REGION=us-east-1
ENV

# Log objects the sample SQS event names, in the emulator's raw-logs bucket.
"$VENV/bin/python" - "$MOTO" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
try:
    s3.create_bucket(Bucket="raw-logs")
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
base = "tests/fixtures/access-logs/"
s3.upload_file(base + "2026-11-29-08-00-00-A1B2C3D4E5F6.log", "raw-logs", "logs/2026-11-29-08-00-00-A1B2C3D4E5F6")
s3.upload_file(base + "2026-11-29-09-00-00-F6E5D4C3B2A1.log.gz", "raw-logs", "logs/2026-11-29-09-00-00-F6E5D4C3B2A1.gz")
s3.put_object(Bucket="raw-logs", Key="logs/2026-11-29-10-00-00-0A1B2C3D4E5F",
              Body=b'owner eventbridge-demo [29/Nov/2026:10:00:00 +0000] 1.2.3.4 req ID REST.GET.OBJECT k "GET /k HTTP/1.1" 200 - 1 1 1 1 "-" "ua" -\n')
PY

cargo lambda watch --only-lambda-apis -A 127.0.0.1 -P "$PORT" > "$work/api.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 150); do
  (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.2
done
# Each bootstrap polls its own function's queue (the API routes /.rt/<name>), as on Lambda: the
# reserved variables Lambda sets, plus the function's configuration (the env file above). All
# functions log to one file, as `watch` did.
for f in $FUNCTIONS; do
  env $(cat "$work/env") AWS_LAMBDA_RUNTIME_API="http://127.0.0.1:$PORT/.rt/$f" \
    AWS_LAMBDA_FUNCTION_NAME="$f" AWS_LAMBDA_FUNCTION_VERSION='$LATEST' AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024 \
    AWS_LAMBDA_LOG_GROUP_NAME="/aws/lambda/$f" AWS_LAMBDA_LOG_STREAM_NAME=lambda-runtime \
    "$LAMBDA_DIR/$f/bootstrap" >> "$work/watch.log" 2>&1 &
  pids+=($!)
done

# A function that dies or hangs fails the check instead of stalling it.
invoke() { timeout 120 cargo lambda invoke -A 127.0.0.1 -P "$PORT" --data-file "$2" "$1"; }
fail() { echo "lambda-runtime: FAIL: $*"; tail -30 "$work/watch.log"; tail -5 "$work/api.log"; exit 1; }
sleep 1
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a bootstrap or the Runtime API exited at start"; done

# raw/order is partitioned by processing hour: the orders, their replay and the re-split batch
# must land in one hour for the compaction below to have two files of one partition to merge.
# The first invocation (members) warms msk-ingest; then, warm, the three order invocations take
# seconds, started at least a minute before the hour turns.
out=$(invoke msk-ingest events/msk-members.json) || fail "msk-ingest members: $out"
if [ "$(date -u +%M)" = 59 ]; then sleep $(( 61 - 10#$(date -u +%S) )); fi
out=$(invoke msk-ingest events/msk-orders.json) || fail "msk-ingest invoke: $out"
echo "$out" | grep -q '"written":6' || fail "msk-ingest wrote: $out"
# A warm invocation at the default log level (RUST_LOG unset) logs its EMF line (~750 bytes), not
# delta-rs internals (they were ~67 KB per invocation at plain `info`) nor a summary line.
before=$(wc -c < "$work/watch.log")
out=$(invoke msk-ingest events/msk-orders.json) || fail "msk-ingest replay: $out"
echo "$out" | grep -q '"duplicates":6' || fail "msk-ingest replay: $out"
logged=$(( $(wc -c < "$work/watch.log") - before ))
echo "msk-ingest warm invocation logged $logged bytes:"; tail -c "$logged" "$work/watch.log"
[ "$logged" -lt 1024 ] || { tail -c 3000 "$work/watch.log"; fail "msk-ingest logged $logged bytes at the default level"; }
out=$(invoke msk-ingest events/msk-replay.json) || fail "msk-ingest re-split: $out"
parts=$(find "$work/lake/raw/order" -name '*.parquet' -not -path '*/_delta_log/*' -exec dirname {} \; | sort -u | wc -l)
[ "$parts" = 1 ] || fail "raw/order's orders landed in $parts hour partitions"

out=$(invoke s3-log-ingest events/sqs-s3-notifications.json) || fail "s3-log-ingest invoke: $out"
echo "$out" | grep -q '"batchItemFailures":\[\]' || fail "s3-log-ingest response: $out"

out=$(invoke maintenance events/maintenance-optimize.json) || fail "maintenance optimize: $out"
echo "$out" | grep -q '"files_after":1' || fail "maintenance optimize: $out"
out=$(invoke maintenance events/maintenance-manifest.json) || fail "maintenance manifest: $out"
[ -f "$work/lake/raw/order/_symlink_format_manifest/_lakestream_state.json" ] || fail "no manifest state"

out=$(invoke refine events/refine-curated.json) || fail "refine: $out"
echo "$out" | grep -q '"joined":8' || fail "refine joined: $out"
out=$(invoke refine events/refine-curated.json) || fail "refine again: $out"
echo "$out" | grep -q '"runs":\[\]' || fail "a repeated refine tick ran again: $out"
out=$(invoke refine events/refine-processed.json) || fail "refine processed: $out"
echo "$out" | grep -q '"inserted":6' || fail "refine processed: $out"
# Refine notices (the SQS trigger): curated and processed already ran through these versions,
# gold never did; the partial batch response hands nothing back.
out=$(invoke refine events/sqs-refine-notices.json) || fail "refine notices: $out"
echo "$out" | grep -q '"batchItemFailures":\[\]' || fail "refine notices: $out"
[ -d "$work/lake/gold/order_hourly/_delta_log" ] || fail "the notice did not run gold: $out"

tables=$(target/debug/lakestream tables --config "$work/lakestream.toml")
echo "$tables"
echo "$tables" | grep -qE '^raw/order +version +2 +files +1 +rows +8 ' || fail "raw/order"
echo "$tables" | grep -qE '^access_logs/datalake-prod +version +0 .* rows +4 ' || fail "access_logs/datalake-prod"
echo "$tables" | grep -qE '^access_logs/eventbridge-demo .* rows +1 ' || fail "access_logs/eventbridge-demo"
echo "$tables" | grep -qE '^curated/order +version +0 .* rows +8 ' || fail "curated/order"
echo "$tables" | grep -qE '^processed/order +version +0 .* rows +6 ' || fail "processed/order"
echo "5 passed, 0 failed"
