// Pieces shared by the attention kernels (attention_kernel.cuh on warp MMAs, and the sm90a
// warpgroup kernel attention_sm90_kernel.cuh): which keys a packed query row sees, the Q
// prologue (load, channel balancing, K-smoothing shift, INT8 quantization into a swizzled shared
// tile) and the epilogue (normalise, undo V's scale and mean, write O / LSE or split partials).
// Both kernels hold O in the mma.sync m16n8 accumulator layout (wgmma's is the same per warp).
#pragma once

#include <cstdint>

#include "common/quant_math.h"
#include "device/mma.cuh"
#include "kernels/attention_params.h"

namespace int8attn {

enum KernelMode : int { kModeExact = 1, kModeBalanced = 2, kModeFast = 3 };

// Which keys of a row are visible: [0, hi) intersected with the block mask.
struct RowInfo {
  bool valid = false;
  int i = 0, h = 0, hi = 0;
};

__device__ __forceinline__ RowInfo row_info(const AttnKernelParams& p, int hkv, int packed_row,
                                            int L) {
  RowInfo r;
  const int g = packed_row / p.row_pitch;
  r.i = packed_row - g * p.row_pitch;
  r.valid = g < p.G && r.i < p.Nq;
  r.h = hkv * p.G + (g < p.G ? g : 0);
  r.hi = p.causal ? min(L, r.i + L - p.Nq + 1) : L;
  if (!r.valid) r.hi = 0;
  return r;
}

__device__ __forceinline__ bool mask_keep(const AttnKernelParams& p, int b, const RowInfo& r,
                                          int j) {
  const int64_t off = b * p.mask_stride[0] + r.h * p.mask_stride[1] +
                      (r.i / p.mask_qb) * p.mask_stride[2] + (j / p.mask_kb) * p.mask_stride[3];
  return p.mask[off] != 0;
}

// What a CTA works on: grid x = (b, kv-head, m-tile) with m-tile fastest (the CTAs of one
// head run together and share its K/V in L2), grid y = key split; L = the batch's valid keys.
struct CtaWork {
  int m_tile, b, hkv, split, L;
  int64_t kv_head;  // canonical K/V head (stride 0 = broadcast)
};

__device__ __forceinline__ CtaWork cta_work(const AttnKernelParams& p) {
  CtaWork w;
  w.m_tile = blockIdx.x % p.m_tiles;
  const int bh = blockIdx.x / p.m_tiles;
  w.b = bh / p.Hkv;
  w.hkv = bh % p.Hkv;
  w.split = blockIdx.y;
  w.L = p.Nk;
  if (p.k_lengths != nullptr) {
    const int v = p.k_lengths[w.b * p.k_lengths_stride];
    w.L = v < 0 ? 0 : (v > p.Nk ? p.Nk : v);
  }
  w.kv_head = w.b * p.kv_batch_stride + w.hkv * p.kv_head_stride;
  return w;
}

// Stage 16 query rows of one warp (packed rows packed_row0.., shared rows r_local0..) in sQ:
// INT8 with a per-row scale (unless Q scales are per block: the caller quantizes then, from
// row_absmax) or fp16/bf16 for EXACT. Also the per-row LSE shift of K smoothing.
// kBatch rows have their loads in flight together (4 for the register-tight warp-MMA kernel,
// all 16 for the warpgroup kernel's consumers).
template <int DPAD, bool INT8QK, bool BF16, typename QTile, int kBatch = 4>
__device__ __forceinline__ void stage_q_warp_rows(const AttnKernelParams& p, int b, int hkv,
                                                  int L, int64_t kv_head, int packed_row0,
                                                  int r_local0, uint8_t* sQ, float* sQScale,
                                                  float* sLseShift, int lane,
                                                  float (&row_absmax)[16]) {
  const float* alpha = p.q_alpha != nullptr ? p.q_alpha + kv_head * DPAD : nullptr;
  const float* kmu = p.k_mean != nullptr ? p.k_mean + kv_head * DPAD : nullptr;
  // Per-channel constants of this lane's channels, loaded once.
  // Balancing divides Q by α: one reciprocal per channel here, multiplies per row below.
  float kmu_c[DPAD / 32], inv_alpha_c[DPAD / 32];
#pragma unroll
  for (int c = 0; c < DPAD / 32; ++c) {
    const int d = c * 32 + lane;
    kmu_c[c] = (kmu != nullptr && d < p.D) ? kmu[d] : 0.f;
    inv_alpha_c[c] = (alpha != nullptr && d < p.D) ? 1.0f / alpha[d] : 1.f;
  }
  const uint16_t* q16 = static_cast<const uint16_t*>(p.q);
  // kBatch rows at a time: all their loads are issued before any reduction needs them.
#pragma unroll
  for (int r0 = 0; r0 < 16; r0 += kBatch) {
    RowInfo ris[kBatch];
    float vals4[kBatch][DPAD / 32];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      ris[u] = row_info(p, hkv, packed_row0 + r0 + u, L);
      const int64_t base = b * p.q_stride[0] + ris[u].h * p.q_stride[1] + ris[u].i * p.q_stride[2];
#pragma unroll
      for (int c = 0; c < DPAD / 32; ++c) {
        const int d = c * 32 + lane;
        vals4[u][c] = (ris[u].valid && d < p.D)
                          ? dev::bits16_to_float(q16[base + d * p.q_stride[3]], p.dtype)
                          : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int rr = r0 + u;
      const int r_local = r_local0 + rr;
      float* vals = vals4[u];
      float amax = 0.f, shift = 0.f;
#pragma unroll
      for (int c = 0; c < DPAD / 32; ++c) {
        shift += vals[c] * kmu_c[c];
        vals[c] *= inv_alpha_c[c];
        amax = fmaxf(amax, fabsf(vals[c]));
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        shift += __shfl_xor_sync(0xffffffffu, shift, o);
      }
      row_absmax[rr] = amax;
      // K smoothing removed q·μ_K from every score of the row; the LSE puts it back.
      if (lane == 0) sLseShift[r_local] = shift * p.sm_scale;
      if constexpr (INT8QK) {
        if (!p.q_per_block) {
          const float sc = qm::int8_scale(amax, p.q_multiplier);
          const float inv = 1.0f / sc;
#pragma unroll
          for (int c = 0; c < DPAD / 32; ++c)
            sQ[QTile::offset(r_local, c * 32 + lane)] =
                static_cast<uint8_t>(qm::quantize_int8(vals[c], inv));
          if (lane == 0) sQScale[r_local] = sc * p.sm_scale_log2;
        }
      } else {
#pragma unroll
        for (int c = 0; c < DPAD / 32; ++c) {
          const int byte = (c * 32 + lane) * 2;
          uint16_t bits;
          if constexpr (BF16) {
            __nv_bfloat16 hv = __float2bfloat16_rn(vals[c]);
            bits = *reinterpret_cast<uint16_t*>(&hv);
          } else {
            __half hv = __float2half_rn(vals[c]);
            bits = *reinterpret_cast<uint16_t*>(&hv);
          }
          *reinterpret_cast<uint16_t*>(sQ + QTile::offset(r_local, byte)) = bits;
        }
      }
    }
  }
}

// Write this thread's two rows of O (acc in the m16n8 accumulator layout over DPAD/8 column
// groups; l_run already reduced over the quad) and the LSE, or the split-KV partials.
template <int DPAD, bool INT8>
__device__ __forceinline__ void write_output_rows(const AttnKernelParams& p,
                                                  const float (&acc)[DPAD / 8][4],
                                                  const float (&m_run)[2], const float (&l_run)[2],
                                                  const RowInfo (&my_rows)[2],
                                                  const float (&lse_shift)[2], float kPOffset,
                                                  int split, int b, int64_t kv_head, int t4) {
  const float* vs = INT8 ? p.v_scale + kv_head * DPAD : nullptr;
  const float* vm = INT8 ? p.v_mean + kv_head * DPAD : nullptr;
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const RowInfo& r = my_rows[rh];
    if (!r.valid) continue;
    const bool empty = !(l_run[rh] > 0.f);
    const float inv_l = empty ? 0.f : 1.0f / l_run[rh];
    const float lse =
        empty ? -INFINITY
              : (m_run[rh] + log2f(l_run[rh]) - kPOffset) * 0.6931471805599453f + lse_shift[rh];
    if (p.num_splits > 1) {
      const int64_t row = ((static_cast<int64_t>(split) * p.B + b) * p.Hq + r.h) * p.Nq + r.i;
      float* dst = p.part_o + row * p.D;
#pragma unroll
      for (int dn = 0; dn < DPAD / 8; ++dn)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = dn * 8 + 2 * t4 + e;
          if (c < p.D) {
            float o = acc[dn][2 * rh + e] * inv_l;
            if constexpr (INT8) o = empty ? 0.f : o * vs[c] + vm[c];
            dst[c] = o;
          }
        }
      if (t4 == 0) p.part_lse[row] = lse;
    } else {
      const int64_t base = b * p.o_stride[0] + r.h * p.o_stride[1] + r.i * p.o_stride[2];
      // Channel pairs (2·t4, 2·t4+1) go out as one 4-byte store when O's channels are
      // contiguous and the row start is even (the common layouts), else element by element.
      const bool paired = p.o_stride[3] == 1 && (base & 1) == 0 && p.dtype != 3 &&
                          (reinterpret_cast<uintptr_t>(p.o) & 3) == 0;
#pragma unroll
      for (int dn = 0; dn < DPAD / 8; ++dn) {
        const int c0 = dn * 8 + 2 * t4;
        float o2[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = c0 + e;
          float o = acc[dn][2 * rh + e] * inv_l;
          if constexpr (INT8) o = (empty || c >= p.D) ? 0.f : o * vs[c] + vm[c];
          o2[e] = o;
        }
        if (paired && c0 + 1 < p.D) {
          uint32_t bits;
          if (p.dtype == 2) {
            __nv_bfloat162 v = __floats2bfloat162_rn(o2[0], o2[1]);
            bits = *reinterpret_cast<uint32_t*>(&v);
          } else {
            __half2 v = __floats2half2_rn(o2[0], o2[1]);
            bits = *reinterpret_cast<uint32_t*>(&v);
          }
          *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + base + c0) = bits;
        } else {
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (c0 + e < p.D)
              dev::store_from_float(p.o, base + (c0 + e) * p.o_stride[3], p.dtype, o2[e]);
        }
      }
      if (p.lse != nullptr && t4 == 0)
        p.lse[b * p.lse_stride[0] + r.h * p.lse_stride[1] + r.i * p.lse_stride[2]] = lse;
    }
  }
}

}  // namespace int8attn
