#!/usr/bin/env bash
# C/C++: the format check, then the README's test command with warnings as errors (CUDA code
# compiled for sm_90a when nvcc exists, so a compile break fails CI even without a GPU) and its
# main job, then install into a temporary prefix and build + run a tiny consumer through
# find_package(int8attn) and through pkg-config.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null 2>&1 && echo "nvcc: $(nvcc --version | tail -1)" || echo "nvcc: not found (CPU-only build)"

# The sources match .clang-format.
bash scripts/check_format.sh
# Generated sources are up to date with their generator.
python3 tools/codegen/gen_wgmma_ops.py --check
# The Hopper kernel's MMAs stay asynchronous (ptxas reports serialisation only as info).
bash scripts/check_wgmma_pipeline.sh

# Warnings are errors here (host code, and device code where nvcc exists).
export CMAKE_ARGS="${CMAKE_ARGS:-} -DINT8ATTN_WARNINGS_AS_ERRORS=ON"
INT8ATTN_CUDA_ARCHS=90a bash scripts/test.sh

# The README's other command, the main job (same build; CPU backend here): it must run, print
# one result line per precision mode and the legend of the accuracy-bar column, and exit 0
# (a result outside the bar exits 3 and fails this step).
demo_out=$(INT8ATTN_CUDA_ARCHS=90a bash scripts/demo.sh --mode all --repeats 3 2>&1)
echo "$demo_out" | tail -n 8
for mode in EXACT BALANCED FAST; do
  echo "$demo_out" | grep -qE "^(cpu|cuda) +$mode .* ok$" \
    || { echo "demo.sh printed no $mode line within the bar"; exit 1; }
done
echo "$demo_out" | grep -q "^bar: ok = within the accuracy bar" \
  || { echo "demo.sh printed no legend of the bar column"; exit 1; }

build=${BUILD_DIR:-$PWD/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
echo "installed into $prefix:"; (cd "$prefix" && find . -type f -o -type l | sort | sed 's/^/  /')

mkdir -p "$work/consumer"
cat > "$work/consumer/main.c" <<'C'
#include <int8attn.h>
#include <stdio.h>
int main(void) {
  int8attn_context_t* ctx = NULL;
  float q[1 * 1 * 4 * 8], k[1 * 1 * 6 * 8], v[1 * 1 * 6 * 8], o[1 * 1 * 4 * 8];
  int8attn_tensor_t tq, tk, tv, to;
  const int64_t sq[4] = {1, 1, 4, 8}, sk[4] = {1, 1, 6, 8};
  int i;
  for (i = 0; i < 32; ++i) q[i] = (float)(i % 5) * 0.1f;
  for (i = 0; i < 48; ++i) { k[i] = (float)(i % 7) * 0.1f; v[i] = (float)i; }
  if (int8attn_abi_version() != INT8ATTN_ABI_VERSION) return 1;
  if (int8attn_context_create(&ctx, NULL) != INT8ATTN_OK) return 2;
  int8attn_tensor_init_contiguous(&tq, q, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, sq);
  int8attn_tensor_init_contiguous(&tk, k, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, sk);
  int8attn_tensor_init_contiguous(&tv, v, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, sk);
  int8attn_tensor_init_contiguous(&to, o, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, sq);
  if (int8attn_forward(ctx, &tq, &tk, &tv, &to, NULL) != INT8ATTN_OK) {
    fprintf(stderr, "forward: %s\n", int8attn_last_error());
    return 3;
  }
  int8attn_context_destroy(ctx);
  printf("consumer: int8attn %s, o[0] = %g\n", int8attn_version_string(), o[0]);
  return 0;
}
C
cat > "$work/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(int8attn 0.1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE int8attn::int8attn)
CM
echo "--- consumer via find_package(int8attn)"
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
"$work/consumer/build/consumer"

echo "--- consumer via pkg-config"
pcdir=$(dirname "$(find "$prefix" -name int8attn.pc | head -1)")
libdir=$(dirname "$(find "$prefix" -name 'libint8attn.so' | head -1)")
# The .pc file is relocatable (its prefix is found from its own directory): no --define-variable.
pc() { PKG_CONFIG_PATH="$pcdir" pkg-config "$@" int8attn; }
echo "pkg-config int8attn: version $(pc --modversion), $(pc --cflags --libs)"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -pedantic -Werror "$work/consumer/main.c" $(pc --cflags --libs) \
  -o "$work/consumer_pc"
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc"

echo "--- installed CLI"
"$prefix/bin/int8attn" info
