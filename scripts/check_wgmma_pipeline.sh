#!/usr/bin/env bash
# Compile the Hopper wgmma kernels (attention, few keys) with ptxas' report and fail when ptxas
# serialises their warpgroup MMAs (info C7510-C7519: "wgmma.mma_async instructions are
# serialized ..."). Such a build is still correct, so no test can notice, but it loses the
# overlap the kernels are built around. Needs nvcc; no GPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "check_wgmma_pipeline: nvcc not found, skipped"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for tu in attention_sm90_wgmma attention_short_keys_wgmma; do
  "$NVCC" -std=c++17 --expt-relaxed-constexpr -O3 -Iinclude -Isrc -I. \
    -gencode=arch=compute_90a,code=sm_90a -Xptxas=-v -c "cuda/sm90/$tu.cu" \
    -o "$out/$tu.o" >>"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
done
if grep -E "C751[0-9]" "$out/log"; then
  echo "check_wgmma_pipeline: ptxas serialised wgmma in an sm90 kernel (see above)"
  exit 1
fi
echo "check_wgmma_pipeline: OK ($(grep -c 'Compiling entry' "$out/log") sm90 kernels, no wgmma serialisation)"
