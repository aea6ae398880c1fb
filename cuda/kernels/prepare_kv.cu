// K/V preparation: statistics, reduction to means/scales, and quantization into the canonical
// layouts the attention kernel reads (see prepare_kv.h and attention_params.h). The maths is
// src/common/quant_math.h, the same the CPU backend uses.
#include "kernels/prepare_kv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "common/quant_math.h"
#include "device/mma.cuh"
#include "kernels/attention_params.h"

namespace int8attn {
namespace {

constexpr int kChunk = 64;     // tokens per statistics chunk / quantization tile
constexpr int kThreads = 128;
constexpr int kStatsPerChunk = 6;  // sumK, maxK, minK, sumV, maxV, minV

__device__ __forceinline__ int valid_tokens(const KvPrepParams& p, int b) {
  if (p.k_lengths == nullptr) return p.n;
  const int v = p.k_lengths[b * p.k_lengths_stride];
  return v < 0 ? 0 : (v > p.n ? p.n : v);
}

__device__ __forceinline__ int64_t src_offset(const int64_t (&s)[4], int b, int h, int j, int d) {
  return b * s[0] + h * s[1] + static_cast<int64_t>(j) * s[2] + d * s[3];
}

// Per-channel partial statistics of K and V over one 64-token chunk of one canonical head.
__global__ void kv_stats_kernel(const KvPrepParams p, int nchunks) {
  const int chunk = blockIdx.x, head = blockIdx.y;
  const int b = head / p.heads_h, h = head % p.heads_h;
  const int valid = valid_tokens(p, b);
  const int j0 = chunk * kChunk, j1 = min(j0 + kChunk, valid);
  float* out = p.partials + (static_cast<int64_t>(head) * nchunks + chunk) * kStatsPerChunk * p.dpad;
  for (int d = threadIdx.x; d < p.dpad; d += blockDim.x) {
    float sk = 0.f, mxk = -INFINITY, mnk = INFINITY, sv = 0.f, mxv = -INFINITY, mnv = INFINITY;
    if (d < p.D) {
      for (int j = j0; j < j1; ++j) {
        const float kx = dev::load_as_float(p.k, src_offset(p.k_stride, b, h, j, d), p.dtype);
        const float vx = dev::load_as_float(p.v, src_offset(p.v_stride, b, h, j, d), p.dtype);
        sk += kx;
        mxk = fmaxf(mxk, kx);
        mnk = fminf(mnk, kx);
        sv += vx;
        mxv = fmaxf(mxv, vx);
        mnv = fminf(mnv, vx);
      }
    }
    out[0 * p.dpad + d] = sk;
    out[1 * p.dpad + d] = mxk;
    out[2 * p.dpad + d] = mnk;
    out[3 * p.dpad + d] = sv;
    out[4 * p.dpad + d] = mxv;
    out[5 * p.dpad + d] = mnv;
  }
}

// Per-channel max |q| over one 64-row chunk of the q-heads (and batches) of one canonical head.
__global__ void q_stats_kernel(const KvPrepParams p, int nqchunks, float* out_base) {
  const int chunk = blockIdx.x, head = blockIdx.y;
  const int b = head / p.heads_h, hkv = head % p.heads_h;
  const int i0 = chunk * kChunk, i1 = min(i0 + kChunk, p.Nq);
  float* out = out_base + (static_cast<int64_t>(head) * nqchunks + chunk) * p.dpad;
  for (int d = threadIdx.x; d < p.dpad; d += blockDim.x) {
    float m = 0.f;
    if (d < p.D) {
      for (int qb = 0; qb < p.q_batches; ++qb) {
        const int bq = p.q_batches > 1 ? qb : b;
        for (int g = 0; g < p.G; ++g)
          for (int i = i0; i < i1; ++i)
            m = fmaxf(m, fabsf(dev::load_as_float(
                             p.q, src_offset(p.q_stride, bq, hkv * p.G + g, i, d), p.dtype)));
      }
    }
    out[d] = m;
  }
}

// Means, V scales and balancing factors per canonical head and channel.
__global__ void kv_reduce_kernel(const KvPrepParams p, int nchunks, int nqchunks,
                                 const float* q_partials) {
  const int head = blockIdx.x;
  const int b = head / p.heads_h;
  const int valid = valid_tokens(p, b);
  for (int d = threadIdx.x; d < p.dpad; d += blockDim.x) {
    float sk = 0.f, mxk = -INFINITY, mnk = INFINITY, sv = 0.f, mxv = -INFINITY, mnv = INFINITY;
    const float* in = p.partials + static_cast<int64_t>(head) * nchunks * kStatsPerChunk * p.dpad;
    for (int c = 0; c < nchunks; ++c, in += kStatsPerChunk * p.dpad) {
      sk += in[0 * p.dpad + d];
      mxk = fmaxf(mxk, in[1 * p.dpad + d]);
      mnk = fminf(mnk, in[2 * p.dpad + d]);
      sv += in[3 * p.dpad + d];
      mxv = fmaxf(mxv, in[4 * p.dpad + d]);
      mnv = fminf(mnv, in[5 * p.dpad + d]);
    }
    const bool any = valid > 0 && d < p.D;
    const float mk = (any && p.smooth_k) ? sk / static_cast<float>(valid) : 0.f;
    const float mv = (any && p.smooth_v) ? sv / static_cast<float>(valid) : 0.f;
    const int64_t o = static_cast<int64_t>(head) * p.dpad + d;
    if (p.k_mean != nullptr) p.k_mean[o] = mk;
    if (p.mode != 1) {
      p.v_mean[o] = mv;
      const float vabs = any ? fmaxf(mxv - mv, mv - mnv) : 0.f;
      p.v_scale[o] = qm::v_scale(vabs, p.mode == 3, p.v_headroom);
    }
    if (p.alpha != nullptr) {
      float qabs = 0.f;
      for (int c = 0; c < nqchunks; ++c)
        qabs = fmaxf(qabs, q_partials[(static_cast<int64_t>(head) * nqchunks + c) * p.dpad + d]);
      const float kabs = any ? fmaxf(mxk - mk, mk - mnk) : 0.f;
      p.alpha[o] = qm::balance_factor(qabs, kabs);
    }
  }
}

// Quantize one 64-token tile of one canonical head into the canonical layouts.
__global__ void kv_quantize_kernel(const KvPrepParams p) {
  extern __shared__ __align__(16) uint8_t s_vt[];  // FAST: [64 tokens][dpad] E4M3 staging
  __shared__ float s_warp_max[4];
  const int tile = blockIdx.x, head = blockIdx.y;
  const int b = head / p.heads_h, h = head % p.heads_h;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int valid = valid_tokens(p, b);
  const int64_t hoff = static_cast<int64_t>(head) * p.dpad;
  const int per_lane = p.dpad / 32;  // dpad is a multiple of 32, at most 256

  // K: pass 1 computes each token's absmax (and the tile's, for per-block scales).
  float tok_amax[16];
  float tile_amax = 0.f;
  for (int r = 0; r < 16; ++r) {
    const int j = tile * kChunk + warp * 16 + r;
    float amax = 0.f;
    if (j < p.n && p.mode != 1) {
      for (int c = 0; c < per_lane; ++c) {
        const int d = c * 32 + lane;
        if (d < p.D) {
          float x = dev::load_as_float(p.k, src_offset(p.k_stride, b, h, j, d), p.dtype);
          x -= p.k_mean != nullptr ? p.k_mean[hoff + d] : 0.f;
          if (p.alpha != nullptr) x *= p.alpha[hoff + d];
          amax = fmaxf(amax, fabsf(x));
        }
      }
      for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    }
    tok_amax[r] = amax;
    if (j < valid) tile_amax = fmaxf(tile_amax, amax);
  }
  if (!p.k_per_token) {
    if (lane == 0) s_warp_max[warp] = tile_amax;
    __syncthreads();
    tile_amax = fmaxf(fmaxf(s_warp_max[0], s_warp_max[1]), fmaxf(s_warp_max[2], s_warp_max[3]));
  }

  // Pass 2: write K, V (tokens past n are zero padding in a forward's buffers).
  for (int r = 0; r < 16; ++r) {
    const int jl = warp * 16 + r;
    const int j = tile * kChunk + jl;
    const int64_t dk = p.key_offset + j;
    const bool in_src = j < p.n;
    if (!in_src && !p.fill_tail) continue;  // cache append: only the new tokens
    if (dk >= p.nk_pad) continue;
    const int64_t krow = static_cast<int64_t>(head) * p.nk_pad + dk;
    if (p.mode == 1) {
      // EXACT: plain copies in the input dtype (2-byte elements).
      uint16_t* ko = static_cast<uint16_t*>(p.k_out) + krow * p.dpad;
      uint16_t* vo = static_cast<uint16_t*>(p.v_out) + krow * p.dpad;
      const uint16_t* ks = static_cast<const uint16_t*>(p.k);
      const uint16_t* vs = static_cast<const uint16_t*>(p.v);
      for (int c = 0; c < per_lane; ++c) {
        const int d = c * 32 + lane;
        const bool live = in_src && d < p.D;
        ko[d] = live ? ks[src_offset(p.k_stride, b, h, j, d)] : uint16_t(0);
        vo[d] = live ? vs[src_offset(p.v_stride, b, h, j, d)] : uint16_t(0);
      }
      continue;
    }
    const float scale = qm::int8_scale(p.k_per_token ? tok_amax[r] : tile_amax, p.k_multiplier);
    const float inv = 1.0f / scale;
    int8_t* ko = static_cast<int8_t*>(p.k_out) + krow * p.dpad;
    for (int c = 0; c < per_lane; ++c) {
      const int d = c * 32 + lane;
      int8_t qv = 0;
      if (in_src && d < p.D) {
        float x = dev::load_as_float(p.k, src_offset(p.k_stride, b, h, j, d), p.dtype);
        x -= p.k_mean != nullptr ? p.k_mean[hoff + d] : 0.f;
        if (p.alpha != nullptr) x *= p.alpha[hoff + d];
        qv = qm::quantize_int8(x, inv);
      }
      ko[d] = qv;
    }
    if (lane == 0) p.k_scale[krow] = in_src ? scale : 1.0f;
    for (int c = 0; c < per_lane; ++c) {
      const int d = c * 32 + lane;
      float y = 0.f;
      if (in_src && d < p.D) {
        const float vx = dev::load_as_float(p.v, src_offset(p.v_stride, b, h, j, d), p.dtype);
        y = (vx - p.v_mean[hoff + d]) / p.v_scale[hoff + d];
      }
      if (p.mode == 3) {
        s_vt[jl * p.dpad + d] = static_cast<uint8_t>(
            __nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3));
      } else {
        static_cast<__half*>(p.v_out)[krow * p.dpad + d] = __float2half_rn(y);
      }
    }
  }
  if (p.mode == 3) {
    // Transposed, key-permuted FP8 V: row d holds the keys of this head at logical positions.
    __syncthreads();
    uint8_t* vo = static_cast<uint8_t*>(p.v_out) + static_cast<int64_t>(head) * p.dpad * p.nk_pad;
    for (int e = threadIdx.x; e < p.dpad * kChunk; e += blockDim.x) {
      const int d = e / kChunk, jl = e % kChunk;
      const int j = tile * kChunk + jl;
      if (j >= p.n && !p.fill_tail) continue;
      const int64_t dk = p.key_offset + j;
      if (dk >= p.nk_pad) continue;
      const int64_t col = (dk & ~int64_t(31)) + fp8_v_logical_position(static_cast<int>(dk & 31));
      vo[d * p.nk_pad + col] = s_vt[jl * p.dpad + d];
    }
  }
}

}  // namespace

int64_t kv_stats_partial_floats(int heads, int n, int nq, int dpad) {
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  const int64_t nqchunks = (nq + kChunk - 1) / kChunk;
  return static_cast<int64_t>(heads) * (nchunks * kStatsPerChunk + nqchunks) * dpad;
}

cudaError_t launch_kv_stats_reduce(const KvPrepParams& p, cudaStream_t stream) {
  const int heads = p.heads_b * p.heads_h;
  const int nchunks = (p.n + kChunk - 1) / kChunk;
  const int nqchunks = p.balance ? (p.Nq + kChunk - 1) / kChunk : 0;
  float* q_partials = p.partials + static_cast<int64_t>(heads) * nchunks * kStatsPerChunk * p.dpad;
  if (nchunks > 0) {
    kv_stats_kernel<<<dim3(nchunks, heads), kThreads, 0, stream>>>(p, nchunks);
  }
  if (p.balance && nqchunks > 0) {
    q_stats_kernel<<<dim3(nqchunks, heads), kThreads, 0, stream>>>(p, nqchunks, q_partials);
  }
  kv_reduce_kernel<<<heads, 256, 0, stream>>>(p, nchunks, nqchunks, q_partials);
  return cudaGetLastError();
}

cudaError_t launch_kv_quantize(const KvPrepParams& p, cudaStream_t stream) {
  const int heads = p.heads_b * p.heads_h;
  // A forward fills the whole padded buffer (zero tails); an append writes its tokens only.
  const int64_t keys = p.fill_tail ? p.nk_pad - p.key_offset : p.n;
  const int tiles = static_cast<int>((keys + kChunk - 1) / kChunk);
  const size_t smem = p.mode == 3 ? static_cast<size_t>(kChunk) * p.dpad : 0;
  kv_quantize_kernel<<<dim3(tiles, heads), kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace int8attn
