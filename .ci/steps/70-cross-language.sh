#!/usr/bin/env bash
# The same small problem through C, Python, Rust and C#, all loading one libint8attn.so (CPU
# only, in build-ci-xlang): outputs must be bit-identical (tests/cross_language/README.md).
# Runs after 30-python.sh (whose venv has numpy), 40-rust.sh and 50-csharp.sh (toolchains).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export INT8ATTN_CI_VENV="${INT8ATTN_CI_VENV:-$PWD/build-ci/py-venv}"
bash tests/cross_language/run.sh build-ci-xlang
