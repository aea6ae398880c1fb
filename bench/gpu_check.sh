#!/usr/bin/env bash
# Everything the GPU machine is for, in one call (or two: --no-bench, then --bench-only): build (unless a build is carried in), GPU
# tests, compute-sanitizer memcheck (every test) + racecheck (a subset), the Python GPU tests, the CLI's
# main job, and the benchmark against torch SDPA. Logs and results go to bench/results/run-<date>;
# on the lent GPU machine ($OUT set, which brings back at most 8 files) they are written to a
# scratch folder and packed after every step into $OUT/gpu_check.tgz, beside plain copies of the
# summary log and the benchmark table, so a run stopped by its time limit still returns what it
# did. The benchmark table is printed last.
#
#   bash bench/gpu_check.sh [--build-dir DIR] [--quick] [--skip-sanitizer] [--shapes a,b]
#                           [--no-bench | --bench-only]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=build-gpu QUICK="" SANITIZE=1 SHAPES="" TESTS=1 BENCH=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --quick) QUICK="--quick"; shift ;;
    --skip-sanitizer) SANITIZE=0; shift ;;
    --shapes) SHAPES="--shapes $2"; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    --bench-only) TESTS=0; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -n "${OUT:-}" ]; then OUTDIR="$(mktemp -d)/gpu_check"; else
  OUTDIR="bench/results/run-$(date +%Y%m%d-%H%M%S)"; fi
mkdir -p "$OUTDIR"
LOG="$OUTDIR/gpu_check.log"
status=0
# What the previous steps wrote, into $OUT (nothing to do without it).
pack() {
  [ -n "${OUT:-}" ] || return 0
  tar czf "$OUT/gpu_check.tgz" -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")"
  cp "$LOG" "$OUT/"
  if [ -f "$OUTDIR/bench_table.md" ]; then cp "$OUTDIR/bench_table.md" "$OUT/"; fi
}
trap pack EXIT
step() { pack; echo "=== $* ($(date +%T))" | tee -a "$LOG"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1 | tee -a "$LOG"
python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>&1 | tee -a "$LOG"

if [ ! -f "$BUILD/lib/libint8attn.so" ]; then
  step "build ($BUILD)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINT8ATTN_CUDA_ARCHS=90a >>"$LOG" 2>&1 \
    && cmake --build "$BUILD" -j "$(nproc)" >>"$LOG" 2>&1 || { echo "build failed" | tee -a "$LOG"; exit 1; }
fi
export LD_LIBRARY_PATH="$PWD/$BUILD/lib:${LD_LIBRARY_PATH:-}"
export INT8ATTN_LIBRARY="$PWD/$BUILD/lib/libint8attn.so"
export PYTHONPATH="$PWD/bindings/python/src:${PYTHONPATH:-}"
export PYTHONUNBUFFERED=1

if [ "$TESTS" = 1 ]; then
step "GPU tests"
for t in "$BUILD"/bin/test_gpu_*; do
  [ -x "$t" ] || continue
  "$t" --gtest_brief=1 >"$OUTDIR/$(basename "$t").log" 2>&1; rc=$?
  tail -n 25 "$OUTDIR/$(basename "$t").log" | tee -a "$LOG"
  [ $rc -eq 0 ] || { echo "FAILED: $t (rc $rc)" | tee -a "$LOG"; status=1; }
done
step "CPU tests (sanity on this machine)"
for t in "$BUILD"/bin/test_*; do
  case "$t" in *test_gpu_*) continue ;; esac
  [ -x "$t" ] || continue
  "$t" --gtest_brief=1 >>"$OUTDIR/cpu_tests.log" 2>&1 || { echo "FAILED: $t" | tee -a "$LOG"; status=1; }
done

if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer >/dev/null; then
  step "compute-sanitizer memcheck (all) + racecheck (subset)"
  t="$BUILD/bin/test_gpu_attention"
  # memcheck over every GPU test (about a minute on an H100); racecheck, ~10x slower, over the
  # tests of shared-memory protocols (the rest passed it once, 2026-11-25).
  compute-sanitizer --tool memcheck --error-exitcode 9 "$t" >"$OUTDIR/memcheck.log" 2>&1
  rc=$?; tail -n 4 "$OUTDIR/memcheck.log" | tee -a "$LOG"; [ $rc -eq 0 ] || { echo "memcheck rc $rc" | tee -a "$LOG"; status=1; }
  compute-sanitizer --tool racecheck --error-exitcode 9 "$t" \
    --gtest_filter='*BlockMask*:*SplitKv*:*KeySplit*:*Causal*:*HeadDim160*:*SmallProblems*:*QuantizationLayouts*:*FewKeys*' >"$OUTDIR/racecheck.log" 2>&1
  rc=$?; tail -n 4 "$OUTDIR/racecheck.log" | tee -a "$LOG"; [ $rc -eq 0 ] || { echo "racecheck rc $rc" | tee -a "$LOG"; status=1; }
  # What racecheck makes of the sm90a kernel's ring protocol alone (tests/gpu/sanitizer): the
  # variants differ in one point each; "early" is a real race, the tool's control.
  if [ -x "$BUILD/bin/tma_ring_probe" ]; then
    step "racecheck of the TMA ring probe (hazards per variant)"
    for v in lane0 all sts early; do
      compute-sanitizer --tool racecheck "$BUILD/bin/tma_ring_probe" "$v" >"$OUTDIR/racecheck_probe_$v.log" 2>&1
      rc=$?
      echo "  $v: exit $rc; $(grep -h 'variant' "$OUTDIR/racecheck_probe_$v.log"); $(grep -h 'RACECHECK SUMMARY' "$OUTDIR/racecheck_probe_$v.log" | sed 's/=* *//')" | tee -a "$LOG"
    done
  fi
fi

if [ -d bindings/python/tests/gpu ]; then
  step "Python GPU tests"
  python3 -m pytest -q -p no:cacheprovider bindings/python/tests/gpu >"$OUTDIR/pytest_gpu.log" 2>&1
  rc=$?; tail -n 15 "$OUTDIR/pytest_gpu.log" | tee -a "$LOG"; [ $rc -eq 0 ] || status=1
fi

if [ -x "$BUILD/bin/int8attn" ]; then
  step "CLI main job"
  "$BUILD/bin/int8attn" info 2>&1 | tee -a "$LOG"
  "$BUILD/bin/int8attn" run --mode all 2>&1 | tee -a "$LOG"
fi

fi  # TESTS

if [ "$BENCH" = 1 ]; then
step "benchmark"
python3 bench/bench.py $QUICK $SHAPES --out "$OUTDIR" 2>"$OUTDIR/bench.log" | tee "$OUTDIR/bench_table.md"
[ "${PIPESTATUS[0]}" -eq 0 ] || { tail -n 30 "$OUTDIR/bench.log"; status=1; }
fi  # BENCH
echo "gpu_check status: $status (logs in ${OUT:+$OUT/gpu_check.tgz, from }$OUTDIR)"
exit $status
