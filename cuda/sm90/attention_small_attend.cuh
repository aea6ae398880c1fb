// Phase E of the small-problem kernel (attention_small_kernel.cuh): a warp's 16 query rows
// against its interleaved 64-key tiles (online softmax), then the merge of the key splits'
// partial results through shared memory and the output rows.
#pragma once

#include <cstdint>

#include "common/quant_math.h"
#include "cuda/sm90/attention_small_cta.cuh"

namespace int8attn {
namespace small {

// One warp's running state over its key tiles: O (kDTiles n-tiles of 8 channels), and per row
// half the running maximum and sum.
template <typename Tr>
struct WarpRows {
  float acc[Tr::kDTiles][4];
  float m_run[2], l_run[2];
};

// The INT8 Q fragments of row group rg (16 rows of sQ8), which stay in registers for the whole
// key loop.
template <typename Tr>
__device__ __forceinline__ void q_fragments(const SmallCta& cta, int rg,
                                            uint32_t (&qf)[Tr::kKSteps][4]) {
  const int lane = cta.lane;
  const int m = lane >> 3;
  const int row = rg * 16 + (m & 1) * 8 + (lane & 7);
#pragma unroll
  for (int kk = 0; kk < Tr::kKSteps; ++kk)
    dev::ldmatrix_x4(qf[kk], cta.sQ8 + row * cta.lay.kp + kk * 32 + (m >> 1) * 16);
}

// Rows of row group rg (Q fragments qf, scales q_scale_row) against key tiles split,
// split + kSplits, ... up to the group's largest visible key (hi_max; per-element masking on
// tiles past hi_min); leaves the quad-summed row sums in w.l_run.
template <typename Tr, bool BF16>
__device__ __forceinline__ void attend_key_tiles(const SmallCta& cta, int split, bool group_live,
                                                 const uint32_t (&qf)[Tr::kKSteps][4],
                                                 const float (&q_scale_row)[2],
                                                 const RowInfo (&my_rows)[2], int hi_max,
                                                 int hi_min, WarpRows<Tr>& w) {
  constexpr int kKSteps = Tr::kKSteps, kDTiles = Tr::kDTiles;
  const int lane = cta.lane, t4 = lane & 3;
  const SmallLayout& lay = cta.lay;
#pragma unroll
  for (int n = 0; n < kDTiles; ++n) w.acc[n][0] = w.acc[n][1] = w.acc[n][2] = w.acc[n][3] = 0.f;
  w.m_run[0] = w.m_run[1] = -INFINITY;
  w.l_run[0] = w.l_run[1] = 0.f;
  const int tiles = group_live ? (hi_max + kSmallKeyTile - 1) / kSmallKeyTile : 0;
  for (int t = split; t < tiles; t += Tr::kSplits) {
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
        dev::ldmatrix_x4(kf, cta.sK8 + key * lay.kp + kk * 32 + (m & 1) * 16);
        dev::mma_s8(si[2 * np], qf[kk], kf[0], kf[1]);
        dev::mma_s8(si[2 * np + 1], qf[kk], kf[2], kf[3]);
      }
    float s[8][4];
    key_scaled_scores(si, cta.sKs + j0, t4, s);
    if (j0 + kSmallKeyTile > hi_min) {  // some row of the group does not see all of the tile
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j0 + n * 8 + 2 * t4 + (e & 1) >= my_rows[e >> 1].hi) s[n][e] = -INFINITY;
    }
    online_softmax_step(s, q_scale_row, w.m_run, w.l_run, w.acc, Tr::kPOffset);
    // O += P·V, 16 keys a step; the row sums add the rounded P the MMA sees, as P times a
    // column of ones on the tensor cores (every lane of a quad gets the full sums; lane t4 == 0
    // adds them, as the quad is summed after the loop).
    float lt[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t pa[4];
      pa[0] = pv_pair<Tr::kFast, BF16>(s[2 * ks][0], s[2 * ks][1]);
      pa[1] = pv_pair<Tr::kFast, BF16>(s[2 * ks][2], s[2 * ks][3]);
      pa[2] = pv_pair<Tr::kFast, BF16>(s[2 * ks + 1][0], s[2 * ks + 1][1]);
      pa[3] = pv_pair<Tr::kFast, BF16>(s[2 * ks + 1][2], s[2 * ks + 1][3]);
      constexpr uint32_t kOnes = BF16 ? 0x3f803f80u : 0x3c003c00u;  // 1.0 x2 in V's type
      dev::mma_16816<BF16>(lt, pa, kOnes, kOnes);
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        uint32_t vf[4];
        const int m = lane >> 3;
        const int key = j0 + ks * 16 + (m & 1) * 8 + (lane & 7);
        dev::ldmatrix_x4_trans(vf, cta.sV16 + key * lay.vp + dp * 32 + (m >> 1) * 16);
        dev::mma_16816<BF16>(w.acc[2 * dp], pa, vf[0], vf[1]);
        dev::mma_16816<BF16>(w.acc[2 * dp + 1], pa, vf[2], vf[3]);
      }
    }
    if (t4 == 0) {
      w.l_run[0] += lt[0];
      w.l_run[1] += lt[2];
    }
  }
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    w.l_run[rh] += __shfl_xor_sync(0xffffffffu, w.l_run[rh], 1);
    w.l_run[rh] += __shfl_xor_sync(0xffffffffu, w.l_run[rh], 2);
  }
}

// The merge: every split's partial O, maxima and sums through shared memory (the region
// overlays K/V or raw K/V, small_layout: the barrier first lets every warp finish its key
// loop). Then each warp of a row group merges and normalises 1/kSplits of the columns, so the
// merge and the output staging are spread over all warps; O leaves through shared memory (K/V
// are dead): the merged, normalised rows in the output type, then 16-byte stores by all threads
// in a rolled loop (two unrolled store paths per row pair were 40% of the kernel's stall
// samples, most of them waiting on instruction fetch). Writes the LSE where asked.
template <typename Tr, bool BF16, int ROWS>
__device__ __forceinline__ void merge_and_store(const SmallCta& cta, const AttnKernelParams& p,
                                                int rg, int split, bool group_live,
                                                const RowInfo (&my_rows)[2],
                                                const WarpRows<Tr>& w) {
  constexpr int kGroups = Tr::kGroups, kSplits = Tr::kSplits, kDTiles = Tr::kDTiles;
  const int lane = cta.lane, g8 = lane >> 2, t4 = lane & 3, tid = cta.tid, D = cta.D;
  const SmallLayout& lay = cta.lay;
  const int msplits = lay.merge_splits;  // splits that can hold keys: min(kSplits, nkp / 64)
  float* sMergeAcc =
      reinterpret_cast<float*>(cta.smem + lay.merge);  // [kGroups][msplits][kDTiles][32][4]
  float* sMergeML =
      sMergeAcc + kGroups * msplits * kDTiles * 32 * 4;  // [kGroups][msplits][2][2][32]
  dev::cluster_wait();                                   // (see the arrive)
  __syncthreads();
  if (split < msplits) {
    float4* dst =
        reinterpret_cast<float4*>(sMergeAcc) + (rg * msplits + split) * kDTiles * 32 + lane;
#pragma unroll
    for (int n = 0; n < kDTiles; ++n)
      dst[n * 32] = make_float4(w.acc[n][0], w.acc[n][1], w.acc[n][2], w.acc[n][3]);
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      sMergeML[(((rg * msplits + split) * 2 + 0) * 2 + rh) * 32 + lane] = w.m_run[rh];
      sMergeML[(((rg * msplits + split) * 2 + 1) * 2 + rh) * 32 + lane] = w.l_run[rh];
    }
  }
  __syncthreads();
  uint8_t* sOut = cta.smem + lay.out;  // [ROWS rows][lay.vp bytes]
  if (group_live) {
    float wt[kSplits][2], l_tot[2], m_tot[2];
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      float mx = -INFINITY;
#pragma unroll
      for (int sp = 0; sp < kSplits; ++sp)
        if (sp < msplits)
          mx = fmaxf(mx, sMergeML[(((rg * msplits + sp) * 2 + 0) * 2 + rh) * 32 + lane]);
      const float ref = (mx == -INFINITY) ? 0.f : mx;
      float l = 0.f;
#pragma unroll
      for (int sp = 0; sp < kSplits; ++sp) {
        wt[sp][rh] = 0.f;
        if (sp < msplits) {
          const float* ml = sMergeML + ((rg * msplits + sp) * 2) * 2 * 32;
          wt[sp][rh] = dev::fast_exp2(ml[rh * 32 + lane] - ref);
          l += ml[(2 + rh) * 32 + lane] * wt[sp][rh];
        }
      }
      m_tot[rh] = mx;
      l_tot[rh] = l;
    }
    constexpr int kCols = kDTiles / kSplits;  // this warp's column tiles
    static_assert(kDTiles % kSplits == 0, "column slices");
    float inv_l[2];
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) inv_l[rh] = l_tot[rh] == 0.f ? 0.f : 1.0f / l_tot[rh];
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int n = split * kCols + j;
      const int c = n * 8 + 2 * t4;
      if (c >= D) continue;               // D % 8 == 0: a pair is all in or all out
      float o[4] = {0.f, 0.f, 0.f, 0.f};  // rows g8 and g8 + 8, columns c and c + 1
#pragma unroll
      for (int sp = 0; sp < kSplits; ++sp)
        if (sp < msplits) {
          const float4 a = reinterpret_cast<const float4*>(
              sMergeAcc)[((rg * msplits + sp) * kDTiles + n) * 32 + lane];
          o[0] += a.x * wt[sp][0];
          o[1] += a.y * wt[sp][0];
          o[2] += a.z * wt[sp][1];
          o[3] += a.w * wt[sp][1];
        }
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        // An empty row (no visible key) has l = 0, so inv_l = 0: it is written as zeros; a NaN
        // row sum (a NaN input) makes the row NaN. fp16 saturates at ±65504.
        const float o0 = o[2 * rh] * inv_l[rh];
        const float o1 = o[2 * rh + 1] * inv_l[rh];
        *reinterpret_cast<uint32_t*>(sOut + (rg * 16 + g8 + 8 * rh) * lay.vp + 2 * c) =
            BF16 ? dev::pack2<true>(o0, o1)
                 : dev::pack2<false>(qm::saturate_f16(o0), qm::saturate_f16(o1));
      }
    }
    if (split == 0 && t4 == 0 && p.lse != nullptr) {
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        const RowInfo& r = my_rows[rh];
        if (!r.valid) continue;
        const float lse =
            row_lse(m_tot[rh], l_tot[rh], Tr::kPOffset, cta.sLse[rg * 16 + g8 + 8 * rh]);
        p.lse[cta.b * p.lse_stride[0] + r.h * p.lse_stride[1] + r.i * p.lse_stride[2]] = lse;
      }
    }
  }
  __syncthreads();
  const int row_chunks = cta.row_chunks;
  for (int it = tid; it < ROWS * row_chunks; it += kSmallThreads) {
    const int row = it / row_chunks, ch = it - row * row_chunks;
    const int packed = cta.rank * ROWS + row;
    if (packed >= cta.rows_total) break;  // rows only grow
    const QRow r = q_row(p, cta.hkv, packed);
    uint16_t* dst = static_cast<uint16_t*>(p.o) + cta.b * p.o_stride[0] + r.h * p.o_stride[1] +
                    r.i * p.o_stride[2] + ch * 8;
    dev::st_global_16(dst, *reinterpret_cast<const uint4*>(sOut + row * lay.vp + ch * 16));
  }
}

}  // namespace small
}  // namespace int8attn
