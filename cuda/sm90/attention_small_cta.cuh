// What every phase of the small-problem kernel (attention_small_kernel.cuh) shares: its
// compile-time shape (SmallTraits), one CTA's facts and shared-memory regions (SmallCta), and
// the small helpers its phases call.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/mma.cuh"
#include "cuda/sm90/primitives.cuh"
#include "cuda/common/attention_common.cuh"
#include "cuda/sm90/attention_small.h"

namespace int8attn {
namespace small {

template <int DPAD, Mode MODE, bool BF16, int ROWS>
struct SmallTraits {
  static constexpr bool kFast = MODE == Mode::kFast;
  static constexpr int kWarps = kSmallThreads / 32;
  static constexpr int kGroups = ROWS / 16, kSplits = kWarps / kGroups;  // row groups, key splits
  static_assert(ROWS == 64 || ROWS == 32, "rows per CTA");
  // The quantization passes (Q rows, K/V keys): kSmallQuantLanes lanes per row, lane q holding
  // the 8-channel chunks q, q + 4, ... (kCpl of them), so every lane is live at every padded
  // head dim and a warp pass covers kRowsPerPass rows (attention_small.h).
  static constexpr int kLanes = kSmallQuantLanes, kCpl = DPAD / (8 * kLanes);
  static constexpr int kRowsPerPass = 32 / kLanes;
  static_assert(kCpl * 8 * kLanes == DPAD, "chunks per lane");
  static_assert(ROWS <= kWarps * kRowsPerPass, "one Q pass per warp");
  static constexpr int kKSteps = DPAD / 32, kDTiles = DPAD / 8;
  // FAST: P is scaled by 448 (E4M3's largest value) before rounding, folded into the exponent.
  static constexpr float kPOffset = kFast ? 8.807354922057604f : 0.f;  // log2(448)
};

// One CTA (rank `rank` of a cluster of C, on (batch b, kv-head hkv)): its keys, rows and
// shared-memory regions (small_layout).
struct SmallCta {
  int rank, C, b, hkv, tid, warp, lane;
  int L;  // valid keys of the batch
  int D, nkp, kc;
  int key0;        // first key of this CTA's share
  int my_keys;     // valid keys this CTA loads and prepares
  int rows_here;   // keys this CTA writes and sends (small_key_quantum's multiples: every lane of
                   // a warp runs the same passes); those past its valid ones are zeros
  int rows_total;  // packed query rows of the kv-head
  int row_chunks;  // 16-byte chunks of a raw row
  SmallLayout lay;
  uint8_t* smem;
  uint8_t* sK8;
  uint8_t* sV16;
  float* sScratch;
  float* sKs;
  uint8_t* sQ8;
  float* sQs;
  float* sLse;
  float* sKmu;
  float* sKFactor;  // K's channel factor, qm::k_channel_factor(α)
  float* sQFactor;  // Q's, qm::q_channel_factor(α)
  float* sKadd;     // −μ_K times K's factor
  float* sPart;
  // max |q| of this CTA's rows, channel c at (c % 8) * (DPAD / 8) + c / 8: the lanes of a warp
  // (consecutive 8-channel chunks) then update consecutive words, not every eighth one.
  unsigned* sQmax;
  float* sAmax;
  uint8_t* sRawK;
  uint64_t* bar;        // raw K/V of this CTA's share
  uint64_t* kv_bar;     // the other CTAs' V rows and INT8 K
  uint64_t* stats_bar;  // the other CTAs' statistics (end of phase B)
  uint8_t* sRecv;       // rank r's statistics at r·stats_bytes (r != rank)

  // Keys rank r prepares (the rows it sends; whole key-step passes: small_key_quantum).
  __device__ __forceinline__ int keys_of(int r) const { return max(0, min(kc, nkp - r * kc)); }
};

template <int DPAD>
__device__ __forceinline__ SmallCta small_cta(const SmallAttnParams& P, int rank) {
  const AttnKernelParams& p = P.a;
  SmallCta c;
  c.rank = rank;
  c.C = P.cluster;
  c.b = blockIdx.y / p.Hkv;
  c.hkv = blockIdx.y % p.Hkv;
  c.tid = threadIdx.x;
  c.warp = c.tid >> 5;
  c.lane = c.tid & 31;
  c.L = valid_keys(p, c.b);
  c.D = p.D;
  c.nkp = P.nkp;
  c.kc = P.kc;
  c.key0 = rank * c.kc;
  c.my_keys = max(0, min(c.kc, c.L - c.key0));
  c.rows_here = min(c.kc, c.nkp - c.key0);
  c.rows_total = p.G * p.Nq;
  c.row_chunks = c.D / 8;
  return c;
}

template <int DPAD>
__device__ __forceinline__ void small_regions(SmallCta& c, const SmallAttnParams& P, int rows,
                                              uint8_t* smem) {
  const SmallLayout lay =
      small_layout(DPAD, c.D, c.nkp, c.kc, rows, P.stats_by_copy ? P.cluster : 0);
  c.lay = lay;
  c.smem = smem;
  c.sK8 = smem + lay.k8;
  c.sV16 = smem + lay.v16;
  c.sScratch = reinterpret_cast<float*>(smem + lay.scratch);
  c.sKs = reinterpret_cast<float*>(smem + lay.ks);
  c.sQ8 = smem + lay.q8;
  c.sQs = reinterpret_cast<float*>(smem + lay.qs);
  c.sLse = reinterpret_cast<float*>(smem + lay.lse);
  c.sKmu = reinterpret_cast<float*>(smem + lay.consts);
  c.sKFactor = c.sKmu + DPAD;
  c.sQFactor = c.sKFactor + DPAD;
  c.sKadd = c.sQFactor + DPAD;
  c.sPart = reinterpret_cast<float*>(smem + lay.part);
  c.sQmax = reinterpret_cast<unsigned*>(smem + lay.qmax);
  c.sAmax = reinterpret_cast<float*>(smem + lay.amax);
  c.sRawK = smem + lay.rawk;
  c.bar = reinterpret_cast<uint64_t*>(smem + lay.bar);
  c.kv_bar = c.bar + 1;
  c.stats_bar = c.bar + 2;
  c.sRecv = smem + lay.recv;
}

// This CTA's rows [r0, r1) of a K/V array (of its rows_here) to every other CTA.
__device__ __forceinline__ void send_rows(const SmallCta& cta, uint8_t* rows, int pitch, int r0,
                                          int r1) {
  if (cta.tid < cta.C && cta.tid != cta.rank && r1 > r0)  // one thread per destination CTA
    dev::bulk_copy_to_cluster_rank(rows + (cta.key0 + r0) * pitch, rows + (cta.key0 + r0) * pitch,
                                   static_cast<uint32_t>((r1 - r0) * pitch), cta.kv_bar,
                                   static_cast<uint32_t>(cta.tid));
}

// A chunk's 8 values of a per-channel constant: two 16-byte loads (lanes of a row read
// consecutive chunks: no bank conflicts). Channels past the head dim have α = 1, μ = 0 and
// raw zeros, so they come out 0 with no per-element select.
__device__ __forceinline__ void const8(const float* a, int c, float (&x)[8]) {
  const float4* v = reinterpret_cast<const float4*>(a + c);
  const float4 lo = v[0], hi = v[1];
  x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w;
  x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
}

// Two weights of P as the pair that the P·V MMA takes, in V's type (fp16 or bf16): FAST rounds
// them to E4M3 first (exact in both types), BALANCED rounds to the type directly.
template <bool kFp8, bool kBf16>
__device__ __forceinline__ uint32_t pv_pair(float lo, float hi) {
  if constexpr (kFp8) {
    const __nv_fp8x2_storage_t e =
        __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(e, __NV_E4M3);
    if constexpr (kBf16) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
      return dev::pack2<true>(f.x, f.y);
    }
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    return dev::pack2<kBf16>(lo, hi);
  }
}

// Elementwise maximum (kMax) or minimum of two fp16 (kBf16 false) or bf16 pairs: one HMNMX2.
template <bool kBf16, bool kMax>
__device__ __forceinline__ uint32_t pair_extreme(uint32_t a, uint32_t b) {
  using T = std::conditional_t<kBf16, __nv_bfloat162, __half2>;
  const T x = *reinterpret_cast<const T*>(&a), y = *reinterpret_cast<const T*>(&b);
  const T m = kMax ? __hmax2(x, y) : __hmin2(x, y);
  return *reinterpret_cast<const uint32_t*>(&m);
}

// A query row of this CTA: its packed row (q-heads of a group stacked, pitch Nq).
struct QRow {
  bool valid;
  int h, i;
};
__device__ __forceinline__ QRow q_row(const AttnKernelParams& p, int hkv, int packed) {
  QRow r;
  const int g = packed / p.Nq;
  r.i = packed - g * p.Nq;
  r.valid = g < p.G;
  r.h = hkv * p.G + (r.valid ? g : 0);
  return r;
}

}  // namespace small
}  // namespace int8attn
