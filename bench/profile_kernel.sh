#!/usr/bin/env bash
# Where does the attention kernel's time go? On the GPU machine: an Nsight Compute profile of one
# attention launch (speed of light, warp stall reasons, scheduler and pipe utilisation) for a
# shape and mode, its per-instruction stall samples (SASS with source counters, CSV: sum them by
# region of the kernel with bench/sass_phases.py to see each phase's share), plus an opcode census of
# the kernel's SASS. Output goes to DIR.
#   bash bench/profile_kernel.sh BUILD_DIR DIR [shape] [mode] [kernel-regex] [run options...]
# Run options go to `int8attn run`, e.g. `--k-granularity block` for the processors' kernel.
set -uo pipefail
BUILD="${1:?build dir}" DIR="${2:?output dir}" SHAPE="${3:-flux_1024px}" MODE="${4:-balanced}"
KERNEL="${5:-attention}"
shift $(( $# < 5 ? $# : 5 ))
mkdir -p "$DIR"
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
export LD_LIBRARY_PATH="$BUILD/lib:${LD_LIBRARY_PATH:-}"
tag="${SHAPE}_${MODE}"
if command -v ncu >/dev/null; then
  ncu --clock-control none -k "regex:$KERNEL" -c 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
      --section SourceCounters --import-source no -f -o "$DIR/prof_$tag" \
      "$BUILD/bin/int8attn" run --shape "$SHAPE" --mode "$MODE" --repeats 1 "$@" \
      >"$DIR/ncu_run_$tag.txt" 2>&1 || echo "ncu failed (see $DIR/ncu_run_$tag.txt)"
  ncu -i "$DIR/prof_$tag.ncu-rep" >"$DIR/ncu_$tag.txt" 2>&1
  ncu -i "$DIR/prof_$tag.ncu-rep" --page source --print-source sass --csv \
      >"$DIR/sass_$tag.csv" 2>&1
  rm -f "$DIR/prof_$tag.ncu-rep"
else
  echo "ncu not found" >"$DIR/ncu_$tag.txt"
fi
if command -v cuobjdump >/dev/null; then
  lib="$BUILD/lib/libint8attn.so"
  cuobjdump --dump-sass "$lib" >"$DIR/all.sass" 2>/dev/null
  # Opcode census per attention kernel (mangled name has the head dim, mode, warps).
  awk '/Function : /{fn=$3} /\/\*[0-9a-f]+\*\//{ for(i=1;i<=NF;i++) if ($i ~ /^[A-Z][A-Z0-9_.]+$/ && $i !~ /^R[0-9]/) { split($i,a,"."); c[fn" "a[1]]++; break } }
       END{for(k in c) print k, c[k]}' "$DIR/all.sass" | grep attention | sort >"$DIR/sass_census.txt"
  rm -f "$DIR/all.sass"
fi
