#!/usr/bin/env bash
# The README's test command: build, then run every test. Tests labelled `gpu` skip (exit 77)
# on machines without a GPU. Extra arguments go to ctest (e.g. -L cpu, -R capi).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
bash "$INT8ATTN_ROOT/scripts/build.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" "$@"
