// The quantization of one 64-token tile of K and V into the canonical layouts
// (attention_params.h), with its head's constants (those the statistics kernel finalized, or for
// cache appends those kept since the first append). One CTA per tile.
//
// The kernel is memory-bound only if it issues few instructions per byte, so its shape is fixed
// at compile time: the kSpan lanes that share a token are consecutive (kSpan = dpad / 8 rounded
// up to a power of two, 32·kSpan threads a CTA), and each thread owns one 8-channel chunk of two
// tokens. So a token's absmax is a few shuffles, a thread's channel constants are loaded once,
// no item needs an integer division, and two items' raw words fit in 64 registers beside
// everything else (four items spilled). Lanes past the padded width idle (D = 72..96: a
// quarter).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/quant_math.h"
#include "cuda/common/attention_params.h"
#include "cuda/common/int8_groups.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/prepare_kv.h"
#include "cuda/common/prepare_kv_bodies.cuh"

namespace int8attn {
namespace prep {

constexpr int kTokens = 64;  // tokens per quantization tile (a CTA)

// A head's per-channel constants, as the quantization reads them (zero / one past D).
struct HeadConsts {
  float mu_k[256], k_factor[256], mu_v[256], inv_sv[256];
};

// A tile's static shared memory; FAST's E4M3 staging of V, [kTokens][dpad + 4] bytes, is
// dynamic (the 4-byte pad spreads a column's tokens over the banks for the transposing read).
struct TileShared {
  HeadConsts hc;
  float warp_amax[32];  // K per block: each warp's absmax
};

// The lanes per token a quantization body is compiled for at padded head dim dpad: they must
// cover dpad / 8 chunks.
template <typename F>
__host__ __forceinline__ auto dispatch_span(int dpad, F f) {
  if (dpad <= 64) return f(std::integral_constant<int, 8>{});
  if (dpad <= 128) return f(std::integral_constant<int, 16>{});
  return f(std::integral_constant<int, 32>{});
}

// Which tokens and chunk a thread owns: chunk c of tokens r0 and r0 + kRows.
template <int kSpan_>
struct TileLanes {
  static constexpr int kSpan = kSpan_;            // lanes per token
  static constexpr int kThreads = 32 * kSpan;     // a CTA: 32 tokens at a time
  static constexpr int kRows = kThreads / kSpan;  // tokens per step
  static constexpr int kItems = kTokens / kRows;  // items per thread
  static_assert(kItems == 2, "two 32-token steps cover the tile");
  int c, r0;
  __device__ __forceinline__ explicit TileLanes(int tid) : c(tid % kSpan), r0(tid / kSpan) {}
  __device__ __forceinline__ int token(int k) const { return r0 + k * kRows; }
};

// The 4×4 byte transpose behind FAST's V^T: words a, b, c, d hold channels 0..3 of four tokens;
// out[j] holds channel j of the four tokens, in that order.
__device__ __forceinline__ void transpose4x4_bytes(uint32_t a, uint32_t b, uint32_t c, uint32_t d,
                                                   uint32_t (&out)[4]) {
  const uint32_t ab01 = __byte_perm(a, b, 0x5140), ab23 = __byte_perm(a, b, 0x7362);
  const uint32_t cd01 = __byte_perm(c, d, 0x5140), cd23 = __byte_perm(c, d, 0x7362);
  out[0] = __byte_perm(ab01, cd01, 0x5410);
  out[1] = __byte_perm(ab01, cd01, 0x7632);
  out[2] = __byte_perm(ab23, cd23, 0x5410);
  out[3] = __byte_perm(ab23, cd23, 0x7632);
}

// Whether columns 4u..4u+3 of each 16-key group of V^T hold tokens 2u, 2u+1, 2u+8, 2u+9 (the
// order store_vt_tile writes), as fp8_v_logical_position defines it.
constexpr bool vt_order_is_pairs_of_pairs() {
  for (int half = 0; half < 2; ++half)
    for (int u = 0; u < 4; ++u) {
      const int t = 16 * half + 2 * u, c = 16 * half + 4 * u;
      if (fp8_v_logical_position(t) != c || fp8_v_logical_position(t + 1) != c + 1 ||
          fp8_v_logical_position(t + 8) != c + 2 || fp8_v_logical_position(t + 9) != c + 3)
        return false;
    }
  return true;
}
static_assert(vt_order_is_pairs_of_pairs(), "store_vt_tile follows fp8_v_logical_position");

// FAST's whole 64-key tile of V^T from the staging (row tok: E4M3 channels of that token) to
// rows d of the head's V^T at columns [col0, col0 + 64), keys permuted inside each group of 16
// (fp8_v_logical_position: columns 4u..4u+3 hold tokens 2u, 2u+1, 2u+8, 2u+9). A unit is 4
// channels × 16 keys (dpad units, so a CTA has threads enough): 16 word loads, 32 byte
// permutes, 4 16-byte stores; the two units of
// neighbouring lanes write one 32-byte sector of a row, and their loads hit every bank once.
__device__ __forceinline__ void store_vt_tile(const uint8_t* vt, int pitch, int dpad, uint8_t* vo,
                                              int64_t nk_pad, int64_t col0, int tid) {
  if (tid >= dpad) return;  // dpad / 4 channel groups × 4 key groups
  const int half = dpad / 2, hsel = tid >= half ? 1 : 0, f = tid - hsel * half;
  const int kg = 2 * hsel + (f & 1), cg = f >> 1;
  const uint8_t* src = vt + kg * 16 * pitch + cg * 4;
  uint32_t w[16];
#pragma unroll
  for (int t = 0; t < 16; ++t) w[t] = *reinterpret_cast<const uint32_t*>(src + t * pitch);
  uint32_t out[4][4];  // [channel][word]
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    uint32_t ch[4];
    transpose4x4_bytes(w[2 * u], w[2 * u + 1], w[2 * u + 8], w[2 * u + 9], ch);
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j][u] = ch[j];
  }
  uint8_t* dst = vo + static_cast<int64_t>(cg * 4) * nk_pad + col0 + kg * 16;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    *reinterpret_cast<uint4*>(dst + j * nk_pad) =
        make_uint4(out[j][0], out[j][1], out[j][2], out[j][3]);
}

// K's INT8 items, smoothed and balanced ((x − μ_K)·α per channel, the rotation's normalisation
// folded into α: qm::k_channel_factor), rotated (qm::rotate8) and written with their
// per-key scales: a token's scale from its absmax over its kSpan lanes, or with K per block one
// scale for the tile from a CTA-wide absmax (which synchronises the CTA). Dead items are zeros
// with scale 1. kClamp: see int8_clamp_needed.
template <typename T, int kSpan, bool kClamp, typename Live, typename Writes, typename KeyRow>
__device__ __forceinline__ void quantize_k_items(const KvPrepParams& p, const TileLanes<kSpan>& ln,
                                                 TileShared& sh, const uint4 (&kraw)[2], Live live,
                                                 Writes writes, KeyRow key_row, int valid,
                                                 int row0) {
  constexpr int kItems = TileLanes<kSpan>::kItems;
  float mk[8], ak[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    mk[i] = sh.hc.mu_k[ln.c * 8 + i];
    ak[i] = sh.hc.k_factor[ln.c * 8 + i];
  }
  auto values = [&](int k, float(&x)[8]) {
    dev::unpack8<dev::kIsBf16<T>>(kraw[k], x);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = (x[i] - mk[i]) * ak[i];
    qm::rotate8(x);
  };
  auto store = [&](int k, const float(&x)[8], float scale, float inv) {
    if (!writes(k)) return;
    const uint2 w = live(k) ? quantize8_int8<kClamp>(x, inv) : make_uint2(0u, 0u);
    const int64_t row = key_row(k);
    *reinterpret_cast<uint2*>(static_cast<int8_t*>(p.k_out) + row * p.dpad + ln.c * 8) = w;
    if (ln.c == 0) p.k_scale[row] = row0 + ln.token(k) < valid ? scale : 1.0f;
  };
  if (p.k_per_token) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      float x[8];
      values(k, x);
      const float amax = lane_group_max_nonneg<kSpan>(live(k) ? absmax8(x) : 0.f);
      const float scale = qm::int8_scale(amax, p.k_multiplier);
      store(k, x, scale, 1.0f / scale);
    }
    return;
  }
  // The items' values are kept across the CTA's maximum (not recomputed: the rotation is most
  // of their arithmetic).
  float xs[kItems][8];
  float m = 0.f;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    values(k, xs[k]);
    m = dev::fmax_nan(m, live(k) ? absmax8(xs[k]) : 0.f);
  }
  m = lane_group_max_nonneg<32>(m);
  if ((threadIdx.x & 31) == 0) sh.warp_amax[threadIdx.x >> 5] = m;
  __syncthreads();
  m = 0.f;
#pragma unroll
  for (int w = 0; w < TileLanes<kSpan>::kThreads / 32; ++w) m = dev::fmax_nan(m, sh.warp_amax[w]);
  const float scale = qm::int8_scale(m, p.k_multiplier), inv = 1.0f / scale;
#pragma unroll
  for (int k = 0; k < kItems; ++k) store(k, xs[k], scale, inv);
}

// Quantize 64-token tile `tile` of canonical head `head`; every thread of the CTA
// (TileLanes<kSpan>::kThreads) calls it.
// `vt`: FAST's staging (dynamic shared memory).
template <typename T, bool kVec, int kSpan>
__device__ __forceinline__ void quantize_tile(const KvPrepParams& p, int tile, int head,
                                              TileShared& sh, uint8_t* vt) {
  using Lanes = TileLanes<kSpan>;
  constexpr int kItems = Lanes::kItems;
  constexpr bool kBf16 = dev::kIsBf16<T>;
  const int tid = threadIdx.x;
  const Lanes ln(tid);
  const int b = head / p.heads_h, h = head % p.heads_h;
  const T* K = static_cast<const T*>(p.k.data);
  const T* V = static_cast<const T*>(p.v.data);
  const int cpr = (p.D + 7) / 8, cpad = p.dpad / 8, row0 = tile * kTokens;

  // Every load first, from rows and chunks clamped into the source (the values of dead items
  // are ignored), so none waits for the valid length or the constants.
  uint4 kraw[kItems], vraw[kItems];
  {
    const int cl = ln.c < cpr ? ln.c : 0, last = p.n > 0 ? p.n - 1 : 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int j = min(row0 + ln.token(k), last);
      kraw[k] =
          p.n > 0 ? load_chunk<kVec>(K, p.k.stride, b, h, j, cl, p.D) : make_uint4(0, 0, 0, 0);
      vraw[k] = p.n > 0 && !p.v_raw ? load_chunk<kVec>(V, p.v.stride, b, h, j, cl, p.D)
                                    : make_uint4(0, 0, 0, 0);
    }
  }
  // Everything above reads only the caller's K, V and key lengths, complete before the call's
  // first kernel began; the head's constants and every write wait for the kernels before this
  // one (a no-op unless launched early, pdl.cuh), so the loads fly during their tail.
  dev::wait_previous_kernels();

  // Keys past the batch's valid length are written as padding (zeros, scale 1), not quantized:
  // no row sees them, and V scaled by a σ taken over the valid keys alone could overflow fp16
  // there, where a masked key's P of 0 times ±inf would make NaN.
  const int valid = valid_tokens(p, b);
  auto live = [&](int k) { return row0 + ln.token(k) < valid && ln.c < cpr; };
  auto dest_key = [&](int tok) { return p.key_offset + static_cast<int64_t>(row0) + tok; };
  auto writes = [&](int k) {  // chunks inside the padded width, keys inside the buffer
    const int tok = ln.token(k);
    return ln.c < cpad && (row0 + tok < p.n || p.fill_tail) && dest_key(tok) < p.nk_pad;
  };
  auto key_row = [&](int k) {
    return static_cast<int64_t>(head) * p.nk_pad + dest_key(ln.token(k));
  };

  if (!int8_qk(p.mode)) {  // EXACT: 16-byte copies in the input dtype, zero padding
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (!writes(k)) continue;
      const int64_t e = key_row(k) * p.dpad + ln.c * 8;
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.k_out) + e) = live(k) ? kraw[k] : zero;
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.v_out) + e) = live(k) ? vraw[k] : zero;
    }
    return;
  }

  // The head's constants (L2-resident) while the loads are in flight.
  const int64_t hoff = static_cast<int64_t>(head) * p.dpad;
  for (int d = tid; d < p.dpad; d += Lanes::kThreads) {
    const bool on = d < p.D;
    sh.hc.mu_k[d] = on && p.k_mean != nullptr ? p.k_mean[hoff + d] : 0.f;
    sh.hc.k_factor[d] = qm::k_channel_factor(on && p.alpha != nullptr ? p.alpha[hoff + d] : 1.f);
    sh.hc.mu_v[d] = on ? p.v_mean[hoff + d] : 0.f;
    sh.hc.inv_sv[d] = on ? 1.0f / p.v_scale[hoff + d] : 0.f;
  }
  __syncthreads();

  // K, smoothed and balanced: (x − μ_K)·α per channel, rotated (zero for dead items).
  if (int8_clamp_needed(p.k_multiplier))
    quantize_k_items<T, kSpan, true>(p, ln, sh, kraw, live, writes, key_row, valid, row0);
  else
    quantize_k_items<T, kSpan, false>(p, ln, sh, kraw, live, writes, key_row, valid, row0);

  // V: (v − μ_V)/σ_V per channel, as fp16 rows (BALANCED) or E4M3 staged for V^T (FAST).
  if (p.v_raw) return;
  const bool fast = fp8_pv(p.mode);
  const int pitch = p.dpad + 4;
  float mv[8], sv[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    mv[i] = sh.hc.mu_v[ln.c * 8 + i];
    sv[i] = sh.hc.inv_sv[ln.c * 8 + i];
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    float y[8];
    dev::unpack8<kBf16>(vraw[k], y);
#pragma unroll
    for (int i = 0; i < 8; ++i) y[i] = (y[i] - mv[i]) * sv[i];
    const bool on = live(k);
    if (fast) {
      if (ln.c < cpad) {
        uint32_t* dst = reinterpret_cast<uint32_t*>(vt + ln.token(k) * pitch + ln.c * 8);
        dst[0] = on ? dev::pack4_e4m3(y[0], y[1], y[2], y[3]) : 0u;
        dst[1] = on ? dev::pack4_e4m3(y[4], y[5], y[6], y[7]) : 0u;
      }
    } else if (writes(k)) {
      uint4 out = make_uint4(0, 0, 0, 0);
      if (on)
        out = make_uint4(dev::pack2<false>(y[0], y[1]), dev::pack2<false>(y[2], y[3]),
                         dev::pack2<false>(y[4], y[5]), dev::pack2<false>(y[6], y[7]));
      *reinterpret_cast<uint4*>(static_cast<__half*>(p.v_out) + key_row(k) * p.dpad + ln.c * 8) =
          out;
    }
  }
  if (!fast) return;
  // Transposed, key-permuted FP8 V: row d holds the keys of this head at logical positions.
  __syncthreads();
  uint8_t* vo = static_cast<uint8_t*>(p.v_out) + static_cast<int64_t>(head) * p.dpad * p.nk_pad;
  if (p.key_offset == 0 && p.fill_tail) {  // whole 64-key tiles (forward buffers)
    store_vt_tile(vt, pitch, p.dpad, vo, p.nk_pad, row0, tid);
    return;
  }
  // Cache appends start anywhere: one byte per (channel, key).
  for (int e = tid; e < p.dpad * kTokens; e += Lanes::kThreads) {
    const int d = e / kTokens, tok = e % kTokens;
    const int64_t dk = dest_key(tok);
    if (!((row0 + tok < p.n || p.fill_tail) && dk < p.nk_pad)) continue;
    const int64_t col = (dk & ~int64_t(31)) + fp8_v_logical_position(static_cast<int>(dk & 31));
    vo[d * p.nk_pad + col] = vt[tok * pitch + d];
  }
}

}  // namespace prep
}  // namespace int8attn
