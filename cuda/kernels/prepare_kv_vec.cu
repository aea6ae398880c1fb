// The fast path of K/V preparation: fp16/bf16 K and V whose channels are contiguous and whose
// rows start on 16-byte boundaries (HND, NHD and most framework layouts). Each thread moves 16
// bytes (8 channels of one token) per load or store, several rows at a time, so enough bytes are
// in flight to stream K and V at memory bandwidth; per-token and per-channel reductions go
// through shared-memory atomics. Same maths and outputs as the general kernels in prepare_kv.cu
// (see prepare_kv.h), which serve any other strides.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <atomic>
#include <cstdint>

#include "common/quant_math.h"
#include "device/atomics.cuh"
#include "device/mma.cuh"
#include "kernels/attention_params.h"
#include "kernels/prepare_kv.h"

namespace int8attn {
namespace {

constexpr int kThreads = 256;
constexpr int kTokens = 64;         // tokens per quantization tile
constexpr int kMaxItems = 8;        // (token, 8-channel chunk) items per thread: 64·256/8/256
constexpr int kStats = 6;           // sumK, maxK, minK, sumV, maxV, minV (as prepare_kv.cu)

__device__ __forceinline__ int valid_tokens(const KvPrepParams& p, int b) {
  if (p.k_lengths == nullptr) return p.n;
  const int v = p.k_lengths[b * p.k_lengths_stride];
  return v < 0 ? 0 : (v > p.n ? p.n : v);
}

__device__ __forceinline__ int64_t row_offset(const int64_t (&s)[4], int b, int h, int j) {
  return b * s[0] + h * s[1] + static_cast<int64_t>(j) * s[2];
}

// 16 bytes = 8 channels. Loads are separate from their conversion on purpose: every kernel
// here issues all of a thread's loads for a step before it uses any of them, from addresses
// that are always readable (clamped to a valid row, the value then ignored). A load whose value
// is used inside the same bounds-check branch is waited for before the next one is issued,
// which made these kernels latency-bound at ~25% of DRAM bandwidth (NOTES run 24).
template <typename T>
__device__ __forceinline__ uint4 load16(const T* src) {
  return *reinterpret_cast<const uint4*>(src);
}

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& raw, float (&x)[8]) {
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = dev::to_float(e[i]);
}

// Per-channel statistics over a token range: thread (row r, chunk c) walks rows r, r+steps, ...
template <typename T>
__global__ void __launch_bounds__(kThreads) kv_stats_vec_kernel(const KvPrepParams p,
                                                                int tokens_per_cta) {
  __shared__ float s_acc[kStats][256];
  const T* K = static_cast<const T*>(p.k);
  const T* V = static_cast<const T*>(p.v);
  const int head = blockIdx.y, b = head / p.heads_h, h = head % p.heads_h;
  for (int e = threadIdx.x; e < kStats * 256; e += kThreads) {
    const int stat = e / 256;
    s_acc[stat][e % 256] = (stat == 1 || stat == 4) ? -INFINITY
                           : (stat == 2 || stat == 5) ? INFINITY : 0.f;
  }
  __syncthreads();
  const int cpr = p.D / 8, steps = kThreads / cpr;
  const int c = threadIdx.x % cpr, r = threadIdx.x / cpr;
  const int j0 = blockIdx.x * tokens_per_cta;
  const int j1 = min(j0 + tokens_per_cta, valid_tokens(p, b));
  if (r < steps && j0 < j1) {
    float sk[8], mxk[8], mnk[8], sv[8], mxv[8], mnv[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      sk[i] = sv[i] = 0.f;
      mxk[i] = mxv[i] = -INFINITY;
      mnk[i] = mnv[i] = INFINITY;
    }
    constexpr int kUnroll = 4;  // rows per step, loaded from clamped addresses before any use
                                // (ptxas still sinks some next to their uses: NOTES run 26)
    for (int j = j0 + r; j < j1; j += kUnroll * steps) {
      uint4 kr[kUnroll], vr[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int jj = j + u * steps < j1 ? j + u * steps : j;
        kr[u] = load16(K + row_offset(p.k_stride, b, h, jj) + c * 8);
        vr[u] = load16(V + row_offset(p.v_stride, b, h, jj) + c * 8);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        // A repeated row (past j1) adds nothing: branch-free, so nothing delays the loads.
        const bool ok = j + u * steps < j1;
        float kx[8], vx[8];
        unpack8<T>(kr[u], kx);
        unpack8<T>(vr[u], vx);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          sk[i] += ok ? kx[i] : 0.f;
          mxk[i] = fmaxf(mxk[i], kx[i]);
          mnk[i] = fminf(mnk[i], kx[i]);
          sv[i] += ok ? vx[i] : 0.f;
          mxv[i] = fmaxf(mxv[i], vx[i]);
          mnv[i] = fminf(mnv[i], vx[i]);
        }
      }
    }
    // Lanes lane, lane + cpr, ... of a warp hold the same 8 channels: combine them with shuffles
    // first, so one lane per chunk does the shared atomics (a float atomicAdd on shared memory
    // is a compare-and-swap loop, and 16-32 lanes on one address serialised it: NOTES run 26).
    const bool warp_combined = 32 % cpr == 0;  // else some warps straddle two token rows
    if (warp_combined) {
#pragma unroll
      for (int o = 16; o >= cpr; o >>= 1)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          sk[i] += __shfl_xor_sync(0xffffffffu, sk[i], o);
          mxk[i] = fmaxf(mxk[i], __shfl_xor_sync(0xffffffffu, mxk[i], o));
          mnk[i] = fminf(mnk[i], __shfl_xor_sync(0xffffffffu, mnk[i], o));
          sv[i] += __shfl_xor_sync(0xffffffffu, sv[i], o);
          mxv[i] = fmaxf(mxv[i], __shfl_xor_sync(0xffffffffu, mxv[i], o));
          mnv[i] = fminf(mnv[i], __shfl_xor_sync(0xffffffffu, mnv[i], o));
        }
    }
    if (!warp_combined || (threadIdx.x & 31) < cpr) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int d = c * 8 + i;
        atomicAdd(&s_acc[0][d], sk[i]);
        dev::atomic_max_float(&s_acc[1][d], mxk[i]);
        dev::atomic_min_float(&s_acc[2][d], mnk[i]);
        atomicAdd(&s_acc[3][d], sv[i]);
        dev::atomic_max_float(&s_acc[4][d], mxv[i]);
        dev::atomic_min_float(&s_acc[5][d], mnv[i]);
      }
    }
  }
  __syncthreads();
  if (j0 >= j1) return;
  float* acc = p.partials + static_cast<int64_t>(head) * (kStats + 1) * p.dpad;
  for (int e = threadIdx.x; e < kStats * p.D; e += kThreads) {
    const int stat = e / p.D, d = e % p.D;
    float* a = acc + stat * p.dpad + d;
    const float v = s_acc[stat][d];
    if (stat == 1 || stat == 4) dev::atomic_max_float(a, v);
    else if (stat == 2 || stat == 5) dev::atomic_min_float(a, v);
    else atomicAdd(a, v);
  }
}

// max |q| per channel over a range of query rows of the q-heads (and batches) of a canonical
// head: the 16-byte version of prepare_kv.cu's q_stats_kernel (same accumulator slot).
template <typename T>
__global__ void __launch_bounds__(kThreads) q_stats_vec_kernel(const KvPrepParams p,
                                                               int rows_per_cta) {
  __shared__ float s_max[256];
  const T* Q = static_cast<const T*>(p.q);
  const int head = blockIdx.y, b = head / p.heads_h, hkv = head % p.heads_h;
  for (int d = threadIdx.x; d < 256; d += kThreads) s_max[d] = 0.f;
  __syncthreads();
  const int cpr = p.D / 8, steps = kThreads / cpr;
  const int c = threadIdx.x % cpr, r = threadIdx.x / cpr;
  const int i0 = blockIdx.x * rows_per_cta, i1 = min(i0 + rows_per_cta, p.Nq);
  if (r < steps) {
    float m[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int qb = 0; qb < p.q_batches; ++qb) {
      const int bq = p.q_batches > 1 ? qb : b;
      for (int g = 0; g < p.G; ++g) {
        // A maximum is unchanged by a repeated row: out-of-range rows re-read row i.
        constexpr int kUnroll = 8;
        for (int i = i0 + r; i < i1; i += kUnroll * steps) {
          uint4 raw[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int ii = i + u * steps < i1 ? i + u * steps : i;
            raw[u] = load16(Q + row_offset(p.q_stride, bq, hkv * p.G + g, ii) + c * 8);
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            float x[8];
            unpack8<T>(raw[u], x);
#pragma unroll
            for (int k = 0; k < 8; ++k) m[k] = fmaxf(m[k], fabsf(x[k]));
          }
        }
      }
    }
    const bool warp_combined = 32 % cpr == 0;  // as in kv_stats_vec_kernel
    if (warp_combined)
#pragma unroll
      for (int o = 16; o >= cpr; o >>= 1)
#pragma unroll
        for (int k = 0; k < 8; ++k) m[k] = fmaxf(m[k], __shfl_xor_sync(0xffffffffu, m[k], o));
    if (!warp_combined || (threadIdx.x & 31) < cpr)
#pragma unroll
      for (int k = 0; k < 8; ++k)
        atomicMax(reinterpret_cast<int*>(&s_max[c * 8 + k]), __float_as_int(m[k]));  // m >= 0
  }
  __syncthreads();
  float* acc = p.partials + (static_cast<int64_t>(head) * (kStats + 1) + kStats) * p.dpad;
  for (int d = threadIdx.x; d < p.D; d += kThreads)
    atomicMax(reinterpret_cast<int*>(acc + d), __float_as_int(s_max[d]));
}

// Quantize one 64-token tile: items are (token, 8-channel chunk) pairs over the padded width.
// kItems: the most (token, chunk) items a thread owns at this padded head dim (dpad / 32),
// rounded up to 2, 4 or 8: the raw K/V words of all of them stay in registers, so a kernel sized
// for head dim 256 would hold twice the registers head dim 128 needs and fit fewer CTAs per SM
// (2 instead of 4 at head dim 128; this kernel is latency-bound, NOTES run 26).
template <typename T, int kItems>
__global__ void __launch_bounds__(kThreads, kItems <= 4 ? 4 : 2)
    kv_quantize_vec_kernel(const KvPrepParams p) {
  // FAST: [64 tokens][dpad + 4] E4M3 staging; the 4-byte pad spreads a column's tokens over
  // the banks for the transposing read below.
  extern __shared__ __align__(16) uint8_t s_vt[];
  __shared__ uint8_t s_token_of_col[32];  // inverse of fp8_v_logical_position
  __shared__ float s_amax[kTokens];
  __shared__ float s_mu_k[256], s_alpha[256], s_mu_v[256], s_inv_sv[256];
  __shared__ float s_block_amax;
  const T* K = static_cast<const T*>(p.k);
  const T* V = static_cast<const T*>(p.v);
  const int tile = blockIdx.x, head = blockIdx.y, b = head / p.heads_h, h = head % p.heads_h;
  const int valid = valid_tokens(p, b);
  const int64_t hoff = static_cast<int64_t>(head) * p.dpad;
  const bool quant = p.mode != 1;
  const int cpr = p.D / 8, cpad = p.dpad / 8, items = kTokens * cpad;
  for (int d = threadIdx.x; d < p.dpad; d += kThreads) {
    const bool live = quant && d < p.D;
    s_mu_k[d] = live && p.k_mean != nullptr ? p.k_mean[hoff + d] : 0.f;
    s_alpha[d] = live && p.alpha != nullptr ? p.alpha[hoff + d] : 1.f;
    s_mu_v[d] = live ? p.v_mean[hoff + d] : 0.f;
    s_inv_sv[d] = live ? 1.0f / p.v_scale[hoff + d] : 0.f;
  }
  if (threadIdx.x < kTokens) s_amax[threadIdx.x] = 0.f;
  if (threadIdx.x < 32) s_token_of_col[fp8_v_logical_position(threadIdx.x)] = threadIdx.x;
  const int vt_pitch = p.dpad + 4;

  // Which items this thread owns, and where they go.
  auto item_token = [&](int it) { return it / cpad; };
  auto item_chunk = [&](int it) { return it % cpad; };
  auto dest_key = [&](int tok) { return p.key_offset + static_cast<int64_t>(tile) * kTokens + tok; };
  auto writes = [&](int tok) {  // warp-divergent but cheap: padding tokens of a forward buffer
    const int j = tile * kTokens + tok;
    return (j < p.n || p.fill_tail) && dest_key(tok) < p.nk_pad;
  };

  // All of this thread's K and V loads first (raw 16-byte words; see load16). Items are
  // (token, chunk) pairs it, it + 256, ...; items is a multiple of 256 (dpad % 32 == 0), so
  // `k < n_items` is the same for the whole CTA.
  const int n_items = items / kThreads;
  uint4 kraw[kItems], vraw[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (k >= n_items) break;
    const int it = threadIdx.x + k * kThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    const bool live = j < p.n && c < cpr;
    kraw[k] = load16(K + (live ? row_offset(p.k_stride, b, h, j) + c * 8 : 0));
    vraw[k] = load16(V + (live ? row_offset(p.v_stride, b, h, j) + c * 8 : 0));
  }
  __syncthreads();  // the per-channel constants above are in shared memory

  if (!quant) {  // EXACT: 16-byte copies in the input dtype, zero padding
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (k >= n_items) break;
      const int it = threadIdx.x + k * kThreads;
      const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
      if (!writes(tok)) continue;
      const bool live = j < p.n && c < cpr;
      const uint4 zero = make_uint4(0, 0, 0, 0);
      const int64_t row = (static_cast<int64_t>(head) * p.nk_pad + dest_key(tok)) * p.dpad;
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.k_out) + row + c * 8) =
          live ? kraw[k] : zero;
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.v_out) + row + c * 8) =
          live ? vraw[k] : zero;
    }
    return;
  }

  // K of item k, smoothed and balanced (computed again in pass 2 rather than kept: 32
  // registers of raw words instead of 64 of floats).
  auto k_values = [&](int k, float (&x)[8]) {
    const int it = threadIdx.x + k * kThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    if (j < p.n && c < cpr) {
      unpack8<T>(kraw[k], x);
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] = (x[i] - s_mu_k[c * 8 + i]) * s_alpha[c * 8 + i];
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] = 0.f;
    }
  };

  // Pass 1: per-token absmax of K in shared memory.
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (k >= n_items) break;
    const int it = threadIdx.x + k * kThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    if (j < p.n && c < cpr) {
      float x[8];
      k_values(k, x);
      float amax = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(x[i]));
      atomicMax(reinterpret_cast<int*>(&s_amax[tok]), __float_as_int(amax));  // amax >= 0
    }
  }
  __syncthreads();
  if (!p.k_per_token) {
    if (threadIdx.x < 32) {
      float m = 0.f;
      for (int t = threadIdx.x; t < kTokens; t += 32)
        if (tile * kTokens + t < valid) m = fmaxf(m, s_amax[t]);
      for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
      if (threadIdx.x == 0) s_block_amax = m;
    }
    __syncthreads();
  }

  // Pass 2: INT8 K (8 bytes per item) and its per-key scale.
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (k >= n_items) break;
    const int it = threadIdx.x + k * kThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    if (!writes(tok)) continue;
    const bool in_src = j < p.n;
    const float scale =
        qm::int8_scale(p.k_per_token ? s_amax[tok] : s_block_amax, p.k_multiplier);
    const float inv = 1.0f / scale;
    float x[8];
    k_values(k, x);
    uint32_t w[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t q = static_cast<uint8_t>(qm::quantize_int8(x[i], inv));
      w[i / 4] |= q << (8 * (i % 4));
    }
    const int64_t krow = static_cast<int64_t>(head) * p.nk_pad + dest_key(tok);
    *reinterpret_cast<uint2*>(static_cast<int8_t*>(p.k_out) + krow * p.dpad + c * 8) =
        make_uint2(w[0], w[1]);
    if (c == 0) p.k_scale[krow] = in_src ? scale : 1.0f;
  }

  // Pass 3: V: fp16 rows (BALANCED) or E4M3 staged for the transposed layout (FAST).
  const bool fast = p.mode == 3;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (k >= n_items) break;
    const int it = threadIdx.x + k * kThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    float y[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (j < p.n && c < cpr) {
      unpack8<T>(vraw[k], y);
#pragma unroll
      for (int i = 0; i < 8; ++i) y[i] = (y[i] - s_mu_v[c * 8 + i]) * s_inv_sv[c * 8 + i];
    }
    if (fast) {
      uint32_t w[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        w[i] = dev::pack4_e4m3(y[4 * i], y[4 * i + 1], y[4 * i + 2], y[4 * i + 3]);
      uint32_t* dst = reinterpret_cast<uint32_t*>(s_vt + tok * vt_pitch + c * 8);
      dst[0] = w[0];
      dst[1] = w[1];
    } else if (writes(tok)) {
      uint4 out;
      uint32_t* o = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
      for (int i = 0; i < 4; ++i) o[i] = dev::pack2<false>(y[2 * i], y[2 * i + 1]);
      const int64_t krow = static_cast<int64_t>(head) * p.nk_pad + dest_key(tok);
      *reinterpret_cast<uint4*>(static_cast<__half*>(p.v_out) + krow * p.dpad + c * 8) = out;
    }
  }
  if (fast) {
    // Transposed, key-permuted FP8 V: row d holds the keys of this head at logical positions.
    __syncthreads();
    uint8_t* vo = static_cast<uint8_t*>(p.v_out) + static_cast<int64_t>(head) * p.dpad * p.nk_pad;
    if (p.key_offset == 0 && p.fill_tail) {
      // Whole 64-key tiles (forward buffers): 16 physical keys of one channel per 16-byte store.
      const int64_t col0 = static_cast<int64_t>(tile) * kTokens;
      for (int e = threadIdx.x; e < p.dpad * (kTokens / 16); e += kThreads) {
        const int d = e >> 2, ch = e & 3;
        uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const int pc = ch * 16 + i;
          const int tok = (pc & ~31) + s_token_of_col[pc & 31];
          w[i >> 2] |= static_cast<uint32_t>(s_vt[tok * vt_pitch + d]) << (8 * (i & 3));
        }
        *reinterpret_cast<uint4*>(vo + d * p.nk_pad + col0 + ch * 16) =
            make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
      // Cache appends start anywhere: one byte per (channel, key).
      for (int e = threadIdx.x; e < p.dpad * kTokens; e += kThreads) {
        const int d = e / kTokens, tok = e % kTokens;
        if (!writes(tok)) continue;
        const int64_t dk = dest_key(tok);
        const int64_t col =
            (dk & ~int64_t(31)) + fp8_v_logical_position(static_cast<int>(dk & 31));
        vo[d * p.nk_pad + col] = s_vt[tok * vt_pitch + d];
      }
    }
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

bool q_stats_vectorizable(const KvPrepParams& p) {
  if (p.dtype != 1 && p.dtype != 2) return false;
  if (p.q_stride[3] != 1 || p.D % 8 != 0 || !aligned16(p.q)) return false;
  for (int i = 0; i < 3; ++i)
    if (p.q_stride[i] % 8 != 0) return false;
  return true;
}

cudaError_t launch_q_stats_vec(const KvPrepParams& p, int rows_per_cta, cudaStream_t s) {
  const int heads = p.heads_b * p.heads_h;
  const dim3 grid((p.Nq + rows_per_cta - 1) / rows_per_cta, heads);
  dev::dispatch_dtype(p.dtype, [&](auto t) {
    if constexpr (sizeof(t) == 2)
      q_stats_vec_kernel<decltype(t)><<<grid, kThreads, 0, s>>>(p, rows_per_cta);
    return 0;
  });
  return cudaGetLastError();
}

bool kv_prep_vectorizable(const KvPrepParams& p) {
  if (p.dtype != 1 && p.dtype != 2) return false;  // fp16 / bf16
  if (p.k_stride[3] != 1 || p.v_stride[3] != 1 || p.D % 8 != 0) return false;
  if (!aligned16(p.k) || !aligned16(p.v)) return false;
  for (int i = 0; i < 3; ++i)
    if (p.k_stride[i] % 8 != 0 || p.v_stride[i] % 8 != 0) return false;  // rows 16-byte aligned
  return true;
}

int kv_stats_vec_ctas_per_sm() {
  // Same registers and shared memory for both element types; a successful answer is kept
  // (a failed query only sizes this call's grid conservatively and is asked again next time).
  static std::atomic<int> cached{0};
  int n = cached.load(std::memory_order_relaxed);
  if (n > 0) return n;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kv_stats_vec_kernel<__half>, kThreads,
                                                    0) != cudaSuccess ||
      n <= 0) {
    (void)cudaGetLastError();  // not sticky; keep it out of the next launch check
    return 1;
  }
  cached.store(n, std::memory_order_relaxed);
  return n;
}

cudaError_t launch_kv_stats_vec(const KvPrepParams& p, int tokens_per_cta, cudaStream_t s) {
  const int heads = p.heads_b * p.heads_h;
  const dim3 grid((p.n + tokens_per_cta - 1) / tokens_per_cta, heads);
  dev::dispatch_dtype(p.dtype, [&](auto t) {
    if constexpr (sizeof(t) == 2)
      kv_stats_vec_kernel<decltype(t)><<<grid, kThreads, 0, s>>>(p, tokens_per_cta);
    return 0;
  });
  return cudaGetLastError();
}

cudaError_t launch_kv_quantize_vec(const KvPrepParams& p, cudaStream_t s) {
  const int heads = p.heads_b * p.heads_h;
  const int64_t keys = p.fill_tail ? p.nk_pad - p.key_offset : p.n;
  const dim3 grid(static_cast<unsigned>((keys + kTokens - 1) / kTokens), heads);
  const size_t smem = p.mode == 3 ? static_cast<size_t>(kTokens) * (p.dpad + 4) : 0;
  dev::dispatch_dtype(p.dtype, [&](auto t) {
    if constexpr (sizeof(t) == 2) {
      using T = decltype(t);
      if (p.dpad <= 64) kv_quantize_vec_kernel<T, 2><<<grid, kThreads, smem, s>>>(p);
      else if (p.dpad <= 128) kv_quantize_vec_kernel<T, 4><<<grid, kThreads, smem, s>>>(p);
      else kv_quantize_vec_kernel<T, kMaxItems><<<grid, kThreads, smem, s>>>(p);
    }
    return 0;
  });
  return cudaGetLastError();
}

}  // namespace int8attn
