#!/usr/bin/env bash
# The GPU reliability pass (issue 25): compute-sanitizer's memcheck, racecheck, synccheck and
# initcheck over the whole GPU test binary, then a soak (random calls on several streams for a
# few minutes, each checked against the CPU backend). Every tool must report zero errors.
# Logs go to $OUT (or bench/results/reliability-<date>); a summary table is printed last.
#
#   bash bench/gpu_reliability.sh [--build-dir DIR] [--tools memcheck,racecheck,...]
#                                 [--soak-seconds S] [--filter GTEST_FILTER]
# The tools and the soak can be split over several calls (each call appends to the summary).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=build-gpu TOOLS="memcheck,racecheck,synccheck,initcheck" SOAK=180 FILTER="*"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --tools) TOOLS="$2"; shift 2 ;;
    --soak-seconds) SOAK="$2"; shift 2 ;;
    --filter) FILTER="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
OUTDIR="${OUT:-bench/results/reliability-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUTDIR"
SUMMARY="$OUTDIR/summary.md"
[ -f "$SUMMARY" ] || printf '| check | result | seconds |\n|---|---|---|\n' >"$SUMMARY"
export LD_LIBRARY_PATH="$PWD/$BUILD/lib:${LD_LIBRARY_PATH:-}"
status=0
test_bin="$BUILD/bin/test_gpu_attention"
[ -x "$test_bin" ] || { echo "no $test_bin: build first (bash scripts/build.sh)"; exit 1; }

IFS=',' read -r -a tools <<<"$TOOLS"
for tool in "${tools[@]}"; do
  [ -n "$tool" ] || continue
  echo "=== compute-sanitizer --tool $tool over $test_bin ($(date +%T))"
  extra=()
  [ "$tool" = racecheck ] && extra=(--racecheck-report all)
  start=$(date +%s)
  compute-sanitizer --tool "$tool" --error-exitcode 9 "${extra[@]}" "$test_bin" \
    --gtest_brief=1 --gtest_filter="$FILTER" >"$OUTDIR/$tool.log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  line=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUTDIR/$tool.log" | tail -1 | sed 's/=* *//')
  tests=$(grep -E "PASSED|FAILED" "$OUTDIR/$tool.log" | head -2 | tr '\n' ' ')
  echo "$tool: exit $rc; $line; $tests"
  [ $rc -eq 0 ] || status=1
  printf '| %s | exit %s; %s; %s | %s |\n' "$tool" "$rc" "$line" "$tests" "$took" >>"$SUMMARY"
done

if [ "$SOAK" != 0 ] && [ -x "$BUILD/bin/gpu_soak" ]; then
  echo "=== soak for ${SOAK}s ($(date +%T))"
  start=$(date +%s)
  "$BUILD/bin/gpu_soak" --seconds "$SOAK" --streams 4 --seed "$(date +%s)" \
    >"$OUTDIR/soak.log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  tail -n 3 "$OUTDIR/soak.log"
  [ $rc -eq 0 ] || status=1
  printf '| soak | exit %s; %s | %s |\n' "$rc" "$(tail -n 1 "$OUTDIR/soak.log")" "$took" >>"$SUMMARY"
fi
echo
cat "$SUMMARY"
echo "gpu_reliability status: $status (logs in $OUTDIR)"
exit $status
