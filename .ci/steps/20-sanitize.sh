#!/usr/bin/env bash
# CPU-only AddressSanitizer + UndefinedBehaviorSanitizer build running every CPU test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export BUILD_DIR="$PWD/build-sanitize"
export INT8ATTN_ENABLE_CUDA=OFF
export CMAKE_BUILD_TYPE=RelWithDebInfo
export CMAKE_ARGS="-DINT8ATTN_SANITIZE=ON"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
bash scripts/test.sh -L cpu
