#!/usr/bin/env bash
# Configure and build int8attn (library, CLI, tests) into build/ with Ninja on all cores.
# Environment: see scripts/env.sh (BUILD_DIR, INT8ATTN_CUDA_ARCHS, INT8ATTN_ENABLE_CUDA, ...).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

args=(-S "$INT8ATTN_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}")
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  if command -v ninja >/dev/null 2>&1; then
    args+=(-G Ninja)
  else
    echo "note: ninja not found; using CMake's default generator" >&2
  fi
fi
[ -n "${INT8ATTN_CUDA_ARCHS:-}" ] && args+=("-DINT8ATTN_CUDA_ARCHS=${INT8ATTN_CUDA_ARCHS}")
[ -n "${INT8ATTN_ENABLE_CUDA:-}" ] && args+=("-DINT8ATTN_ENABLE_CUDA=${INT8ATTN_ENABLE_CUDA}")
# shellcheck disable=SC2086
cmake "${args[@]}" ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "built into $BUILD_DIR (CLI: $BUILD_DIR/bin/int8attn)"
