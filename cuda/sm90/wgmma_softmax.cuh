// Online softmax of the sm90a attention kernel, per consumer thread: its two rows (r and r+8 of
// its warp's 16) and a quarter of a tile's keys (32 of 128, or 16 of 64), in the Q·Kᵀ
// accumulator layout of wgmma (which is the mma.sync one per warp). Log2 domain, as in
// attention_mma_kernel.cuh (same empty-row convention). Scores are kept as dot·k_scale; the
// row's q_scale (> 0, with sm_scale·log2 e folded in) is applied to the row maximum and inside
// the exponent's FFMA, one multiply fewer per score.
#pragma once

#include <cfloat>
#include <cstdint>

#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/wgmma_traits.cuh"

namespace int8attn {

// KBLOCK: K scales per 64 keys (INT8ATTN_GRANULARITY_PER_BLOCK; the two halves of a 128-key
// tile, or all of a 64-key one), which takes the key scale out of the per-score work.
template <class T, bool KBLOCK>
struct Sm90Softmax {
  static constexpr int kCols = T::kCols;       // 8-key column groups of S a thread holds
  static constexpr int kBlocks = T::kBN / 64;  // 64-key blocks (KBLOCK's scales) per tile
  // The reference maximum m moves only when a tile's maximum exceeds it by more than kSlack
  // (log2 units), so O is rescaled only then: after the first tiles a row's maximum creeps up
  // in small steps, and each step used to rescale O (about half of all tiles). A P is then at
  // most 2^kSlack. FAST: P = 2^(s − m + log2 448 − kSlack), so P stays within E4M3; BALANCED's
  // fp16 P has range to spare.
  static constexpr float kSlack = T::kFp8PV ? 1.f : 8.f;
  static constexpr float kPOffset = T::kFp8PV ? 8.807354922057604f - kSlack : 0.f;

  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  float q_scale_row[2];
  RowInfo rows[2];
  int min_hi;  // the smallest key bound of the CTA's rows: tiles below it need no masking
  int t4;      // lane % 4: which column pairs of each 8-key group the thread holds
  // The tile's key scales of this thread's columns; KBLOCK: the blocks' scales (x: columns
  // 0-63, y: 64-127 of a 128-key tile; every key holds its block's).
  float2 ksr[KBLOCK ? 1 : kCols];

  __device__ __forceinline__ void load_key_scales(const float* sKs) {
    if constexpr (KBLOCK) {
      ksr[0] = make_float2(sKs[0], sKs[kBlocks > 1 ? 64 : 0]);
    } else {
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        ksr[c] = *reinterpret_cast<const float2*>(sKs + c * 8 + 2 * t4);
    }
  }

  // Tile t from the integer scores si: updates m_run / l_run (l_run only where the tensor
  // cores do not sum P: Sm90Traits::kTensorRowSums), returns O's rescale factor per row in
  // alpha and P (fp32) in s.
  // KBLOCK takes the scores as x = 1.5·2^23 + dot (exact, monotone in dot), which Q·Kᵀ
  // accumulated onto the bias (wgmma_mainloop.cuh); each block's scale joins the row's q_scale
  // in the exponent's FFMA and is applied to the block maxima only.
  // The exponentials are issued in the consumer warpgroup's turn (wgmma_exp_turns.cuh).
  template <class Turn>
  __device__ __forceinline__ void step(int t, const int (&si)[T::kScores], float (&alpha)[2],
                                       float (&s)[kCols][4], Turn& turn) {
    scores(si, s);
    if ((t + 1) * T::kBN > min_hi) mask(t, s);  // some row does not see every key
    float ref[2];
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      const float mt = row_max(s, rh) * q_scale_row[rh];
      const float mx = mt > m_run[rh] + kSlack ? mt : m_run[rh];
      ref[rh] = (mx == -INFINITY) ? 0.f : mx;
      alpha[rh] = dev::fast_exp2(m_run[rh] - ref[rh]);
      m_run[rh] = mx;
    }
    turn.wait(s);
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) exponentials(s, rh, q_scale_row[rh], ref[rh] - kPOffset);
    turn.pass(s);
    if constexpr (!T::kTensorRowSums) {
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        float sum4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int c = 0; c < kCols; ++c) sum4[c & 3] += s[c][2 * rh] + s[c][2 * rh + 1];
        l_run[rh] = l_run[rh] * alpha[rh] + ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
      }
    }
  }

  // FAST's row sums, out of the P·V accumulator's column DPAD into l_run after each tile's P·V
  // (then rescaled like O): the FP8 MMAs add into their accumulator with a truncating, reduced
  // precision, and P is all positive, so left there the error grows with the tiles a CTA walks
  // (rel-L1 0.26 at 16K keys); one tile's sum is exact enough. Only lanes t4 == 0 hold column
  // DPAD; the others add zeros.
  __device__ __forceinline__ void drain_row_sums(float (&o)[T::kAccTiles][4],
                                                 const float (&scale)[2]) {
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      l_run[rh] = (l_run[rh] + o[T::kDTiles][2 * rh]) * scale[rh];
      o[T::kDTiles][2 * rh] = 0.f;
    }
  }

  // The whole row's sum in every lane of its quad, once the last P·V has completed.
  __device__ __forceinline__ void finish_row_sums(const float (&o)[T::kAccTiles][4], int lane) {
    if constexpr (T::kOnesColumn) {
      // The row sums drained from column DPAD sit in lane t4 == 0 of each quad.
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) l_run[rh] = __shfl_sync(0xffffffffu, l_run[rh], lane & ~3);
    } else if constexpr (T::kOnesBlock) {
      // Every column of the ones block's product holds the sum.
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) l_run[rh] = o[T::kDTiles][2 * rh];
    } else {
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 1);
        l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 2);
      }
    }
  }

 private:
  __device__ __forceinline__ void scores(const int (&si)[T::kScores], float (&s)[kCols][4]) const {
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if constexpr (KBLOCK) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[c][e] = __int_as_float(si[4 * c + e]);  // biased
      } else {
        // dot·ks in two instructions: x = 1.5·2^23 + dot exactly, and
        // x·ks − 1.5·2^23·ks is dot·ks up to the rounding of the constant (shared by the key's
        // two rows): under one unit of the integer dot product.
        const float2 ks = ksr[c];
        const float c0 = -dev::kIntFloatBias * ks.x, c1 = -dev::kIntFloatBias * ks.y;
        s[c][0] = fmaf(dev::biased_int_as_float(si[4 * c + 0]), ks.x, c0);
        s[c][1] = fmaf(dev::biased_int_as_float(si[4 * c + 1]), ks.y, c1);
        s[c][2] = fmaf(dev::biased_int_as_float(si[4 * c + 2]), ks.x, c0);
        s[c][3] = fmaf(dev::biased_int_as_float(si[4 * c + 3]), ks.y, c1);
      }
    }
  }

  __device__ __forceinline__ void mask(int t, float (&s)[kCols][4]) const {
    const int j0 = t * T::kBN;
#pragma unroll
    for (int c = 0; c < kCols; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (j0 + c * 8 + 2 * t4 + (e & 1) >= rows[e >> 1].hi) s[c][e] = -INFINITY;
  }

  // The maximum of row half rh over the tile (scaled by the key scales, not yet by q_scale),
  // over the quad. Four independent partial maxima: short dependency chains for a warp that
  // has no other warp on its scheduler to hide latency behind.
  __device__ __forceinline__ float row_max(const float (&s)[kCols][4], int rh) const {
    float mx;
    if constexpr (KBLOCK) {  // per block (c < 8, c >= 8), then scaled
      // -inf (a masked block) stays -inf: (−inf − bias)·ks.
      mx = (block_max(s, 0, rh) - dev::kIntFloatBias) * ksr[0].x;
      if constexpr (kBlocks > 1)
        mx = fmaxf(mx, (block_max(s, 1, rh) - dev::kIntFloatBias) * ksr[0].y);
    } else {
      float mx4[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) mx4[i] = fmaxf(s[i][2 * rh], s[i][2 * rh + 1]);
#pragma unroll
      for (int c = 4; c < kCols; ++c)
        mx4[c & 3] = fmaxf(mx4[c & 3], fmaxf(s[c][2 * rh], s[c][2 * rh + 1]));
      mx = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3]));
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  }

  // The maximum of block b's 16 biased scores of row half rh. They are floats in [2^23, 2^24) or
  // −inf (masked), so their bit patterns order as signed integers, and sm_90 has a three-input
  // integer maximum: 8 instructions instead of 15 pairwise FMNMX (two chains of 4).
  __device__ __forceinline__ float block_max(const float (&s)[kCols][4], int b, int rh) const {
    int v[16];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      v[2 * c] = __float_as_int(s[8 * b + c][2 * rh]);
      v[2 * c + 1] = __float_as_int(s[8 * b + c][2 * rh + 1]);
    }
    int m0 = __vimax3_s32(v[0], v[1], v[2]), m1 = __vimax3_s32(v[3], v[4], v[5]);
    m0 = __vimax3_s32(m0, v[6], v[7]);
    m1 = __vimax3_s32(m1, v[8], v[9]);
    m0 = __vimax3_s32(m0, v[10], v[11]);
    m1 = __vimax3_s32(m1, v[12], v[13]);
    m0 = __vimax3_s32(m0, v[14], v[15]);
    return __int_as_float(max(m0, m1));
  }

  // P = 2^(s·qs − sub) of row half rh, in place.
  __device__ __forceinline__ void exponentials(float (&s)[kCols][4], int rh, float qs,
                                               float sub) const {
    if constexpr (KBLOCK) {
      // 2^(dot·ks·qs − sub) = 2^(x·a + b), a = ks·qs, b = −1.5·2^23·a − sub (its rounding:
      // under one unit of the integer dot product, as for per-key scales).
      const float a[2] = {ksr[0].x * qs, ksr[0].y * qs};
      const float bb[2] = {fmaf(-dev::kIntFloatBias, a[0], -sub),
                           fmaf(-dev::kIntFloatBias, a[1], -sub)};
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        s[c][2 * rh] = dev::fast_exp2(fmaf(s[c][2 * rh], a[c >> 3], bb[c >> 3]));
        s[c][2 * rh + 1] = dev::fast_exp2(fmaf(s[c][2 * rh + 1], a[c >> 3], bb[c >> 3]));
      }
    } else {
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        s[c][2 * rh] = dev::fast_exp2(fmaf(s[c][2 * rh], qs, -sub));
        s[c][2 * rh + 1] = dev::fast_exp2(fmaf(s[c][2 * rh + 1], qs, -sub));
      }
    }
  }
};

}  // namespace int8attn
