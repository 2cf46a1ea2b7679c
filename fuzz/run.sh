#!/usr/bin/env bash
# Runs one libFuzzer target of the fuzz build for a bounded time:
#   fuzz/run.sh BUILD_DIR TARGET SECONDS [extra libFuzzer flags...]
# Inputs: BUILD_DIR/corpus/TARGET (the growing corpus, kept between runs), BUILD_DIR/seeds/TARGET
# (fuzz/make_seeds.py) and the regression corpus fuzz/corpus/TARGET. A crash, leak, timeout or
# out-of-memory stops the run; its input is written to BUILD_DIR/findings/TARGET/ and the
# script exits non-zero. Prints the final stats line (executions, exec/s, coverage).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 target=$2 seconds=$3
shift 3
case "$target" in
  session | passes | audit_inspect) max_len=262144 ;;  # models: 256 KB
  *) max_len=65536 ;;                                   # one tensor: 64 KB
esac
mkdir -p "$build/corpus/$target" "$build/findings/$target" "$build/seeds/$target"
log="$build/findings/$target/last-run.log"
echo "fuzz $target: ${seconds}s, -max_len=$max_len (log: $log)"
set +e
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -max_len="$max_len" \
  -rss_limit_mb=4096 -malloc_limit_mb=4096 -timeout=20 -print_final_stats=1 \
  -artifact_prefix="$build/findings/$target/" "$@" \
  "$build/corpus/$target" "$build/seeds/$target" "fuzz/corpus/$target" >"$log" 2>&1
rc=$?
set -e
grep -E '^#[0-9]+ *(DONE|INITED)|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" |
  sed "s/^/  $target: /" || true
if [ $rc -ne 0 ]; then
  echo "fuzz $target: FAILED (exit $rc); the input is in $build/findings/$target/:"
  grep -E 'ERROR:|SUMMARY:|Test unit written|check failed' "$log" | head -20
  exit 1
fi
