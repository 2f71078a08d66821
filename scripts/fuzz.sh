#!/usr/bin/env bash
# Run every cargo-fuzz target for FUZZ_SECONDS (default 600) one after the other, growing the
# saved corpora under fuzz/corpus/<target>, and print executions and coverage per target.
# A crash leaves its input in fuzz/artifacts/<target>/; copy it to fuzz/regressions/<target>/
# and add a unit test (CI replays corpora and regressions: lakestream-formats tests/corpus.rs).
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-600}
targets=${FUZZ_TARGETS:-"access_log_line kafka_event notification pipeline_config"}
mkdir -p logs
cargo +nightly fuzz build
status=0
for t in $targets; do
  echo "== $t: ${seconds}s"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: memory blow-ups are crashes.
  if ! cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$seconds" -timeout=10 -max_len=8192 \
      -rss_limit_mb=2048 -print_final_stats=1 > "logs/$t.log" 2>&1; then
    echo "$t: CRASH (see fuzz/logs/$t.log and fuzz/artifacts/$t/)"; status=1
  fi
  execs=$(grep -m1 'stat::number_of_executed_units' "logs/$t.log" | awk '{print $2}')
  cov=$(grep -E '^#[0-9]+.*(DONE|INITED)' "logs/$t.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' || true)
  echo "$t: executions ${execs:-?}, ${cov:-see log}"
done
exit $status
