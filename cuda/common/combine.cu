// Split-KV merge (flash-decoding): O = Σ_s exp(lse_s − lse)·O_s with lse = log Σ_s exp(lse_s).
// Splits that saw no key have lse_s = −inf and weigh 0; a row no split could see gets O = 0.
#include "cuda/common/combine.h"

#include "cuda/common/mma.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/launch.cuh"

namespace int8attn {
namespace {

constexpr int kMaxSplits = 128;  // choose_splits caps the split count there
constexpr int kGroups = 4;       // split groups summing one channel side by side

// One CTA per output row, kGroups x D' threads (D' = D rounded up to a warp). Every split's LSE
// is loaded once, all at the same time, into shared memory; each warp reduces the maximum and
// the denominator from there; then group g sums splits g, g + kGroups, ... of its channel (8
// loads in flight per thread) and group 0 adds the groups' partial sums. A thread walking all
// splits of its channel one batch of loads at a time took 12-21 us at 64 splits.
__global__ void combine_kernel(const AttnKernelParams p) {
  dev::chain_kernels();
  __shared__ float s_lse[kMaxSplits];
  __shared__ float s_part[kGroups][256];
  const int64_t row = blockIdx.x;  // (b, h, i) flattened over [B][Hq][Nq]
  const int64_t rows = static_cast<int64_t>(p.B) * p.Hq * p.Nq;
  const int i = static_cast<int>(row % p.Nq);
  const int h = static_cast<int>((row / p.Nq) % p.Hq);
  const int b = static_cast<int>(row / (static_cast<int64_t>(p.Nq) * p.Hq));
  const int tid = threadIdx.x, lane = tid & 31;
  for (int s = tid; s < p.num_splits; s += blockDim.x) s_lse[s] = p.part_lse[s * rows + row];
  __syncthreads();
  float mx = -INFINITY;
  for (int s = lane; s < p.num_splits; s += 32) mx = fmaxf(mx, s_lse[s]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float denom = 0.f;
  for (int s = lane; s < p.num_splits; s += 32)
    denom += s_lse[s] == -INFINITY ? 0.f : __expf(s_lse[s] - mx);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) denom += __shfl_xor_sync(0xffffffffu, denom, o);
  const bool empty = denom == 0.f;  // no split saw a key (a NaN sum is not empty)

  const int width = blockDim.x / kGroups, g = tid / width, d = tid % width;
  float acc = 0.f;
  if (!empty && d < p.D) {
    // Loads unconditional (every split writes its partial row, zeros when it saw no key).
#pragma unroll 8
    for (int s = g; s < p.num_splits; s += kGroups) {
      const float l = s_lse[s];
      const float x = p.part_o[(s * rows + row) * p.D + d];
      acc += (l == -INFINITY) ? 0.f : __expf(l - mx) * x;
    }
  }
  s_part[g][d] = acc;
  __syncthreads();
  if (g != 0) return;
  const int64_t obase = b * p.o_stride[0] + h * p.o_stride[1] + i * p.o_stride[2];
  if (d < p.D) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) sum += s_part[k][d];
    dev::store_from_float(p.o, obase + d * p.o_stride[3], p.dtype, empty ? 0.f : sum / denom);
  }
  if (tid == 0 && p.lse != nullptr)
    p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] =
        empty ? -INFINITY : mx + logf(denom);
}

}  // namespace

cudaError_t launch_combine(const AttnKernelParams& p, bool early, cudaStream_t stream) {
  if (p.num_splits > kMaxSplits || p.D > 256) return cudaErrorInvalidValue;
  const int64_t rows = static_cast<int64_t>(p.B) * p.Hq * p.Nq;
  const int width = (p.D + 31) / 32 * 32;
  return launch_kernel(combine_kernel, dim3(static_cast<unsigned>(rows)), dim3(kGroups * width), 0,
                       stream, early, p);
}

}  // namespace int8attn
