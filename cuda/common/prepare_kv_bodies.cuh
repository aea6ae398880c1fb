// The device bodies of K/V preparation: per-channel statistics of K and V, max |q| per channel,
// and the quantization of 64-token tiles into the canonical layouts (attention_params.h).
// fp16/bf16 K, V and Q; a thread works on 8 channels of one token at a time (an "item"), with
// the chunk's raw 16 bytes loaded by load_chunk: one 16-byte load where rows are contiguous
// and 16-byte aligned (kVec), 8 strided loads otherwise; everything after the load is the same
// code. Several rows are loaded at a time so enough bytes are in flight; per-token and
// per-channel reductions go through shared memory. The kernels (prepare_kv_kernels.cu) only pick
// the CTA's range; the bodies take the thread count and the synchronisation as arguments.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "common/quant_math.h"
#include "cuda/common/atomics.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/attention_params.h"
#include "cuda/common/prepare_kv.h"
#include "cuda/common/prepare_kv_common.cuh"

namespace int8attn {
namespace prep {

constexpr int kTileThreads = 256;  // threads quantizing one tile
constexpr int kTokens = 64;        // tokens per quantization tile
constexpr int kMaxItems = 8;       // (token, 8-channel chunk) items per thread: 64·256/8/256

__device__ __forceinline__ int64_t row_offset(const int64_t (&s)[4], int b, int h, int j) {
  return b * s[0] + h * s[1] + static_cast<int64_t>(j) * s[2];
}

// 8 channels [8c, 8c + 8) of row j of head (b, h) of a 16-bit operand x with strides s, as raw
// bytes. kVec: one 16-byte load (unit channel stride, 16-byte aligned rows, D % 8 == 0: the
// host checks, kv_prep_vectorizable); else 8 strided loads, channels past D read as zero.
// Loads are separate from their conversion on purpose: every body here issues all of a
// thread's loads for a step before it uses any of them, from addresses that are always
// readable (clamped to a valid row, the value then ignored). A load whose value is used inside
// the same bounds-check branch is waited for before the next one is issued, which made these
// kernels latency-bound at ~25% of DRAM bandwidth.
template <bool kVec, typename T>
__device__ __forceinline__ uint4 load_chunk(const T* x, const int64_t (&s)[4], int b, int h, int j,
                                            int c, int D) {
  const T* row = x + row_offset(s, b, h, j);
  if constexpr (kVec) {
    return *reinterpret_cast<const uint4*>(row + c * 8);
  } else {
    const uint16_t* e = reinterpret_cast<const uint16_t*>(row);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int d = c * 8 + 2 * i;
      const uint32_t lo = d < D ? e[d * s[3]] : 0u, hi = d + 1 < D ? e[(d + 1) * s[3]] : 0u;
      w[i] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// Rows of a statistics pass: the rows of [first, end) in the sample of `stride` (1: all of
// them), as a dense index i = 0..count-1. `first` starts a sampled chunk.
struct RowSample {
  int first = 0, end = 0, stride = 1, count = 0;
  // Rows [j0, j1) (j0 a multiple of qm::kStatsChunk) sampled with `stride`.
  __device__ __forceinline__ RowSample(int j0, int j1, int stride_) : stride(stride_) {
    const int chunk0 = j0 / qm::kStatsChunk;
    first = (chunk0 + stride - 1) / stride * stride * qm::kStatsChunk;
    end = j1;
    count = first < end ? static_cast<int>(qm::stats_sampled_rows(end - first, stride)) : 0;
  }
  __device__ __forceinline__ int row(int i) const {
    return first + (i / qm::kStatsChunk) * stride * qm::kStatsChunk + i % qm::kStatsChunk;
  }
};

// Per-channel sum, maximum and minimum of operand x (strides s) over the rows of `rows` of
// source head (b, h), by all `nthreads` threads of the CTA (thread `tid` = row slot r, chunk c
// walks sample rows r, r + steps, ...), combined into s_acc[sum_stat], [sum_stat + 1] (max) and
// [sum_stat + 2] (min), which hold the identities on entry. `s_tmp`: 8 · nthreads floats of
// scratch. Contains __syncthreads: every thread of the CTA calls it.
template <typename T, bool kVec>
__device__ __forceinline__ void accumulate_stats(const T* x, const int64_t (&s)[4], int D, int b,
                                                 int h, const RowSample& rows, int tid,
                                                 int nthreads, float (*s_acc)[256], int sum_stat,
                                                 float* s_tmp) {
  const int cpr = (D + 7) / 8, steps = nthreads / cpr;
  const int c = tid % cpr, r = tid / cpr;
  const bool active = r < steps;
  Stats8 st;
  constexpr int kUnroll = 8;  // rows per step, loaded from clamped addresses before any use
  for (int i = r; active && i < rows.count; i += kUnroll * steps) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int ii = i + u * steps < rows.count ? i + u * steps : i;
      raw[u] = load_chunk<kVec>(x, s, b, h, rows.row(ii), c, D);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      // A repeated row (past the sample) adds nothing: branch-free, so nothing delays the loads.
      const bool ok = i + u * steps < rows.count;
      float v[8];
      dev::unpack8<dev::kIsBf16<T>>(raw[u], v);
#pragma unroll
      for (int k = 0; k < 8; ++k) st.add(k, v[k], ok);
    }
  }
  float* s_sum = s_acc[sum_stat];
  float* s_max = s_acc[sum_stat + 1];
  float* s_min = s_acc[sum_stat + 2];
  if (32 % cpr == 0) {
    // Lanes lane, lane + cpr, ... of a warp hold the same 8 channels: shuffles combine them, then
    // one lane per chunk and warp does the shared atomics (nthreads / 32 per address).
#pragma unroll
    for (int o = 16; o >= cpr; o >>= 1)
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        st.sum[k] += __shfl_xor_sync(0xffffffffu, st.sum[k], o);
        st.mx[k] = fmaxf(st.mx[k], __shfl_xor_sync(0xffffffffu, st.mx[k], o));
        st.mn[k] = fminf(st.mn[k], __shfl_xor_sync(0xffffffffu, st.mn[k], o));
      }
    if ((tid & 31) < cpr && rows.count > 0) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int d = c * 8 + k;
        atomicAdd(&s_sum[d], st.sum[k]);
        dev::atomic_max_float(&s_max[d], st.mx[k]);
        dev::atomic_min_float(&s_min[d], st.mn[k]);
      }
    }
    __syncthreads();
    return;
  }
  // Chunks that do not tile a warp (head dims 40, 80, 96, 160, ...): every one of the `steps`
  // row slots lands on each address. Maxima and minima are integer atomics (native); a float
  // atomicAdd on shared memory is a compare-and-swap loop that such contention serialises, so
  // the sums go through s_tmp [steps][dw] and are added up per channel.
  const int dw = cpr * 8;  // channels the chunks cover (D rounded up to 8)
  if (active && rows.count > 0) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int d = c * 8 + k;
      s_tmp[r * dw + d] = st.sum[k];
      dev::atomic_max_float(&s_max[d], st.mx[k]);
      dev::atomic_min_float(&s_min[d], st.mn[k]);
    }
  }
  __syncthreads();
  if (rows.count > 0) {
    for (int d = tid; d < dw; d += nthreads) {
      const float* col = s_tmp + d;
      float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;  // independent chains
      int rr = 0;
      for (; rr + 4 <= steps; rr += 4) {
        a0 += col[rr * dw];
        a1 += col[(rr + 1) * dw];
        a2 += col[(rr + 2) * dw];
        a3 += col[(rr + 3) * dw];
      }
      for (; rr < steps; ++rr) a0 += col[rr * dw];
      s_sum[d] += (a0 + a1) + (a2 + a3);
    }
  }
  __syncthreads();
}

// max |q| per channel over the sampled query rows `rows` of the q-heads (and batches) of
// canonical head (b, hkv), by `nthreads` threads, into s_max[256] (zeros on entry) with shared
// atomics.
template <typename T, bool kVec>
__device__ __forceinline__ void accumulate_q_absmax(const KvPrepParams& p, int b, int hkv,
                                                    const RowSample& rows, int tid, int nthreads,
                                                    float* s_max) {
  const T* Q = static_cast<const T*>(p.q.data);
  const int cpr = (p.D + 7) / 8, steps = nthreads / cpr;
  const int c = tid % cpr, r = tid / cpr;
  if (r >= steps) return;
  float m[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int qb = 0; qb < p.q_batches; ++qb) {
    const int bq = p.q_batches > 1 ? qb : b;
    for (int g = 0; g < p.G; ++g) {
      // A maximum is unchanged by a repeated row: out-of-range rows re-read row i.
      constexpr int kUnroll = 8;
      for (int i = r; i < rows.count; i += kUnroll * steps) {
        uint4 raw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int ii = i + u * steps < rows.count ? i + u * steps : i;
          raw[u] = load_chunk<kVec>(Q, p.q.stride, bq, hkv * p.G + g, rows.row(ii), c, p.D);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          float x[8];
          dev::unpack8<dev::kIsBf16<T>>(raw[u], x);
#pragma unroll
          for (int k = 0; k < 8; ++k) m[k] = fmaxf(m[k], fabsf(x[k]));
        }
      }
    }
  }
  const bool warp_combined = 32 % cpr == 0;  // as in accumulate_stats
  if (warp_combined)
#pragma unroll
    for (int o = 16; o >= cpr; o >>= 1)
#pragma unroll
      for (int k = 0; k < 8; ++k) m[k] = fmaxf(m[k], __shfl_xor_sync(0xffffffffu, m[k], o));
  if (!warp_combined || (tid & 31) < cpr)
#pragma unroll
    for (int k = 0; k < 8; ++k)
      atomicMax(reinterpret_cast<int*>(&s_max[c * 8 + k]), __float_as_int(m[k]));  // m >= 0
}

// A head's per-channel constants, as the quantization reads them (zero / one past D).
struct HeadConsts {
  float mu_k[256], alpha[256], mu_v[256], inv_sv[256];
  uint8_t token_of_col[32];  // inverse of fp8_v_logical_position (FAST's V^T key order)
};

// One tile's shared scratch: FAST's [64 tokens][dpad + 4] E4M3 staging (the 4-byte pad spreads
// a column's tokens over the banks for the transposing read), per-token K absmax, tile absmax.
struct TileScratch {
  uint8_t* vt;
  float* amax;        // [kTokens]
  float* block_amax;  // one float
};

// Quantize 64-token tile `tile` of canonical head `head` (source head (b, h)) by the 256
// threads tid = 0..255 that call it together; `sync()` synchronises exactly those threads.
// Items are (token, 8-channel chunk) pairs over the padded width. kItems: the most items a
// thread owns at this padded head dim (dpad / 32), rounded up to 2, 4 or 8: the raw K/V words
// of all of them stay in registers, so a body sized for head dim 256 would hold twice the
// registers head dim 128 needs (fewer CTAs per SM; the kernels are latency-bound).
// The caller has `hc` ready before the call (its first sync() orders it) and synchronises
// before it reuses `ts` for another tile.
template <typename T, bool kVec, int kItems, typename Sync>
__device__ __forceinline__ void quantize_tile(const KvPrepParams& p, int tile, int head, int b,
                                              int h, int tid, const HeadConsts& hc,
                                              const TileScratch& ts, Sync sync) {
  const T* K = static_cast<const T*>(p.k.data);
  const T* V = static_cast<const T*>(p.v.data);
  // Keys past the batch's valid length are written as padding (zeros, scale 1), not quantized:
  // no row sees them, and V scaled by a σ taken over the valid keys alone could overflow fp16
  // there, where a masked key's P of 0 times ±inf would make NaN.
  const int valid = valid_tokens(p, b);
  const bool quant = int8_qk(p.mode);
  const int cpr = (p.D + 7) / 8, cpad = p.dpad / 8, items = kTokens * cpad;
  if (tid < kTokens) ts.amax[tid] = 0.f;
  const int vt_pitch = p.dpad + 4;

  // Which items this thread owns, and where they go.
  auto item_token = [&](int it) { return it / cpad; };
  auto item_chunk = [&](int it) { return it % cpad; };
  auto dest_key = [&](int tok) {
    return p.key_offset + static_cast<int64_t>(tile) * kTokens + tok;
  };
  auto writes = [&](int tok) {  // warp-divergent but cheap: padding tokens of a forward buffer
    const int j = tile * kTokens + tok;
    return (j < p.n || p.fill_tail) && dest_key(tok) < p.nk_pad;
  };

  // All of this thread's K and V loads first (raw 16-byte words; see load_chunk). Items are
  // (token, chunk) pairs it, it + 256, ...; items is a multiple of 256 (dpad % 32 == 0), so
  // `k < n_items` is the same for all the threads.
  const int n_items = items / kTileThreads;
  uint4 kraw[kItems], vraw[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (k >= n_items) break;
    const int it = tid + k * kTileThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    const bool live = j < valid && c < cpr;
    kraw[k] = load_chunk<kVec>(K, p.k.stride, b, h, live ? j : 0, live ? c : 0, p.D);
    vraw[k] = load_chunk<kVec>(V, p.v.stride, b, h, live ? j : 0, live ? c : 0, p.D);
  }
  sync();  // the per-channel constants and the zeroed absmax are in shared memory

  if (!quant) {  // EXACT: 16-byte copies in the input dtype, zero padding
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (k >= n_items) break;
      const int it = tid + k * kTileThreads;
      const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
      if (!writes(tok)) continue;
      const bool live = j < valid && c < cpr;
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
  auto k_values = [&](int k, float(&x)[8]) {
    const int it = tid + k * kTileThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    if (j < valid && c < cpr) {
      dev::unpack8<dev::kIsBf16<T>>(kraw[k], x);
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] = (x[i] - hc.mu_k[c * 8 + i]) * hc.alpha[c * 8 + i];
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] = 0.f;
    }
  };

  // Pass 1: per-token absmax of K in shared memory.
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (k >= n_items) break;
    const int it = tid + k * kTileThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    if (j < valid && c < cpr) {
      float x[8];
      k_values(k, x);
      float amax = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = dev::fmax_nan(amax, fabsf(x[i]));
      atomicMax(reinterpret_cast<int*>(&ts.amax[tok]), __float_as_int(amax));  // amax >= 0
    }
  }
  sync();
  if (!p.k_per_token) {
    if (tid < 32) {
      float m = 0.f;
      for (int t = tid; t < kTokens; t += 32)
        if (tile * kTokens + t < valid) m = dev::fmax_nan(m, ts.amax[t]);
      for (int o = 16; o > 0; o >>= 1) m = dev::fmax_nan(m, __shfl_xor_sync(0xffffffffu, m, o));
      if (tid == 0) *ts.block_amax = m;
    }
    sync();
  }

  // Pass 2: INT8 K (8 bytes per item) and its per-key scale.
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (k >= n_items) break;
    const int it = tid + k * kTileThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    if (!writes(tok)) continue;
    const bool in_src = j < valid;
    const float scale =
        qm::int8_scale(p.k_per_token ? ts.amax[tok] : *ts.block_amax, p.k_multiplier);
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
  const bool fast = fp8_pv(p.mode);
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (k >= n_items) break;
    const int it = tid + k * kTileThreads;
    const int tok = item_token(it), c = item_chunk(it), j = tile * kTokens + tok;
    float y[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (j < valid && c < cpr) {
      dev::unpack8<dev::kIsBf16<T>>(vraw[k], y);
#pragma unroll
      for (int i = 0; i < 8; ++i) y[i] = (y[i] - hc.mu_v[c * 8 + i]) * hc.inv_sv[c * 8 + i];
    }
    if (fast) {
      uint32_t w[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        w[i] = dev::pack4_e4m3(y[4 * i], y[4 * i + 1], y[4 * i + 2], y[4 * i + 3]);
      uint32_t* dst = reinterpret_cast<uint32_t*>(ts.vt + tok * vt_pitch + c * 8);
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
    sync();
    uint8_t* vo = static_cast<uint8_t*>(p.v_out) + static_cast<int64_t>(head) * p.dpad * p.nk_pad;
    if (p.key_offset == 0 && p.fill_tail) {
      // Whole 64-key tiles (forward buffers): 16 physical keys of one channel per 16-byte store.
      const int64_t col0 = static_cast<int64_t>(tile) * kTokens;
      for (int e = tid; e < p.dpad * (kTokens / 16); e += kTileThreads) {
        const int d = e >> 2, ch = e & 3;
        uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const int pc = ch * 16 + i;
          const int tok = (pc & ~31) + hc.token_of_col[pc & 31];
          w[i >> 2] |= static_cast<uint32_t>(ts.vt[tok * vt_pitch + d]) << (8 * (i & 3));
        }
        *reinterpret_cast<uint4*>(vo + d * p.nk_pad + col0 + ch * 16) =
            make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
      // Cache appends start anywhere: one byte per (channel, key).
      for (int e = tid; e < p.dpad * kTokens; e += kTileThreads) {
        const int d = e / kTokens, tok = e % kTokens;
        if (!writes(tok)) continue;
        const int64_t dk = dest_key(tok);
        const int64_t col = (dk & ~int64_t(31)) + fp8_v_logical_position(static_cast<int>(dk & 31));
        vo[d * p.nk_pad + col] = ts.vt[tok * vt_pitch + d];
      }
    }
  }
}

// The item count a quantization body is compiled for at padded head dim dpad (see quantize_tile).
template <typename F>
__host__ __forceinline__ auto dispatch_items(int dpad, F f) {
  if (dpad <= 64) return f(std::integral_constant<int, 2>{});
  if (dpad <= 128) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, kMaxItems>{});
}

}  // namespace prep
}  // namespace int8attn
