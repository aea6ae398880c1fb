// K/V preparation: statistics, reduction to means/scales, and quantization into the canonical
// layouts the attention kernel reads (see prepare_kv.h and attention_params.h). The maths is
// src/common/quant_math.h, the same the CPU backend uses.
#include "kernels/prepare_kv.h"

#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "common/quant_math.h"
#include "device/atomics.cuh"
#include "device/mma.cuh"
#include "device/pdl.cuh"
#include "host/launch.h"
#include "kernels/attention_params.h"
#include "kernels/prepare_kv_common.cuh"

namespace int8attn {
namespace {

using prep::kStats;  // accumulators per channel: sumK, maxK, minK, sumV, maxV, minV
using prep::valid_tokens;

constexpr int kChunk = 64;     // tokens per statistics CTA / quantization tile
constexpr int kThreads = 128;  // quantization CTA
constexpr int kStatsThreads = 256;

__device__ __forceinline__ int64_t src_offset(const int64_t (&s)[4], int b, int h, int j, int d) {
  return b * s[0] + h * s[1] + static_cast<int64_t>(j) * s[2] + d * s[3];
}

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

// Per-channel sum / max / min of K and V over a range of tokens of one canonical head: 8 warps
// take every 8th token, lanes take channels, loads are independent; a shared-memory reduction
// over the warps, then one atomic per channel and statistic into the head's accumulators. The
// host sizes the ranges so the grid is a few CTAs per SM: few atomics per address.
template <typename T>
__global__ void __launch_bounds__(kStatsThreads) kv_stats_kernel(const KvPrepParams p,
                                                                 int tokens_per_cta) {
  dev::chain_kernels();
  const T* K = static_cast<const T*>(p.k);
  const T* V = static_cast<const T*>(p.v);
  extern __shared__ float s_red[];  // [8 warps][kStats][dpad]
  const int head = blockIdx.y;
  const int b = head / p.heads_h, h = head % p.heads_h;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int j0 = blockIdx.x * tokens_per_cta;
  const int j1 = min(j0 + tokens_per_cta, valid_tokens(p, b));
  const int per_lane = p.dpad / 32;
  float sk[8], mxk[8], mnk[8], sv[8], mxv[8], mnv[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    sk[c] = sv[c] = 0.f;
    mxk[c] = mxv[c] = -INFINITY;
    mnk[c] = mnv[c] = INFINITY;
  }
  for (int j = j0 + warp; j < j1; j += 8) {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const int d = c * 32 + lane;
      if (c < per_lane && d < p.D) {
        const float kx = dev::to_float(K[src_offset(p.k_stride, b, h, j, d)]);
        const float vx = dev::to_float(V[src_offset(p.v_stride, b, h, j, d)]);
        sk[c] += kx;
        mxk[c] = fmaxf(mxk[c], kx);
        mnk[c] = fminf(mnk[c], kx);
        sv[c] += vx;
        mxv[c] = fmaxf(mxv[c], vx);
        mnv[c] = fminf(mnv[c], vx);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    if (c >= per_lane) continue;
    float* r = s_red + (warp * kStats) * p.dpad + c * 32 + lane;
    r[0 * p.dpad] = sk[c];
    r[1 * p.dpad] = mxk[c];
    r[2 * p.dpad] = mnk[c];
    r[3 * p.dpad] = sv[c];
    r[4 * p.dpad] = mxv[c];
    r[5 * p.dpad] = mnv[c];
  }
  __syncthreads();
  if (j0 >= j1) return;  // an empty range contributes nothing (after the barrier)
  float* acc = p.partials + static_cast<int64_t>(head) * (kStats + 1) * p.dpad;
  for (int e = threadIdx.x; e < kStats * p.D; e += blockDim.x) {
    const int stat = e / p.D, d = e % p.D;
    float v = s_red[stat * p.dpad + d];
    for (int w = 1; w < 8; ++w) {
      const float x = s_red[(w * kStats + stat) * p.dpad + d];
      v = (stat == 1 || stat == 4) ? fmaxf(v, x) : ((stat == 2 || stat == 5) ? fminf(v, x) : v + x);
    }
    float* a = acc + stat * p.dpad + d;
    if (stat == 1 || stat == 4) dev::atomic_max_float(a, v);
    else if (stat == 2 || stat == 5) dev::atomic_min_float(a, v);
    else atomicAdd(a, v);
  }
}

// max |q| per channel over a range of query rows of the q-heads (and batches) of a canonical head.
template <typename T>
__global__ void __launch_bounds__(kStatsThreads) q_stats_kernel(const KvPrepParams p,
                                                                int rows_per_cta) {
  dev::chain_kernels();
  const T* Q = static_cast<const T*>(p.q);
  __shared__ float s_max[8][256];
  const int head = blockIdx.y;
  const int b = head / p.heads_h, hkv = head % p.heads_h;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i0 = blockIdx.x * rows_per_cta, i1 = min(i0 + rows_per_cta, p.Nq);
  const int per_lane = p.dpad / 32;
  float m[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) m[c] = 0.f;
  for (int qb = 0; qb < p.q_batches; ++qb) {
    const int bq = p.q_batches > 1 ? qb : b;
    for (int g = 0; g < p.G; ++g)
      for (int i = i0 + warp; i < i1; i += 8)
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const int d = c * 32 + lane;
          if (c < per_lane && d < p.D)
            m[c] = fmaxf(m[c], fabsf(dev::to_float(Q[src_offset(p.q_stride, bq, hkv * p.G + g, i, d)])));
        }
  }
#pragma unroll
  for (int c = 0; c < 8; ++c)
    if (c < per_lane) s_max[warp][c * 32 + lane] = m[c];
  __syncthreads();
  float* acc = p.partials + (static_cast<int64_t>(head) * (kStats + 1) + kStats) * p.dpad;
  for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
    float x = s_max[0][d];
    for (int w = 1; w < 8; ++w) x = fmaxf(x, s_max[w][d]);
    atomicMax(reinterpret_cast<int*>(acc + d), __float_as_int(x));  // x >= 0: int order works
  }
}

// Means, V scales and balancing factors per canonical head and channel.
__global__ void kv_finalize_kernel(const KvPrepParams p) {
  dev::chain_kernels();
  const int head = blockIdx.x;
  const int valid = valid_tokens(p, head / p.heads_h);
  const float* in = p.partials + static_cast<int64_t>(head) * (kStats + 1) * p.dpad;
  for (int d = threadIdx.x; d < p.dpad; d += blockDim.x)
    prep::finalize_channel(p, head, d, valid, [&](int s) { return in[s * p.dpad + d]; },
                           in[kStats * p.dpad + d], /*write_out=*/true);
}

// Quantize one 64-token tile of one canonical head into the canonical layouts. Each warp
// owns 16 tokens and works on 4 at a time with their K and V values held in registers (lanes
// over channels, up to 8 channels each), so one read of K and V feeds both the scales and the
// quantized values. Per-block K scales need the tile's absmax first: one extra pass then.
template <typename T>
__global__ void __launch_bounds__(kThreads) kv_quantize_kernel(const KvPrepParams p) {
  dev::chain_kernels();
  const T* K = static_cast<const T*>(p.k);
  const T* V = static_cast<const T*>(p.v);
  extern __shared__ __align__(16) uint8_t s_vt[];  // FAST: [64 tokens][dpad] E4M3 staging
  __shared__ float s_warp_max[kThreads / 32];
  const int tile = blockIdx.x, head = blockIdx.y;
  const int b = head / p.heads_h, h = head % p.heads_h;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int valid = valid_tokens(p, b);
  const int64_t hoff = static_cast<int64_t>(head) * p.dpad;
  const int per_lane = p.dpad / 32;  // dpad is a multiple of 32, at most 256
  const bool quant = p.mode != 1;

  // Per-channel constants of this head, for this lane's channels.
  float mu_k[8], alpha[8], mu_v[8], inv_sv[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const int d = c * 32 + lane;
    const bool live = c < per_lane && d < p.D && quant;
    mu_k[c] = live && p.k_mean != nullptr ? p.k_mean[hoff + d] : 0.f;
    alpha[c] = live && p.alpha != nullptr ? p.alpha[hoff + d] : 1.f;
    mu_v[c] = live ? p.v_mean[hoff + d] : 0.f;
    inv_sv[c] = live ? 1.0f / p.v_scale[hoff + d] : 0.f;
  }

  float tile_amax = 0.f;
  if (quant && !p.k_per_token) {
    for (int r = 0; r < 16; ++r) {
      const int j = tile * kChunk + warp * 16 + r;
      float amax = 0.f;
      if (j < valid) {
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const int d = c * 32 + lane;
          if (c < per_lane && d < p.D)
            amax = fmaxf(amax, fabsf((dev::to_float(K[src_offset(p.k_stride, b, h, j, d)]) -
                                      mu_k[c]) * alpha[c]));
        }
      }
      tile_amax = fmaxf(tile_amax, amax);
    }
    for (int o = 16; o > 0; o >>= 1)
      tile_amax = fmaxf(tile_amax, __shfl_xor_sync(0xffffffffu, tile_amax, o));
    if (lane == 0) s_warp_max[warp] = tile_amax;
    __syncthreads();
    tile_amax = fmaxf(fmaxf(s_warp_max[0], s_warp_max[1]), fmaxf(s_warp_max[2], s_warp_max[3]));
  }

  for (int r0 = 0; r0 < 16; r0 += 4) {
    float kx[4][8], vx[4][8];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int j = tile * kChunk + warp * 16 + r0 + u;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int d = c * 32 + lane;
        const bool live = j < p.n && c < per_lane && d < p.D;
        kx[u][c] = live ? dev::to_float(K[src_offset(p.k_stride, b, h, j, d)]) : 0.f;
        vx[u][c] = live ? dev::to_float(V[src_offset(p.v_stride, b, h, j, d)]) : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int jl = warp * 16 + r0 + u;
      const int j = tile * kChunk + jl;
      const int64_t dk = p.key_offset + j;
      const bool in_src = j < p.n;
      float amax = 0.f;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        kx[u][c] = (kx[u][c] - mu_k[c]) * alpha[c];
        amax = fmaxf(amax, fabsf(kx[u][c]));
      }
      for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      if ((!in_src && !p.fill_tail) || dk >= p.nk_pad) continue;  // warp-uniform
      const int64_t krow = static_cast<int64_t>(head) * p.nk_pad + dk;
      if (!quant) {
        // EXACT: plain copies in the input dtype (2-byte elements), zero padding.
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
      const float scale = qm::int8_scale(p.k_per_token ? amax : tile_amax, p.k_multiplier);
      const float inv = 1.0f / scale;
      int8_t* ko = static_cast<int8_t*>(p.k_out) + krow * p.dpad;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int d = c * 32 + lane;
        if (c < per_lane) ko[d] = (in_src && d < p.D) ? qm::quantize_int8(kx[u][c], inv) : int8_t(0);
      }
      if (lane == 0) p.k_scale[krow] = in_src ? scale : 1.0f;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int d = c * 32 + lane;
        if (c >= per_lane) continue;
        const float y = (in_src && d < p.D) ? (vx[u][c] - mu_v[c]) * inv_sv[c] : 0.f;
        if (p.mode == 3) {
          s_vt[jl * p.dpad + d] =
              static_cast<uint8_t>(__nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3));
        } else {
          static_cast<__half*>(p.v_out)[krow * p.dpad + d] = __float2half_rn(y);
        }
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
  (void)n;
  (void)nq;
  return static_cast<int64_t>(heads) * (kStats + 1) * dpad;
}

namespace {

// The statistics into p.partials (filled with the identities first), without the finalize.
cudaError_t launch_kv_stats(const KvPrepParams& p, cudaStream_t stream) {
  const int heads = p.heads_b * p.heads_h;
  const int64_t total = kv_stats_partial_floats(heads, p.n, p.Nq, p.dpad);
  const int fill_blocks = static_cast<int>(std::min<int64_t>((total + 255) / 256, 1024));
  cudaError_t err = launch_kernel(stats_fill_kernel, dim3(fill_blocks), dim3(256), 0, stream,
                                  false, p.partials, heads, p.dpad);
  if (err != cudaSuccess) return err;

  const int nchunks = (p.n + kChunk - 1) / kChunk;
  const bool want_q = p.balance && p.Nq > 0;
  const int qchunks = want_q ? (p.Nq + kChunk - 1) / kChunk : 0;
  const bool kv_vec = nchunks > 0 && kv_prep_vectorizable(p);
  const bool q_vec = want_q && q_stats_vectorizable(p);
  // A few CTAs per SM in all: enough loads in flight, few atomics per accumulator.
  const int target = 4 * std::max(p.sm_count, 1);
  const int general_per_head = std::max(1, (target + heads - 1) / heads);
  int kv_per_head = std::min(nchunks, general_per_head);
  const int q_per_head = std::min(qchunks, general_per_head);
  // The 16-byte K/V statistics: at most one wave of CTAs (a partial second wave of these short
  // CTAs costs as much as a full one: flux_1024px's 1.09 waves took 48 us).
  const int sms = std::max(p.sm_count, 1);
  if (kv_vec)
    kv_per_head = std::min(nchunks, std::max(1, stats_vec_ctas_per_sm(true, false) * sms / heads));
  const int tokens = nchunks > 0 ? (nchunks + kv_per_head - 1) / kv_per_head * kChunk : 0;
  const int rows = qchunks > 0 ? (qchunks + q_per_head - 1) / q_per_head * kChunk : 0;
  // Small problems: K/V and Q statistics in one launch when all their 64-row chunks fit in one
  // wave together (one launch fewer; sd15_l3_cfg, NOTES run 31). Larger ones keep two launches,
  // each sized for its own occupancy (splitting one wave between them was slower at flux).
  if (kv_vec && q_vec && nchunks + qchunks <= stats_vec_ctas_per_sm(true, true) * sms / heads) {
    err = launch_stats_vec(p, kChunk, kChunk, stream, p.chain);
  } else {
    if (kv_vec) err = launch_stats_vec(p, tokens, 0, stream, p.chain);
    if (err == cudaSuccess && q_vec) err = launch_stats_vec(p, 0, rows, stream, p.chain);
  }
  if (err == cudaSuccess && nchunks > 0 && !kv_vec) {
    const size_t smem = static_cast<size_t>(8) * kStats * p.dpad * sizeof(float);
    err = dev::dispatch_dtype(p.dtype, [&](auto t) {
      return launch_kernel(kv_stats_kernel<decltype(t)>, dim3((p.n + tokens - 1) / tokens, heads),
                           dim3(kStatsThreads), smem, stream, p.chain, p, tokens);
    });
  }
  if (err == cudaSuccess && want_q && !q_vec) {
    err = dev::dispatch_dtype(p.dtype, [&](auto t) {
      return launch_kernel(q_stats_kernel<decltype(t)>, dim3((p.Nq + rows - 1) / rows, heads),
                           dim3(kStatsThreads), 0, stream, p.chain, p, rows);
    });
  }
  return err;
}

}  // namespace

cudaError_t launch_kv_stats_reduce(const KvPrepParams& p, cudaStream_t stream) {
  const cudaError_t err = launch_kv_stats(p, stream);
  if (err != cudaSuccess) return err;
  return launch_kernel(kv_finalize_kernel, dim3(p.heads_b * p.heads_h), dim3(256), 0, stream,
                       p.chain, p);
}

cudaError_t launch_kv_prepare(const KvPrepParams& p, cudaStream_t stream) {
  if (p.mode == 1) return launch_kv_quantize(p, stream, false);  // EXACT: copies, no statistics
  // The 16-byte quantization kernel can finalize the statistics itself (no finalize launch),
  // but then every one of its CTAs redoes its head's finalize: worth it only while the grid is
  // one wave (2 CTAs per SM are resident at any head dim). With many tiles per head the repeats
  // cost more than the launch (decode with 32K keys: +5% end-to-end, NOTES run 31).
  const int64_t tiles = (p.nk_pad - p.key_offset + kChunk - 1) / kChunk;
  if (kv_prep_vectorizable(p) && p.fill_tail &&
      tiles * p.heads_b * p.heads_h <= 2 * static_cast<int64_t>(std::max(p.sm_count, 1))) {
    const cudaError_t err = launch_kv_stats(p, stream);
    if (err != cudaSuccess) return err;
    KvPrepParams q = p;
    q.consts_from_partials = true;
    return launch_kv_quantize_vec(q, stream, p.chain);
  }
  const cudaError_t err = launch_kv_stats_reduce(p, stream);
  if (err != cudaSuccess) return err;
  return launch_kv_quantize(p, stream, true);
}

cudaError_t launch_kv_quantize(const KvPrepParams& p, cudaStream_t stream, bool after_kernel) {
  const bool early = p.chain && after_kernel;
  if (kv_prep_vectorizable(p)) return launch_kv_quantize_vec(p, stream, early);
  const int heads = p.heads_b * p.heads_h;
  // A forward fills the whole padded buffer (zero tails); an append writes its tokens only.
  const int64_t keys = p.fill_tail ? p.nk_pad - p.key_offset : p.n;
  const int tiles = static_cast<int>((keys + kChunk - 1) / kChunk);
  const size_t smem = p.mode == 3 ? static_cast<size_t>(kChunk) * p.dpad : 0;
  return dev::dispatch_dtype(p.dtype, [&](auto t) {
    return launch_kernel(kv_quantize_kernel<decltype(t)>, dim3(tiles, heads), dim3(kThreads), smem,
                         stream, early, p);
  });
}

}  // namespace int8attn
