#!/usr/bin/env bash
# libFuzzer over the C API (tests/fuzz, README.md there): builds tests/fuzz's int8attn_fuzz with
# clang (CPU-only; the harness and the library's sources under ASan + UBSan, float-cast-overflow
# included, with coverage instrumentation), then runs 1,000,000 executions starting from the
# committed seed corpus (copied to a temporary directory, so the repository is not modified).
# The mutation seed is fixed (INT8ATTN_FUZZ_SEED, default 1), so a run of a given tree is
# reproducible: with a random seed one run of 1,000,000 took 200 s and another, whose corpus
# drifted towards large forward calls, was on course for 45 minutes. A run also stops after
# INT8ATTN_FUZZ_MAX_SECONDS (default 1500) and reports the executions it made.
# Any crash, sanitizer report, failed check, timeout or out-of-memory fails the step; the
# reproducer is printed (base64) and kept in build-fuzz/fuzz-artifacts/. Prints a summary:
# executions, seconds, executions per second and coverage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source .ci/lib/clang_tools.sh

RUNS="${INT8ATTN_FUZZ_RUNS:-1000000}"
SEED="${INT8ATTN_FUZZ_SEED:-1}"
MAX_SECONDS="${INT8ATTN_FUZZ_MAX_SECONDS:-1500}"
build="${INT8ATTN_FUZZ_BUILD_DIR:-$PWD/build-fuzz}"

clang_tools_install

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# libFuzzer's runtime ships with clang (libclang-rt-<major>-dev on Debian): install it when a
# -fsanitize=fuzzer program does not link.
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' > "$work/probe.cpp"
clang_runtime_ensure -fsanitize=fuzzer,address,undefined "$work/probe.cpp" "$work/probe" "libFuzzer runtime"
echo "$(clang++ --version | head -1)"

cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINT8ATTN_ENABLE_CUDA=OFF -DINT8ATTN_BUILD_TOOLS=OFF \
  -DINT8ATTN_FUZZ=ON >/dev/null
ninja -C "$build" -j"${CMAKE_BUILD_PARALLEL_LEVEL:-2}" int8attn_fuzz
fuzzer="$build/bin/int8attn_fuzz"

cp -r tests/fuzz/corpus "$work/corpus"
mkdir -p "$work/artifacts"
log="$work/fuzz.log"
seeds=$(find "$work/corpus" -type f | wc -l)
echo "fuzzing: $RUNS executions (at most ${MAX_SECONDS}s) from $seeds seeds, seed $SEED" \
  "(-max_len=512 -timeout=10 -rss_limit_mb=2048)"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
start=$(date +%s)
set +e
# -close_fd_mask=3 moves libFuzzer's own output off fds 1/2; the target then captures those fds
# around every call and fails if the library printed anything. -reload=0: no other process adds
# to the corpus, so rereading it is wasted time.
"$fuzzer" "$work/corpus" -runs="$RUNS" -seed="$SEED" -max_total_time="$MAX_SECONDS" \
  -max_len=512 -timeout=10 -rss_limit_mb=2048 -reload=0 -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$work/artifacts/" >"$log" 2>&1
status=$?
set -e
secs=$(( $(date +%s) - start ))

done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
total_pcs=$(sed -n 's/.*(\([0-9]*\) inline 8-bit counters).*/\1/p' "$log" | head -1)
cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
artifacts=$(find "$work/artifacts" -type f | sort)
if [ "$status" -ne 0 ] || [ -n "$artifacts" ] || [ -z "$done_line" ]; then
  echo "fuzz: FAILED (exit status $status after ${secs}s); the end of the log:"
  tail -n 80 "$log"
  mkdir -p "$build/fuzz-artifacts"
  for f in $artifacts; do
    cp "$f" "$build/fuzz-artifacts/"
    echo "reproducer $(basename "$f") (kept in $build/fuzz-artifacts/), base64:"
    base64 -w0 "$f"
    echo
  done
  echo "reproduce: $fuzzer <file>   (INT8ATTN_FUZZ_VERBOSE=1 prints every call)"
  exit 1
fi
echo "$done_line"
if [ "${execs:-0}" -lt "$RUNS" ]; then
  echo "fuzz: the ${MAX_SECONDS}s limit stopped the run before $RUNS executions"
fi
echo "fuzz: OK: ${execs} executions in ${secs}s ($(( ${execs:-0} / (secs > 0 ? secs : 1) )) exec/s)," \
  "coverage ${cov:-?} of ${total_pcs:-?} instrumented edges, 0 crashes"
