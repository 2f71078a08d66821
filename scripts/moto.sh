#!/usr/bin/env bash
# Start (or reuse) a moto S3/SQS server on 127.0.0.1 and create the test bucket.
# Usage: scripts/moto.sh start|stop   (PORT defaults to 5055; the venv is .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${MOTO_PORT:-5055}"
PIDFILE="target/moto.pid"
case "${1:-start}" in
  start)
    mkdir -p target
    if curl -fs "http://127.0.0.1:${PORT}/" >/dev/null 2>&1; then
      echo "moto already answering on 127.0.0.1:${PORT}"
    else
      # moto with atomic conditional writes, as S3 (scripts/moto_server.py says why)
      .venv/bin/python scripts/moto_server.py -H 127.0.0.1 -p "${PORT}" > target/moto.log 2>&1 &
      echo $! > "${PIDFILE}"
      for _ in $(seq 1 100); do
        curl -fs "http://127.0.0.1:${PORT}/" >/dev/null 2>&1 && break
        sleep 0.2
      done
      curl -fs "http://127.0.0.1:${PORT}/" >/dev/null || { echo "moto did not start"; cat target/moto.log; exit 1; }
      echo "moto started on 127.0.0.1:${PORT} (pid $(cat "${PIDFILE}"))"
    fi
    AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 \
      .venv/bin/python - "${PORT}" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", region_name="us-east-1")
try:
    s3.create_bucket(Bucket="lakestream-test")
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
PY
    ;;
  stop)
    [ -f "${PIDFILE}" ] && kill "$(cat "${PIDFILE}")" 2>/dev/null || true
    rm -f "${PIDFILE}"
    ;;
esac
