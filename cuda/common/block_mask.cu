// Block-mask prediction from mean-pooled Q and K blocks (see int8attn_predict_block_mask).
// pool_kernel: one CTA per (block, head) averages its rows; select_kernel: one CTA per
// (q-block, q-head) scores every key block, softmaxes, ranks (ties: lower index first) and
// keeps the top-k or the smallest prefix reaching the mass threshold, plus key block 0 and,
// for causal, the blocks crossing the diagonal.
#include <cfloat>

#include "cuda/common/mma.cuh"
#include "cuda/common/aux_kernels.h"

namespace int8attn {
namespace {

__global__ void pool_kernel(const void* x, Operand4 op, DType dtype, int N, int D, int H, int block,
                            int nblocks, float* out) {
  const int blk = blockIdx.x, bh = blockIdx.y;
  const int b = bh / H, h = bh % H;
  const int i0 = blk * block, i1 = min(N, i0 + block);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float s = 0.f;
    for (int i = i0; i < i1; ++i)
      s += dev::load_as_float(x,
                              b * op.stride[0] + h * op.stride[1] +
                                  static_cast<int64_t>(i) * op.stride[2] + d * op.stride[3],
                              dtype);
    out[(static_cast<int64_t>(bh) * nblocks + blk) * D + d] = s / static_cast<float>(i1 - i0);
  }
}

__global__ void select_kernel(const MaskProblem p, const float* qp, const float* kp) {
  extern __shared__ float sh[];
  float* score = sh;                // [nkb]
  float* mass_sorted = sh + p.nkb;  // [nkb]
  int* rank = reinterpret_cast<int*>(sh + 2 * p.nkb);
  const int qb = blockIdx.x, bh = blockIdx.y;
  const int b = bh / p.Hq, h = bh % p.Hq, hkv = h / (p.Hq / p.Hkv);
  const int nkb = static_cast<int>(p.nkb);
  const int64_t shift = p.Nk - p.Nq;  // causal: bottom-right aligned
  const int64_t row_lo = static_cast<int64_t>(qb) * p.q_block;
  const int64_t row_hi = (p.Nq - 1 < row_lo + p.q_block - 1) ? p.Nq - 1 : row_lo + p.q_block - 1;
  const float* q = qp + (static_cast<int64_t>(bh) * p.nqb + qb) * p.D;
  for (int kb = threadIdx.x; kb < nkb; kb += blockDim.x) {
    const float* k = kp + ((static_cast<int64_t>(b) * p.Hkv + hkv) * p.nkb + kb) * p.D;
    float s = 0.f;
    for (int d = 0; d < p.D; ++d) s += q[d] * k[d];
    const bool above = p.causal && static_cast<int64_t>(kb) * p.k_block > row_hi + shift;
    score[kb] = above ? -INFINITY : s * p.sm_scale;
  }
  __syncthreads();
  __shared__ float s_max, s_sum;
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    for (int kb = 0; kb < nkb; ++kb) m = fmaxf(m, score[kb]);
    float sum = 0.f;
    for (int kb = 0; kb < nkb; ++kb) sum += score[kb] == -INFINITY ? 0.f : __expf(score[kb] - m);
    s_max = m;
    s_sum = sum;
  }
  __syncthreads();
  for (int kb = threadIdx.x; kb < nkb; kb += blockDim.x) {
    int r = 0;
    for (int o = 0; o < nkb; ++o) r += (score[o] > score[kb]) || (score[o] == score[kb] && o < kb);
    rank[kb] = r;
    mass_sorted[r] = score[kb] == -INFINITY ? 0.f : __expf(score[kb] - s_max) / s_sum;
  }
  __syncthreads();
  const int keep_count =
      p.keep_ratio > 0.f ? static_cast<int>(ceilf(p.keep_ratio * static_cast<float>(nkb))) : 0;
  for (int kb = threadIdx.x; kb < nkb; kb += blockDim.x) {
    bool keep;
    if (p.keep_ratio > 0.f) {
      keep = rank[kb] < keep_count;
    } else {
      float before = 0.f;
      for (int r = 0; r < rank[kb]; ++r) before += mass_sorted[r];
      keep = before < p.threshold;
    }
    if (score[kb] == -INFINITY) keep = false;
    if (kb == 0) keep = true;
    if (p.causal) {
      const int64_t lo = (row_lo + shift) / p.k_block, hi = (row_hi + shift) / p.k_block;
      if (kb >= lo && kb <= hi) keep = true;
    }
    p.mask[b * p.mask_stride[0] + h * p.mask_stride[1] + qb * p.mask_stride[2] +
           kb * p.mask_stride[3]] = keep ? 1 : 0;
  }
}

}  // namespace

int64_t block_mask_workspace_floats(const MaskProblem& p) {
  return (p.B * p.Hq * p.nqb + p.B * p.Hkv * p.nkb) * p.D;
}

cudaError_t launch_predict_block_mask(const MaskProblem& p, float* ws, cudaStream_t s) {
  float* qp = ws;
  float* kp = ws + p.B * p.Hq * p.nqb * p.D;
  pool_kernel<<<dim3(p.nqb, p.B * p.Hq), 128, 0, s>>>(p.q.data, p.q, p.dtype, p.Nq, p.D, p.Hq,
                                                      p.q_block, p.nqb, qp);
  pool_kernel<<<dim3(p.nkb, p.B * p.Hkv), 128, 0, s>>>(p.k.data, p.k, p.dtype, p.Nk, p.D, p.Hkv,
                                                       p.k_block, p.nkb, kp);
  const size_t smem = p.nkb * (2 * sizeof(float) + sizeof(int));
  if (smem > 48 * 1024) return cudaErrorInvalidValue;  // > 4096 key blocks: not supported
  select_kernel<<<dim3(p.nqb, p.B * p.Hq), 256, smem, s>>>(p, qp, kp);
  return cudaGetLastError();
}

}  // namespace int8attn
