#!/usr/bin/env bash
# System packages every later step needs (each step installs its own extras).
set -euo pipefail
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ make pkg-config libgtest-dev python3 python3-pip clang-format \
  libcli11-dev nlohmann-json3-dev >/dev/null   # the last two: the int8attn tool (header-only)
command -v nvcc >/dev/null || ls /usr/local/cuda/bin/nvcc >/dev/null 2>&1 \
  || echo "note: no CUDA toolkit found; the CUDA backend will not be compiled"
