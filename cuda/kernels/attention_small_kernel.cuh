// The small-problem kernel (see attention_small.h): one thread-block cluster per (batch,
// kv-head), one launch for the whole forward. Phases of a CTA (rank r of C):
//   A  its 64 query rows into registers; its share of the keys, raw K and V, into shared memory
//   B  statistics of that share (channel sums, maxima, minima of K and V) and max |q| of its rows
//   -- cluster barrier --
//   C  every CTA combines all ranks' statistics (distributed shared memory): μ_K, α, μ_V, σ_V
//   D  INT8 Q of its rows into its own shared memory; INT8 K (+ per-key scales) and fp16 /
//      E4M3-valued V of its keys into EVERY CTA's shared memory
//   -- cluster barrier --
//   E  each pair of warps attends 16 rows, one warp the even 64-key tiles, one the odd ones
//      (online softmax), then the pair's halves are merged and O and LSE written.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "common/quant_math.h"
#include "device/mma.cuh"
#include "device/sm90.cuh"
#include "kernels/attention_common.cuh"
#include "kernels/attention_small.h"

namespace int8attn {
namespace small {

namespace cg = cooperative_groups;

// Eight fp16 / bf16 values of a 16-byte word as floats.
template <bool kBf16>
__device__ __forceinline__ void unpack8(const uint4& w, float (&x)[8]) {
  const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f;
    if constexpr (kBf16) f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u[i]));
    else f = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
    x[2 * i] = f.x;
    x[2 * i + 1] = f.y;
  }
}

// Two floats as the fp16 pair that the P·V MMA takes: FAST rounds them to E4M3 first (exact in
// fp16), BALANCED rounds to fp16 directly.
template <bool kFp8>
__device__ __forceinline__ uint32_t pv_pair(float lo, float hi) {
  if constexpr (kFp8) {
    const __nv_fp8x2_storage_t e =
        __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(e, __NV_E4M3);
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    return dev::pack2<false>(lo, hi);
  }
}

// INT8 Q rows at the small layout's pitch (SmallLayout::kp = DPAD + 16), for quantize_q_chunk.
template <int DPAD>
struct PitchedQTile {
  static __device__ __forceinline__ int offset(int r, int c) { return r * (DPAD + 16) + c; }
};

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

template <int DPAD, int MODE, bool BF16>
__global__ void __launch_bounds__(kSmallThreads, 1)
    attention_small_kernel(const __grid_constant__ SmallAttnParams P) {
  constexpr bool kFast = MODE == kModeFast;
  using QC = QChunks<DPAD>;
  constexpr int kLanes = QC::kLanes, kRowsPerPass = QC::kRowsPerPass;
  constexpr int kWarps = kSmallThreads / 32;
  constexpr int kQRowsPerWarp = kSmallRows / kWarps;  // in the Q phases
  constexpr int kPasses = kQRowsPerWarp / kRowsPerPass;
  static_assert(kPasses >= 1 && kQRowsPerWarp % kRowsPerPass == 0, "Q row mapping");
  const AttnKernelParams& p = P.a;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int C = P.cluster;
  const int b = blockIdx.y / p.Hkv, hkv = blockIdx.y % p.Hkv;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int L = p.Nk;
  if (p.k_lengths != nullptr) {
    const int v = p.k_lengths[b * p.k_lengths_stride];
    L = v < 0 ? 0 : (v > p.Nk ? p.Nk : v);
  }
  const int D = p.D, nkp = P.nkp, kc = P.kc;
  const int key0 = rank * kc;
  const int my_keys = max(0, min(kc, L - key0));  // valid keys this CTA loads and prepares

  extern __shared__ __align__(128) uint8_t smem[];
  const SmallLayout lay = small_layout(DPAD, D, nkp, kc);
  uint8_t* sK8 = smem + lay.k8;
  uint8_t* sV16 = smem + lay.v16;
  float* sScratch = reinterpret_cast<float*>(smem + lay.scratch);
  float* sKs = reinterpret_cast<float*>(smem + lay.ks);
  uint8_t* sQ8 = smem + lay.q8;
  float* sQs = reinterpret_cast<float*>(smem + lay.qs);
  float* sLse = reinterpret_cast<float*>(smem + lay.lse);
  float* sKmu = reinterpret_cast<float*>(smem + lay.consts);
  float* sAlpha = sKmu + DPAD;
  float* sVmu = sAlpha + DPAD;
  float* sVsig = sVmu + DPAD;
  float* sVinv = sVsig + DPAD;  // 1/σ_V
  float* sPart = reinterpret_cast<float*>(smem + lay.part);
  unsigned* sQmax = reinterpret_cast<unsigned*>(smem + lay.qmax);
  float* sAmax = reinterpret_cast<float*>(smem + lay.amax);
  uint8_t* sRawK = smem + lay.rawk;
  uint8_t* sRawV = smem + lay.rawv;

  // ---- A: this CTA's share of raw K/V (one bulk copy per row), its Q rows into registers ---
  const int row_chunks = D / 8;  // 16-byte chunks of a raw row
  const int rows_total = p.G * p.Nq;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + lay.bar);
  if (warp == 0) {
    // ptxas may issue the init from the uniform datapath on another lane's behalf: the
    // __syncwarp orders it before lane 0's arrive for racecheck too.
    if (lane == 0) {
      dev::mbar_init(bar, 1);
      dev::mbar_init_fence();
    }
    __syncwarp();
    if (lane == 0) dev::mbar_arrive_expect_tx(bar, static_cast<uint32_t>(2 * my_keys * D * 2));
  }
  for (int c = tid; c < DPAD; c += kSmallThreads) sQmax[c] = 0u;
  __syncthreads();
  {
    const char* gk = static_cast<const char*>(P.k) +
                     2 * (b * P.k_stride[0] + hkv * P.k_stride[1] + key0 * P.k_stride[2]);
    const char* gv = static_cast<const char*>(P.v) +
                     2 * (b * P.v_stride[0] + hkv * P.v_stride[1] + key0 * P.v_stride[2]);
    for (int r = tid; r < 2 * my_keys; r += kSmallThreads) {
      const bool is_v = r >= my_keys;
      const int row = is_v ? r - my_keys : r;
      dev::bulk_load((is_v ? sRawV : sRawK) + row * D * 2,
                     is_v ? gv + 2 * row * P.v_stride[2] : gk + 2 * row * P.k_stride[2], D * 2, bar);
    }
  }
  // Q: kLanes lanes per row (one 8-channel chunk each), all passes' 16-byte loads in flight
  // together. (Rows through bulk copies and rolled per-row loops measured slower: NOTES run 41.)
  const int c0 = (lane % kLanes) * 8;
  uint4 qraw[kPasses];
  bool qlive[kPasses];
#pragma unroll
  for (int ps = 0; ps < kPasses; ++ps) {
    const int packed = rank * kSmallRows + warp * kQRowsPerWarp + ps * kRowsPerPass + lane / kLanes;
    const QRow r = q_row(p, hkv, packed);
    qlive[ps] = r.valid && packed < rows_total && c0 < D;
    const int64_t off = b * p.q_stride[0] + r.h * p.q_stride[1] + r.i * p.q_stride[2] + c0;
    qraw[ps] = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) +
                                               (qlive[ps] ? off : 0));
  }

  // ---- B: statistics of this CTA's share ---------------------------------------------------
  dev::mbar_wait(bar, 0);
  if (P.balance) {  // max |q| per channel over this CTA's rows
    float qm[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) qm[i] = 0.f;
#pragma unroll
    for (int ps = 0; ps < kPasses; ++ps) {
      float x[8];
      unpack8<BF16>(qraw[ps], x);
#pragma unroll
      for (int i = 0; i < 8; ++i) qm[i] = fmaxf(qm[i], qlive[ps] ? fabsf(x[i]) : 0.f);
    }
#pragma unroll
    for (int o = kLanes; o < 32; o <<= 1)
#pragma unroll
      for (int i = 0; i < 8; ++i) qm[i] = fmaxf(qm[i], __shfl_xor_sync(0xffffffffu, qm[i], o));
    if (lane < kLanes && c0 < D)
#pragma unroll
      for (int i = 0; i < 8; ++i) atomicMax(&sQmax[c0 + i], __float_as_uint(qm[i]));  // >= 0
  }
  {
    // Thread -> (8-channel chunk, group of keys); per-thread sums, maxima and minima of K and V.
    const int groups = kSmallThreads / row_chunks;
    const int grp = tid / row_chunks, ch = tid - grp * row_chunks;
    if (grp < groups) {
      float st[6][8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        st[0][i] = st[3][i] = 0.f;
        st[1][i] = st[4][i] = -INFINITY;
        st[2][i] = st[5][i] = INFINITY;
      }
      for (int r = grp; r < my_keys; r += groups) {
        float k[8], v[8];
        unpack8<BF16>(*reinterpret_cast<const uint4*>(sRawK + (r * row_chunks + ch) * 16), k);
        unpack8<BF16>(*reinterpret_cast<const uint4*>(sRawV + (r * row_chunks + ch) * 16), v);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          st[0][i] += k[i];
          st[1][i] = fmaxf(st[1][i], k[i]);
          st[2][i] = fminf(st[2][i], k[i]);
          st[3][i] += v[i];
          st[4][i] = fmaxf(st[4][i], v[i]);
          st[5][i] = fminf(st[5][i], v[i]);
        }
      }
#pragma unroll
      for (int s = 0; s < 6; ++s)
#pragma unroll
        for (int i = 0; i < 8; ++i) sScratch[(grp * 6 + s) * D + ch * 8 + i] = st[s][i];
    }
    __syncthreads();
    for (int c = tid; c < D; c += kSmallThreads) {
      float st[6] = {0.f, -INFINITY, INFINITY, 0.f, -INFINITY, INFINITY};
      for (int g = 0; g < groups; ++g) {
        const float* s = sScratch + g * 6 * D + c;
        st[0] += s[0];
        st[1] = fmaxf(st[1], s[D]);
        st[2] = fminf(st[2], s[2 * D]);
        st[3] += s[3 * D];
        st[4] = fmaxf(st[4], s[4 * D]);
        st[5] = fminf(st[5], s[5 * D]);
      }
#pragma unroll
      for (int s = 0; s < 6; ++s) sPart[s * DPAD + c] = st[s];
    }
  }
  cluster.sync();  // every rank's statistics are published

  // ---- C: the head's constants from all ranks' statistics ----------------------------------
  for (int c = tid; c < DPAD; c += kSmallThreads) {
    float kmu = 0.f, alpha = 1.f, vmu = 0.f, vsig = 1.f;
    if (c < D) {
      float st[6] = {0.f, -INFINITY, INFINITY, 0.f, -INFINITY, INFINITY};
      float qmax = 0.f;
      for (int r = 0; r < C; ++r) {
        const float* s = cluster.map_shared_rank(sPart, r) + c;
        st[0] += s[0];
        st[1] = fmaxf(st[1], s[DPAD]);
        st[2] = fminf(st[2], s[2 * DPAD]);
        st[3] += s[3 * DPAD];
        st[4] = fmaxf(st[4], s[4 * DPAD]);
        st[5] = fminf(st[5], s[5 * DPAD]);
        qmax = fmaxf(qmax, __uint_as_float(*cluster.map_shared_rank(sQmax + c, r)));
      }
      if (L > 0) {
        const float inv_n = 1.0f / static_cast<float>(L);
        kmu = P.smooth_k ? st[0] * inv_n : 0.f;
        vmu = P.smooth_v ? st[3] * inv_n : 0.f;
        const float kabs = fmaxf(st[1] - kmu, kmu - st[2]);
        const float vabs = fmaxf(st[4] - vmu, vmu - st[5]);
        alpha = P.balance ? qm::balance_factor(qmax, kabs) : 1.f;
        vsig = qm::v_scale(vabs, kFast, P.v_headroom);
      }
    }
    sKmu[c] = kmu;
    sAlpha[c] = alpha;
    sVmu[c] = vmu;
    sVsig[c] = vsig;
    sVinv[c] = 1.0f / vsig;
  }
  __syncthreads();

  // ---- D: INT8 Q (own rows), INT8 K and V (own keys, into every CTA) -----------------------
  {
    float kmu[8], inv_alpha[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      kmu[i] = c0 < DPAD ? sKmu[c0 + i] : 0.f;
      inv_alpha[i] = c0 < DPAD ? 1.0f / sAlpha[c0 + i] : 1.f;
    }
#pragma unroll
    for (int ps = 0; ps < kPasses; ++ps)
      quantize_q_chunk<DPAD, kLanes, PitchedQTile<DPAD>>(
          p, qraw[ps], qlive[ps], kmu, inv_alpha,
          warp * kQRowsPerWarp + ps * kRowsPerPass + lane / kLanes, c0, sQ8, sQs, sLse);
  }
  // K and V of this CTA's keys: kLanes lanes per key (the Q mapping), kRowsPerPass keys per
  // warp a pass, each lane's channel constants in registers. A key's absmax is a shuffle
  // reduction (per-item shared atomics, 20 lanes on one address at head dim 160, cost 2.2 us at
  // sd15_l3: NOTES run 41); with per-key scales the key is quantized in the same pass.
  float kmu[8], alpha[8], vmu[8], vinv[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int c = c0 < DPAD ? c0 + i : 0;
    kmu[i] = sKmu[c];
    alpha[i] = sAlpha[c];
    vmu[i] = sVmu[c];
    vinv[i] = sVinv[c];
  }
  const bool chunk_live = c0 < D;
  // (k − μ_K)·α of key r (0 past L or D) and the key's absmax over its kLanes lanes.
  auto k_row = [&](int r, float (&x)[8]) -> float {
    const bool live = chunk_live && r < my_keys;
    uint4 w = make_uint4(0u, 0u, 0u, 0u);
    if (live) w = *reinterpret_cast<const uint4*>(sRawK + (r * row_chunks + c0 / 8) * 16);
    unpack8<BF16>(w, x);
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[i] = live ? (x[i] - kmu[i]) * alpha[i] : 0.f;
      amax = fmaxf(amax, fabsf(x[i]));
    }
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    return amax;
  };
  // Keys this CTA writes (multiples of 64, so every lane of a warp runs the same passes).
  const int rows_here = min(kc, nkp - key0);
  constexpr int kKeyStep = kWarps * kRowsPerPass;
  const int r_first = warp * kRowsPerPass + lane / kLanes;
  if (!P.k_per_token) {
    for (int r = r_first; r < rows_here; r += kKeyStep) {
      float x[8];
      const float amax = k_row(r, x);
      if (lane % kLanes == 0) sAmax[r] = amax;
    }
    __syncthreads();
    if (warp < kc / kSmallKeyTile) {  // one warp per 64-key block (kc <= kSmallMaxKeys)
      float m = fmaxf(sAmax[warp * 64 + lane], sAmax[warp * 64 + 32 + lane]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
      if (lane == 0) sAmax[kc + warp] = m;
    }
    __syncthreads();
  }
  // Every cluster CTA's K, V and key-scale buffers (generic addresses into distributed shared
  // memory, mapped once; st.shared::cluster to mapa addresses measured the same, run 41g).
  uint8_t* dst_k[kSmallMaxCluster];
  uint8_t* dst_v[kSmallMaxCluster];
  float* dst_s[kSmallMaxCluster];
#pragma unroll
  for (int d = 0; d < kSmallMaxCluster; ++d)
    if (d < C) {
      dst_k[d] = cluster.map_shared_rank(sK8, d);
      dst_v[d] = cluster.map_shared_rank(sV16, d);
      dst_s[d] = cluster.map_shared_rank(sKs, d);
    }
  for (int r = r_first; r < rows_here; r += kKeyStep) {
    const int j = key0 + r;  // key index in the head
    float x[8];
    const float amax = k_row(r, x);
    const float scale = qm::int8_scale(P.k_per_token ? amax : sAmax[kc + r / 64], P.k_multiplier);
    const float inv = 1.0f / scale;
    uint32_t w[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      w[i / 4] |= static_cast<uint32_t>(static_cast<uint8_t>(qm::quantize_int8(x[i], inv)))
                  << (8 * (i % 4));
    // V: (v − μ_V)/σ as fp16 (BALANCED) or E4M3 held in fp16 (FAST); 0 past L and D.
    const bool live = chunk_live && r < my_keys;
    uint4 vw = make_uint4(0u, 0u, 0u, 0u);
    if (live) vw = *reinterpret_cast<const uint4*>(sRawV + (r * row_chunks + c0 / 8) * 16);
    float v[8];
    unpack8<BF16>(vw, v);
    uint32_t h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float y0 = live ? (v[2 * i] - vmu[2 * i]) * vinv[2 * i] : 0.f;
      float y1 = live ? (v[2 * i + 1] - vmu[2 * i + 1]) * vinv[2 * i + 1] : 0.f;
      if constexpr (!kFast) {
        y0 = fmaxf(-65504.f, fminf(65504.f, y0));
        y1 = fmaxf(-65504.f, fminf(65504.f, y1));
      }
      h[i] = pv_pair<kFast>(y0, y1);
    }
    if (c0 < DPAD) {
#pragma unroll
      for (int d = 0; d < kSmallMaxCluster; ++d)
        if (d < C) {
          *reinterpret_cast<uint2*>(dst_k[d] + j * lay.kp + c0) = make_uint2(w[0], w[1]);
          *reinterpret_cast<uint4*>(dst_v[d] + j * lay.vp + 2 * c0) =
              make_uint4(h[0], h[1], h[2], h[3]);
          if (c0 == 0) dst_s[d][j] = scale;
        }
    }
  }
  cluster.sync();  // every CTA holds all of K and V; no remote access after this point

  // ---- E: attention; warp pair (w, w + 4) shares row group w % 4, tiles alternate ------------
  const int g8 = lane >> 2, t4 = lane & 3;
  const int rg = warp & 3, half = warp >> 2;
  const int row0 = rank * kSmallRows + rg * 16;  // first packed row of the group
  const bool group_live = row0 < rows_total;
  constexpr int kKSteps = DPAD / 32, kDTiles = DPAD / 8;
  uint32_t qf[kKSteps][4];
  {
    const int m = lane >> 3;
    const int row = rg * 16 + (m & 1) * 8 + (lane & 7);
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk)
      dev::ldmatrix_x4(qf[kk], sQ8 + row * lay.kp + kk * 32 + (m >> 1) * 16);
  }
  const float q_scale_row[2] = {sQs[rg * 16 + g8], sQs[rg * 16 + g8 + 8]};
  RowInfo my_rows[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const int packed = row0 + g8 + 8 * rh;
    my_rows[rh] = row_info(p, hkv, packed, L);
    if (packed >= rows_total) my_rows[rh].valid = false, my_rows[rh].hi = 0;
  }
  int hi_max = max(my_rows[0].hi, my_rows[1].hi), hi_min = min(my_rows[0].valid ? my_rows[0].hi : L,
                                                               my_rows[1].valid ? my_rows[1].hi : L);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    hi_max = max(hi_max, __shfl_xor_sync(0xffffffffu, hi_max, o));
    hi_min = min(hi_min, __shfl_xor_sync(0xffffffffu, hi_min, o));
  }

  float acc[kDTiles][4];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  // FAST: P is scaled by 448 (E4M3's largest value) before rounding, folded into the exponent.
  constexpr float kPOffset = kFast ? 8.807354922057604f : 0.f;  // log2(448)
  const int tiles = group_live ? (hi_max + kSmallKeyTile - 1) / kSmallKeyTile : 0;
  for (int t = half; t < tiles; t += 2) {
    const int j0 = t * kSmallKeyTile;
    int si[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) si[n][0] = si[n][1] = si[n][2] = si[n][3] = 0;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk)
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t kf[4];
        const int m = lane >> 3;
        const int key = j0 + np * 16 + (m >> 1) * 8 + (lane & 7);
        dev::ldmatrix_x4(kf, sK8 + key * lay.kp + kk * 32 + (m & 1) * 16);
        dev::mma_s8(si[2 * np], qf[kk], kf[0], kf[1]);
        dev::mma_s8(si[2 * np + 1], qf[kk], kf[2], kf[3]);
      }
    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const float ks0 = sKs[j0 + n * 8 + 2 * t4], ks1 = sKs[j0 + n * 8 + 2 * t4 + 1];
      s[n][0] = dev::small_int_to_float(si[n][0]) * (q_scale_row[0] * ks0);
      s[n][1] = dev::small_int_to_float(si[n][1]) * (q_scale_row[0] * ks1);
      s[n][2] = dev::small_int_to_float(si[n][2]) * (q_scale_row[1] * ks0);
      s[n][3] = dev::small_int_to_float(si[n][3]) * (q_scale_row[1] * ks1);
    }
    if (j0 + kSmallKeyTile > hi_min) {  // some row of the group does not see all of the tile
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j0 + n * 8 + 2 * t4 + (e & 1) >= my_rows[e >> 1].hi) s[n][e] = -INFINITY;
    }
    online_softmax_step(s, m_run, l_run, acc, kPOffset);
    // O += P·V, 16 keys a step; the row sums add the rounded P the MMA sees.
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t pa[4];
      pa[0] = pv_pair<kFast>(s[2 * ks][0], s[2 * ks][1]);
      pa[1] = pv_pair<kFast>(s[2 * ks][2], s[2 * ks][3]);
      pa[2] = pv_pair<kFast>(s[2 * ks + 1][0], s[2 * ks + 1][1]);
      pa[3] = pv_pair<kFast>(s[2 * ks + 1][2], s[2 * ks + 1][3]);
      l_run[0] += dev::sum2<false>(pa[0]) + dev::sum2<false>(pa[2]);
      l_run[1] += dev::sum2<false>(pa[1]) + dev::sum2<false>(pa[3]);
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        uint32_t vf[4];
        const int m = lane >> 3;
        const int key = j0 + ks * 16 + (m & 1) * 8 + (lane & 7);
        dev::ldmatrix_x4_trans(vf, sV16 + key * lay.vp + dp * 32 + (m >> 1) * 16);
        dev::mma_16816<false>(acc[2 * dp], pa, vf[0], vf[1]);
        dev::mma_16816<false>(acc[2 * dp + 1], pa, vf[2], vf[3]);
      }
    }
  }
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 1);
    l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 2);
  }

  // ---- merge the odd-tile half into the even-tile half (raw K/V are dead: their space) -------
  float* sMergeAcc = reinterpret_cast<float*>(smem + lay.merge);  // [4][kDTiles][4][32]
  float* sMergeML = sMergeAcc + 4 * kDTiles * 4 * 32;             // [4][2 m,l][2][32]
  if (half == 1 && tiles > 1) {
#pragma unroll
    for (int n = 0; n < kDTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sMergeAcc[((rg * kDTiles + n) * 4 + e) * 32 + lane] = acc[n][e];
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      sMergeML[((rg * 2 + 0) * 2 + rh) * 32 + lane] = m_run[rh];
      sMergeML[((rg * 2 + 1) * 2 + rh) * 32 + lane] = l_run[rh];
    }
  }
  __syncthreads();
  // O leaves through shared memory (K/V are dead: every warp has passed the barrier above):
  // the merged, normalised rows with V's scale and mean in the output type, then 16-byte stores
  // by all threads in a rolled loop. Two unrolled store paths per row pair were 40% of the
  // kernel's stall samples, most of them waiting on instruction fetch (NOTES run 41).
  uint8_t* sOut = smem + lay.out;  // [64 rows][lay.vp bytes]
  if (half == 0 && group_live) {
    if (tiles > 1) {
      float a0[2], a1[2];
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        const float m1 = sMergeML[((rg * 2 + 0) * 2 + rh) * 32 + lane];
        const float l1 = sMergeML[((rg * 2 + 1) * 2 + rh) * 32 + lane];
        const float mx = fmaxf(m_run[rh], m1);
        const float ref = (mx == -INFINITY) ? 0.f : mx;
        a0[rh] = dev::fast_exp2(m_run[rh] - ref);
        a1[rh] = dev::fast_exp2(m1 - ref);
        m_run[rh] = mx;
        l_run[rh] = l_run[rh] * a0[rh] + l1 * a1[rh];
      }
#pragma unroll
      for (int n = 0; n < kDTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[n][e] = acc[n][e] * a0[e >> 1] +
                      sMergeAcc[((rg * kDTiles + n) * 4 + e) * 32 + lane] * a1[e >> 1];
    }
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      const RowInfo& r = my_rows[rh];
      const int row_local = rg * 16 + g8 + 8 * rh;
      const bool empty = !(l_run[rh] > 0.f);
      const float inv_l = empty ? 0.f : 1.0f / l_run[rh];
#pragma unroll
      for (int n = 0; n < kDTiles; ++n) {
        const int c = n * 8 + 2 * t4;
        if (c >= D) continue;  // D % 8 == 0: a pair is all in or all out
        const float o0 = empty ? 0.f : acc[n][2 * rh] * inv_l * sVsig[c] + sVmu[c];
        const float o1 = empty ? 0.f : acc[n][2 * rh + 1] * inv_l * sVsig[c + 1] + sVmu[c + 1];
        *reinterpret_cast<uint32_t*>(sOut + row_local * lay.vp + 2 * c) =
            BF16 ? dev::pack2<true>(o0, o1) : dev::pack2<false>(o0, o1);
      }
      if (t4 == 0 && r.valid && p.lse != nullptr) {
        const float lse = empty ? -INFINITY
                                : (m_run[rh] + log2f(l_run[rh]) - kPOffset) * 0.6931471805599453f +
                                      sLse[row_local];
        p.lse[b * p.lse_stride[0] + r.h * p.lse_stride[1] + r.i * p.lse_stride[2]] = lse;
      }
    }
  }
  __syncthreads();
  for (int it = tid; it < kSmallRows * row_chunks; it += kSmallThreads) {
    const int row = it / row_chunks, ch = it - row * row_chunks;
    const int packed = rank * kSmallRows + row;
    if (packed >= rows_total) break;  // rows only grow
    const QRow r = q_row(p, hkv, packed);
    uint16_t* dst = static_cast<uint16_t*>(p.o) + b * p.o_stride[0] + r.h * p.o_stride[1] +
                    r.i * p.o_stride[2] + ch * 8;
    dev::st_global_16(dst, *reinterpret_cast<const uint4*>(sOut + row * lay.vp + ch * 16));
  }
}

}  // namespace small
}  // namespace int8attn
