#!/usr/bin/env bash
# The README's main job: build, show what this build and machine offer, then run attention on
# the best backend (flux_1024px on a GPU, 1x8x1024x64 on the CPU) with accuracy against a
# float64 reference and time/TOPS for each precision mode. Extra arguments go to `int8attn run`.
# Its exit status is int8attn's: 3 when a result misses the accuracy bar (the `bar` column and
# the legend line under the table say which), 2 for bad arguments.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
bash "$INT8ATTN_ROOT/scripts/build.sh"
cli="$BUILD_DIR/bin/int8attn"
echo
echo "\$ int8attn info"
"$cli" info
echo
echo "\$ int8attn run $*"
"$cli" run "$@"
