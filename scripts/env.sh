# Sourced by the scripts in scripts/: common settings.
#   BUILD_DIR            build directory (default: <repo>/build)
#   INT8ATTN_CUDA_ARCHS  GPU architectures, e.g. "90a", "80;89;90a" or "all" (default: those of
#                        the GPUs present; setting it builds CUDA even without a GPU)
#   INT8ATTN_ENABLE_CUDA ON/OFF to force the CUDA backend on or off (default: on when nvcc and a
#                        GPU are found; CMake prints what it builds and why)
#   CMAKE_BUILD_TYPE     default Release
#   CMAKE_ARGS           extra arguments for the configure step
INT8ATTN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$INT8ATTN_ROOT/build}
# The CUDA toolkit usually lives in /usr/local/cuda without being on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
