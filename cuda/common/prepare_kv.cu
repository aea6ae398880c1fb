// The K/V preparation sequence (see prepare_kv.h): which kernels run, in which grid. The maths
// is src/common/quant_math.h, the same the CPU backend uses.
#include "cuda/common/prepare_kv.h"

#include <algorithm>

#include "cuda/common/launch.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/prepare_kv_common.cuh"

namespace int8attn {
namespace {

constexpr int kChunk = qm::kStatsChunk;  // tokens per statistics range unit

// The accumulators' identities (max |q| and the counters start at 0): see prep::stats_acc.
__global__ void stats_fill_kernel(float* acc, int heads, int stride) {
  dev::chain_kernels();
  const int64_t per_head = kv_stats_head_floats(stride);
  const int64_t total = heads * per_head;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i % per_head;
    acc[i] = prep::acc_identity(static_cast<int>(r / stride));
  }
}

}  // namespace

int64_t kv_stats_partial_floats(int heads, int stride) {
  return static_cast<int64_t>(heads) * kv_stats_head_floats(stride);
}

int64_t plan_kv_stats(KvPrepParams& p) {
  // Token ranges per head: at most one wave of CTAs (a partial second wave of these short CTAs
  // costs as much as a full one: flux_1024px's 1.09 waves took 48 us), at least one (a head's
  // last CTA finalizes it). Q's rows are split into as many ranges.
  const int heads = p.heads_b * p.heads_h;
  const int nchunks = (p.n + kChunk - 1) / kChunk;
  const int qchunks = p.balance && p.Nq > 0 ? (p.Nq + kChunk - 1) / kChunk : 0;
  const int wave = stats_ctas_per_sm(p) * std::max(p.sm_count, 1) / std::max(heads, 1);
  p.stats_ranges = std::max(1, std::min(wave, std::max(nchunks, qchunks)));
  return static_cast<int64_t>(heads) * p.stats_ranges * 2 * p.dpad;
}

cudaError_t launch_kv_stats(const KvPrepParams& p, cudaStream_t stream) {
  // The ranges the range sums were sized for (plan_kv_stats).
  if (p.stats_ranges < 1 || p.range_sums == nullptr) return cudaErrorInvalidValue;
  const int heads = p.heads_b * p.heads_h;
  if (p.fill) {
    const int fill_heads = std::max(heads, p.fill_heads);
    const int64_t total = kv_stats_partial_floats(fill_heads, p.stats_stride);
    const int fill_blocks = static_cast<int>(std::min<int64_t>((total + 255) / 256, 1024));
    const cudaError_t err = launch_kernel(stats_fill_kernel, dim3(fill_blocks), dim3(256), 0,
                                          stream, false, p.partials, fill_heads, p.stats_stride);
    if (err != cudaSuccess) return err;
  }
  const int nchunks = (p.n + kChunk - 1) / kChunk;
  const int qchunks = p.balance && p.Nq > 0 ? (p.Nq + kChunk - 1) / kChunk : 0;
  const int ranges = p.stats_ranges;
  const int tokens_per_cta = std::max(1, (nchunks + ranges - 1) / ranges) * kChunk;
  const int rows_per_cta = qchunks > 0 ? (qchunks + ranges - 1) / ranges * kChunk : 0;
  // Without the fill the statistics are the call's first kernel: launched the ordinary way.
  return launch_stats(p, ranges, tokens_per_cta, rows_per_cta, stream, p.chain && p.fill);
}

cudaError_t launch_kv_prepare(const KvPrepParams& p, cudaStream_t stream) {
  if (!int8_qk(p.mode)) return launch_kv_quantize(p, stream, false);  // EXACT: copies only
  const cudaError_t err = launch_kv_stats(p, stream);
  if (err != cudaSuccess) return err;
  return launch_kv_quantize(p, stream, true);
}

cudaError_t launch_kv_quantize(const KvPrepParams& p, cudaStream_t stream, bool after_kernel) {
  return launch_kv_quantize_tiles(p, stream, p.chain && after_kernel);
}

}  // namespace int8attn
