// Split-KV merge (flash-decoding): O = Σ_s exp(lse_s − lse)·O_s with lse = log Σ_s exp(lse_s).
// Splits that saw no key have lse_s = −inf and weigh 0; a row no split could see gets O = 0.
#include "kernels/combine.h"

#include "device/mma.cuh"

namespace int8attn {
namespace {

__global__ void combine_kernel(const CombineParams p) {
  const int64_t row = blockIdx.x;  // (b, h, i) flattened over [B][Hq][Nq]
  const int64_t rows = static_cast<int64_t>(p.B) * p.Hq * p.Nq;
  const int i = static_cast<int>(row % p.Nq);
  const int h = static_cast<int>((row / p.Nq) % p.Hq);
  const int b = static_cast<int>(row / (static_cast<int64_t>(p.Nq) * p.Hq));
  float mx = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) mx = fmaxf(mx, p.part_lse[s * rows + row]);
  float denom = 0.f;
  for (int s = 0; s < p.num_splits; ++s) {
    const float l = p.part_lse[s * rows + row];
    denom += (l == -INFINITY) ? 0.f : __expf(l - mx);
  }
  const bool empty = !(denom > 0.f);
  const int64_t obase = b * p.o_stride[0] + h * p.o_stride[1] + i * p.o_stride[2];
  for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
    float acc = 0.f;
    if (!empty) {
      // Loads unconditional (every split writes its partial row, zeros when it saw no key) and
      // unrolled, so several splits' loads are in flight: a load inside the `l != -inf` branch
      // was waited for split by split (decode runs up to 128 splits).
#pragma unroll 8
      for (int s = 0; s < p.num_splits; ++s) {
        const float l = p.part_lse[s * rows + row];
        const float x = p.part_o[(s * rows + row) * p.D + d];
        acc += (l == -INFINITY) ? 0.f : __expf(l - mx) * x;
      }
      acc /= denom;
    }
    dev::store_from_float(p.o, obase + d * p.o_stride[3], p.dtype, acc);
  }
  if (threadIdx.x == 0 && p.lse != nullptr)
    p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] =
        empty ? -INFINITY : mx + logf(denom);
}

}  // namespace

cudaError_t launch_combine(const CombineParams& p, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(p.B) * p.Hq * p.Nq;
  const int threads = p.D <= 64 ? 64 : (p.D <= 128 ? 128 : 256);
  combine_kernel<<<static_cast<unsigned>(rows), threads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace int8attn
