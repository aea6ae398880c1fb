// The K/V preparation sequence (see prepare_kv.h): which kernels run, in which grid. The maths
// is src/common/quant_math.h, the same the CPU backend uses.
#include "cuda/common/prepare_kv.h"

#include <algorithm>

#include "cuda/common/launch.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/prepare_kv_common.cuh"

namespace int8attn {
namespace {

using prep::kStats;  // accumulators per channel: sumK, maxK, minK, sumV, maxV, minV

constexpr int kChunk = 64;  // tokens per statistics range unit / quantization tile

// Accumulators per canonical head: [head][kStats + 1][dpad] (the last row: max |q| for balancing).
__global__ void stats_fill_kernel(float* acc, int heads, int dpad) {
  dev::chain_kernels();
  const int64_t total = static_cast<int64_t>(heads) * (kStats + 1) * dpad;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int row = static_cast<int>((i / dpad) % (kStats + 1));
    acc[i] = row == kStats ? 0.f : prep::stat_identity(row);
  }
}

// Means, V scales and balancing factors per canonical head and channel.
__global__ void kv_finalize_kernel(const KvPrepParams p) {
  dev::chain_kernels();
  const int head = blockIdx.x;
  const int valid = prep::valid_tokens(p, head / p.heads_h);
  const float* in = p.partials + static_cast<int64_t>(head) * (kStats + 1) * p.dpad;
  for (int d = threadIdx.x; d < p.dpad; d += blockDim.x)
    prep::finalize_channel(
        p, head, d, valid, [&](int s) { return in[s * p.dpad + d]; }, in[kStats * p.dpad + d],
        /*write_out=*/true);
}

// The statistics into p.partials (filled with the identities first), without the finalize.
cudaError_t launch_kv_stats(const KvPrepParams& p, cudaStream_t stream) {
  const int heads = p.heads_b * p.heads_h;
  const int64_t total = kv_stats_partial_floats(heads, p.dpad);
  const int fill_blocks = static_cast<int>(std::min<int64_t>((total + 255) / 256, 1024));
  cudaError_t err = launch_kernel(stats_fill_kernel, dim3(fill_blocks), dim3(256), 0, stream, false,
                                  p.partials, heads, p.dpad);
  if (err != cudaSuccess) return err;

  const int nchunks = (p.n + kChunk - 1) / kChunk;
  const int qchunks = p.balance && p.Nq > 0 ? (p.Nq + kChunk - 1) / kChunk : 0;
  if (nchunks + qchunks == 0) return cudaSuccess;
  const int sms = std::max(p.sm_count, 1);
  // Small problems: K/V and Q statistics in one launch when all their 64-row chunks fit in one
  // wave together (one launch fewer). Larger ones keep two launches, each sized for its own
  // occupancy (splitting one wave between them was slower at flux).
  if (nchunks > 0 && qchunks > 0 &&
      nchunks + qchunks <= stats_ctas_per_sm(p, true, true) * sms / heads)
    return launch_stats(p, kChunk, kChunk, stream, p.chain);
  // Otherwise K/V statistics in at most one wave of CTAs (a partial second wave of these short
  // CTAs costs as much as a full one: flux_1024px's 1.09 waves took 48 us), Q's in about four
  // CTAs per SM.
  const int kv_ranges =
      std::min(nchunks, std::max(1, stats_ctas_per_sm(p, true, false) * sms / heads));
  const int q_ranges = std::min(qchunks, std::max(1, (4 * sms + heads - 1) / heads));
  if (nchunks > 0)
    err = launch_stats(p, (nchunks + kv_ranges - 1) / kv_ranges * kChunk, 0, stream, p.chain);
  if (err == cudaSuccess && qchunks > 0)
    err = launch_stats(p, 0, (qchunks + q_ranges - 1) / q_ranges * kChunk, stream, p.chain);
  return err;
}

}  // namespace

int64_t kv_stats_partial_floats(int heads, int dpad) {
  return static_cast<int64_t>(heads) * (kStats + 1) * dpad;
}

cudaError_t launch_kv_stats_reduce(const KvPrepParams& p, cudaStream_t stream) {
  const cudaError_t err = launch_kv_stats(p, stream);
  if (err != cudaSuccess) return err;
  return launch_kernel(kv_finalize_kernel, dim3(p.heads_b * p.heads_h), dim3(256), 0, stream,
                       p.chain, p);
}

cudaError_t launch_kv_prepare(const KvPrepParams& p, cudaStream_t stream) {
  if (!int8_qk(p.mode)) return launch_kv_quantize(p, stream, false);  // EXACT: copies only
  // The quantization kernel can finalize the statistics itself (no finalize launch), but then
  // every one of its CTAs redoes its head's finalize: worth it only while the grid is one wave
  // (2 CTAs per SM are resident at any head dim). With many tiles per head the repeats cost
  // more than the launch (decode with 32K keys: +5% end-to-end).
  const int64_t tiles = (p.nk_pad - p.key_offset + kChunk - 1) / kChunk;
  if (p.fill_tail &&
      tiles * p.heads_b * p.heads_h <= 2 * static_cast<int64_t>(std::max(p.sm_count, 1))) {
    const cudaError_t err = launch_kv_stats(p, stream);
    if (err != cudaSuccess) return err;
    KvPrepParams q = p;
    q.consts_from_partials = true;
    return launch_kv_quantize_tiles(q, stream, p.chain);
  }
  const cudaError_t err = launch_kv_stats_reduce(p, stream);
  if (err != cudaSuccess) return err;
  return launch_kv_quantize(p, stream, true);
}

cudaError_t launch_kv_quantize(const KvPrepParams& p, cudaStream_t stream, bool after_kernel) {
  return launch_kv_quantize_tiles(p, stream, p.chain && after_kernel);
}

}  // namespace int8attn
