// Pieces shared by the attention kernels (attention_mma_kernel.cuh on warp MMAs, and the sm90a
// warpgroup kernel sm90/attention_wgmma_kernel.cuh): which keys a packed query row sees, the Q
// prologue (load, channel balancing, K-smoothing shift, INT8 quantization into a swizzled shared
// tile) and the epilogue (normalise, undo V's scale and mean, write O / LSE or split partials).
// Both kernels hold O in the mma.sync m16n8 accumulator layout (wgmma's is the same per warp).
#pragma once

#include <cstdint>

#include "common/quant_math.h"
#include "cuda/common/int8_groups.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/attention_params.h"

namespace int8attn {

// Which keys of a row are visible: [0, hi) intersected with the block mask.
struct RowInfo {
  bool valid = false;
  int i = 0, h = 0, hi = 0;
};

__device__ __forceinline__ RowInfo row_info(const AttnKernelParams& p, int hkv, int packed_row,
                                            int L) {
  RowInfo r;
  const int g = static_cast<int>(p.row_div.div(static_cast<uint32_t>(packed_row)));
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

// Two output values as one packed pair of the output type: fp16 (saturated: a finite result
// beyond its range is ±65504, not inf) or bf16; the type known at compile time, or not.
template <bool kBf16>
__device__ __forceinline__ uint32_t pack_out_pair(float a, float c) {
  if constexpr (kBf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, c);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(qm::saturate_f16(a), qm::saturate_f16(c));
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}
__device__ __forceinline__ uint32_t pack_out_pair(float a, float c, bool bf16) {
  const uint32_t vb = pack_out_pair<true>(a, c), vh = pack_out_pair<false>(a, c);
  return bf16 ? vb : vh;
}

// A row's log-sum-exp (natural log) from its running maximum m and sum l (log2 domain, P scaled
// by 2^kPOffset), plus the K-smoothing shift; −inf for a row that saw no key (l == 0).
__device__ __forceinline__ float row_lse(float m, float l, float kPOffset, float shift) {
  return l == 0.f ? -INFINITY : (m + log2f(l) - kPOffset) * 0.6931471805599453f + shift;
}

// What a CTA works on: grid x = (b, kv-head, m-tile) with m-tile fastest (the CTAs of one
// head run together and share its K/V in L2), then the sm90a kernel's key-split CTAs in the same
// order (p.tail_m_tiles); grid y = key split; L = the batch's valid keys.
struct CtaWork {
  int m_tile, b, hkv, split, L;
  int row0;         // the CTA's first packed row
  bool key_split;   // a key-split CTA: 64 rows, the keys shared among its warpgroups
  int64_t kv_head;  // canonical K/V head (stride 0 = broadcast)
};

// Keys batch b's rows may see: its valid length (clamped to [0, Nk]), or Nk without lengths.
__device__ __forceinline__ int valid_keys(const AttnKernelParams& p, int b) {
  if (p.k_lengths == nullptr) return p.Nk;
  const int v = p.k_lengths[b * p.k_lengths_stride];
  return v < 0 ? 0 : (v > p.Nk ? p.Nk : v);
}

__device__ __forceinline__ CtaWork cta_work(const AttnKernelParams& p) {
  CtaWork w;
  const int normal = p.m_tiles * p.B * p.Hkv;
  const int x = static_cast<int>(blockIdx.x);
  w.key_split = x >= normal;
  int bh;
  if (!w.key_split) {
    w.m_tile = x % p.m_tiles;
    bh = x / p.m_tiles;
    w.row0 = w.m_tile * p.block_m;
  } else {
    const int t = (x - normal) % p.tail_m_tiles;
    bh = (x - normal) / p.tail_m_tiles;
    w.m_tile = p.m_tiles + t;
    w.row0 = p.m_tiles * p.block_m + t * 64;
  }
  w.b = bh / p.Hkv;
  w.hkv = bh % p.Hkv;
  w.split = blockIdx.y;
  w.L = valid_keys(p, w.b);
  w.kv_head = w.b * p.kv_batch_stride + w.hkv * p.kv_head_stride;
  return w;
}

// A 64-key tile's INT8 scores in the key-scaled domain t = dot·ks_j (m16n8 accumulator layout,
// s[n][e]: key n·8 + 2·t4 + (e & 1)): one VIADD (the dot as a biased float) and one FFMA with the
// per-key constant −1.5·2^23·ks_j a score. The row's Q scale stays out: online_softmax_step
// multiplies it in the exponent's FFMA, so a score costs no separate scale multiply.
// `ks`: the tile's 64 key scales.
__device__ __forceinline__ void key_scaled_scores(const int (&si)[8][4], const float* ks, int t4,
                                                  float (&s)[8][4]) {
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    const float ks0 = ks[n * 8 + 2 * t4], ks1 = ks[n * 8 + 2 * t4 + 1];
    const float kb0 = -dev::kIntFloatBias * ks0, kb1 = -dev::kIntFloatBias * ks1;
    s[n][0] = fmaf(dev::biased_int_as_float(si[n][0]), ks0, kb0);
    s[n][1] = fmaf(dev::biased_int_as_float(si[n][1]), ks1, kb1);
    s[n][2] = fmaf(dev::biased_int_as_float(si[n][2]), ks0, kb0);
    s[n][3] = fmaf(dev::biased_int_as_float(si[n][3]), ks1, kb1);
  }
}

// One online-softmax step (log2 domain) for a warp's 16 rows over 64 keys in the m16n8
// accumulator layout (s[n][e]: row half e >> 1). The scores come unscaled by their row:
// score = s·row_scale[e >> 1] (row_scale > 0: the Q scale times sm_scale·log2(e), or
// sm_scale·log2(e) alone), so the maximum is taken on s and the scale is applied once per score
// inside the exponent's FFMA. Computes the running row maxima (scaled), the tile's exponentials
// in place (times 2^kPOffset: FAST scales P by 448), the running sums rescaled, and O's
// rescale factor per row half. A row that has seen no key yet keeps m = −inf and uses 0 as its
// reference so no NaN appears.
// Only the first `pairs` 16-key groups are read (a warp-uniform count: the few-keys kernel's
// last tile, whose other keys are past the end; their scores stay as they were).
template <bool kSkipUnitRescale = false, int DT>
__device__ __forceinline__ void online_softmax_step(float (&s)[8][4], const float (&row_scale)[2],
                                                    float (&m_run)[2], float (&l_run)[2],
                                                    float (&acc)[DT][4], float kPOffset,
                                                    int pairs = 4) {
  float alpha[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      if (n >= 2 * pairs) break;
      mx = fmaxf(mx, fmaxf(s[n][2 * rh], s[n][2 * rh + 1]));
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(m_run[rh], mx * row_scale[rh]);  // −inf stays −inf (row_scale > 0)
    const float ref = (mx == -INFINITY) ? 0.f : mx;
    alpha[rh] = dev::fast_exp2(m_run[rh] - ref);
    m_run[rh] = mx;
    const float add = kPOffset - ref;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      if (n >= 2 * pairs) break;
      s[n][2 * rh] = dev::fast_exp2(fmaf(s[n][2 * rh], row_scale[rh], add));
      s[n][2 * rh + 1] = dev::fast_exp2(fmaf(s[n][2 * rh + 1], row_scale[rh], add));
    }
    l_run[rh] *= alpha[rh];
  }
  // Once the row maxima settle, alpha is exactly 1 (ex2 of 0) for most tiles: skip the
  // multiplies when it is for every row of the warp (a warp-uniform branch). Long key loops
  // gain (decode); the cluster kernel's short ones lose 2.5% (sd15_l3).
  if constexpr (kSkipUnitRescale)
    if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int n = 0; n < DT; ++n) {
    acc[n][0] *= alpha[0];
    acc[n][1] *= alpha[0];
    acc[n][2] *= alpha[1];
    acc[n][3] *= alpha[1];
  }
}

// Q's channels in 8-channel chunks, one per lane, as the 16-byte Q paths hold them (the short
// path below and the sm90 kernel's staged one): kLanes lanes per row, 32 / kLanes rows a pass.
template <int DPAD>
struct QChunks {
  static constexpr int kChunks = DPAD / 8;  // 8-channel chunks of a padded row
  static constexpr int kLanes = kChunks <= 4 ? 4 : kChunks <= 8 ? 8 : kChunks <= 16 ? 16 : 32;
  static constexpr int kRowsPerPass = 32 / kLanes, kPasses = 16 / kRowsPerPass;
  // Passes quantized together (quantize_q_chunks) by a kernel with registers to spare: up to 8.
  static constexpr int kWideGroup = kPasses < 8 ? kPasses : 8;
};

// This lane's 8 channels (c0..) of μ_K (smoothing shift) and Q's channel factor before the
// rotation (AttnKernelParams::q_factor, qm::kRotateNorm without balancing); 0 and 1 past the
// head dim (D % 8 == 0: a chunk is all in or all out). In two steps, so a caller can issue the
// loads early and have other work pass under their latency before the first use.
template <int DPAD>
__device__ __forceinline__ void load_q_chunk_constants(const AttnKernelParams& p, int64_t kv_head,
                                                       int c0, float (&kmu)[8],
                                                       float (&q_factor)[8]) {
  const int cc = c0 < p.D ? c0 : 0;
  const float* kmu_p = p.k_mean != nullptr ? p.k_mean + kv_head * DPAD + cc : nullptr;
  const float* qf_p = p.q_factor != nullptr ? p.q_factor + kv_head * DPAD + cc : nullptr;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    kmu[i] = kmu_p != nullptr ? kmu_p[i] : 0.f;
    q_factor[i] = qf_p != nullptr ? qf_p[i] : qm::kRotateNorm;
  }
}
__device__ __forceinline__ void finish_q_chunk_constants(const AttnKernelParams& p, int c0,
                                                         float (&kmu)[8], float (&q_factor)[8]) {
  const bool live = c0 < p.D;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    kmu[i] = live ? kmu[i] : 0.f;
    q_factor[i] = live ? q_factor[i] : 1.f;
  }
}
template <int DPAD>
__device__ __forceinline__ void q_chunk_constants(const AttnKernelParams& p, int64_t kv_head,
                                                  int c0, float (&kmu)[8], float (&q_factor)[8]) {
  load_q_chunk_constants<DPAD>(p, kv_head, c0, kmu, q_factor);
  finish_q_chunk_constants(p, c0, kmu, q_factor);
}

// One lane's 8 raw fp16/bf16 channels of each of kN rows (row r_local[j] from raw[j], zero when
// !live[j]): each row's absmax over its kLanes lanes and (only when the LSE is written) the
// K-smoothing shift, then INT8 into sQ (8 bytes a row) and the rows' scales and LSE shifts. The
// same maths as stage_q_warp_rows' general path. Each step runs over all kN rows before the
// next, so the rows' dependency chains (the shuffles across lanes, the scale's divisions)
// overlap: the prologue's warps have no other warp on their scheduler to hide them behind.
template <int DPAD, int kLanes, typename QTile, int kN>
__device__ __forceinline__ void quantize_q_chunks(const AttnKernelParams& p, const uint4 (&raw)[kN],
                                                  const bool (&live)[kN], const float (&kmu)[8],
                                                  const float (&q_factor)[8],
                                                  const int (&r_local)[kN], int c0, uint8_t* sQ,
                                                  float* sQScale, float* sLseShift) {
  float x[kN][8];
#pragma unroll
  for (int j = 0; j < kN; ++j)
    dev::unpack8(live[j] ? raw[j] : make_uint4(0u, 0u, 0u, 0u), p.dtype, x[j]);
  // The shift only moves the LSE (split-KV partials of a row all lack it alike when it is off).
  const bool want_shift = p.lse != nullptr;
  float shift[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) shift[j] = 0.f;
  if (want_shift) {
#pragma unroll
    for (int j = 0; j < kN; ++j)
#pragma unroll
      for (int i = 0; i < 8; ++i) shift[j] = fmaf(x[j][i], kmu[i], shift[j]);
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1)
#pragma unroll
      for (int j = 0; j < kN; ++j) shift[j] += __shfl_xor_sync(0xffffffffu, shift[j], o);
  }
  float amax[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) {
#pragma unroll
    for (int i = 0; i < 8; ++i) x[j][i] *= q_factor[i];
    qm::rotate8(x[j]);
    amax[j] = absmax8(x[j]);
  }
  lane_group_max_nonneg<kLanes, kN>(amax);
  float sc[kN], inv[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) sc[j] = qm::int8_scale(amax[j], p.q_multiplier);
#pragma unroll
  for (int j = 0; j < kN; ++j) inv[j] = 1.0f / sc[j];
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    const uint2 w = quantize8_int8(x[j], inv[j]);
    if (c0 < DPAD) *reinterpret_cast<uint2*>(sQ + QTile::offset(r_local[j], c0)) = w;
    if (c0 == 0) {
      // K smoothing removed q·μ_K from every score of the row; the LSE puts it back.
      sLseShift[r_local[j]] = want_shift ? shift[j] * p.sm_scale : 0.f;
      sQScale[r_local[j]] = sc[j] * p.sm_scale_log2;
    }
  }
}

// The short path of stage_q_warp_rows for INT8 Q with per-row scales when Q's rows are
// contiguous and 16-byte aligned (AttnKernelParams::q_vec): each lane loads its chunk of a row
// with one 16-byte load (all passes' loads in flight together) and stores its 8 INT8 bytes with
// one 8-byte store. About a fifth of the instructions of the general path: the prologue runs
// once per CTA from a cold instruction cache, so its length is what it costs.
template <int DPAD, typename QTile, int kGroup = 1>
__device__ __forceinline__ void stage_q_warp_rows_vec(const AttnKernelParams& p, int b, int hkv,
                                                      int L, int64_t kv_head, int packed_row0,
                                                      int r_local0, uint8_t* sQ, float* sQScale,
                                                      float* sLseShift, int lane) {
  using QC = QChunks<DPAD>;
  const int c0 = (lane % QC::kLanes) * 8;
  const bool live_chunk = c0 < p.D;
  float kmu[8], q_factor[8];
  q_chunk_constants<DPAD>(p, kv_head, c0, kmu, q_factor);
  const uint16_t* q16 = static_cast<const uint16_t*>(p.q);
  uint4 raw[QC::kPasses];
  bool live[QC::kPasses];
#pragma unroll
  for (int ps = 0; ps < QC::kPasses; ++ps) {
    const RowInfo ri = row_info(p, hkv, packed_row0 + ps * QC::kRowsPerPass + lane / QC::kLanes, L);
    const int64_t off = b * p.q_stride[0] + ri.h * p.q_stride[1] + ri.i * p.q_stride[2];
    live[ps] = ri.valid && live_chunk;
    raw[ps] = *reinterpret_cast<const uint4*>(q16 + (live[ps] ? off + c0 : 0));
  }
  static_assert(QC::kPasses % kGroup == 0, "passes in whole groups");
#pragma unroll
  for (int g = 0; g < QC::kPasses; g += kGroup) {
    uint4 graw[kGroup];
    bool glive[kGroup];
    int r_local[kGroup];
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      graw[j] = raw[g + j];
      glive[j] = live[g + j];
      r_local[j] = r_local0 + (g + j) * QC::kRowsPerPass + lane / QC::kLanes;
    }
    quantize_q_chunks<DPAD, QC::kLanes, QTile, kGroup>(p, graw, glive, kmu, q_factor, r_local, c0,
                                                       sQ, sQScale, sLseShift);
  }
}

// Bytes of one warp's staging area: its 16 raw Q rows (kLanes 16-byte chunks a row) on the
// way in; its 16 fp32 O rows (padded by 16 bytes against bank conflicts: the sm90a kernel's
// BALANCED tiles at head dim 160 fit beside eight of these with that pad, not with 32) and 16
// row flags on the way out.
template <int DPAD>
inline constexpr int staged_q_bytes() {
  return 16 * QChunks<DPAD>::kLanes * 16;
}
template <int DPAD>
inline constexpr int staged_o_bytes() {
  return 16 * DPAD * 4 + 64;  // 16 fp32 rows (store_o_rows_staged), then their empty flags
}

// Q in and O out through a per-warp staging area of shared memory, for contiguous, 16-byte
// aligned Q and O (AttnKernelParams::q_vec / o_vec), used by both attention kernels where the
// staging area fits. Both run once per CTA, on its critical path (before the first MMA and after
// the last), and their instructions are fetched cold: the copies go through shared memory so
// that the per-row work runs in short loops instead of ~1,400 unrolled instructions, with every
// global access 16 bytes wide, and the global loads are issued as early as their addresses are
// known (docs/design/cuda.md, "Outside the loop"). Lane mapping of both: QChunks (kLanes lanes
// per row, 8 channels each).

// No other copies to start beside Q's (stage_q_rows_staged's default).
struct NoOtherCopies {
  __device__ void operator()() const {}
};

// Which of the warp's passes over its 16 query rows (packed rows packed_row0..) hold a valid row
// (bit ps, warp-uniform). With kCopy, also the raw rows' copies into the staging area, zero-filled
// outside Q, every copy in flight at once (one cp.async group, not committed). Unrolled: the
// passes' address chains overlap.
template <int DPAD, bool kCopy>
__device__ __forceinline__ uint32_t staged_q_passes(const AttnKernelParams& p, int b, int hkv,
                                                    int L, int packed_row0, int lane,
                                                    uint8_t* staging) {
  using QC = QChunks<DPAD>;
  const int chunk = lane % QC::kLanes, c0 = chunk * 8;
  uint32_t live_passes = 0;
#pragma unroll
  for (int ps = 0; ps < QC::kPasses; ++ps) {
    const int row = ps * QC::kRowsPerPass + lane / QC::kLanes;
    const RowInfo ri = row_info(p, hkv, packed_row0 + row, L);
    if (__any_sync(0xffffffffu, ri.valid)) live_passes |= 1u << ps;
    if constexpr (kCopy) {
      const bool ok = ri.valid && c0 < p.D;
      const int64_t off = b * p.q_stride[0] + ri.h * p.q_stride[1] + ri.i * p.q_stride[2] + c0;
      dev::cp_async_16(staging + (row * QC::kLanes + chunk) * 16,
                       static_cast<const uint16_t*>(p.q) + (ok ? off : 0), ok);
    }
  }
  return live_passes;
}

// The warp's 16 staged raw rows (kLanes 16-byte chunks a row, zeros outside Q) into sQ as INT8
// with per-row scales: the same maths as stage_q_warp_rows. Passes without a valid row (decode:
// 4 of 16 rows live) are quantized as zeros (scale 1, kept finite: no one reads them back).
// Each lane reads its own chunks. kGroup passes at a time (quantize_q_chunks): all of them in
// the warpgroup kernel, whose consumers have the registers; one in the register-tight
// warp-MMA kernel.
template <int DPAD, typename QTile, int kGroup = 1>
__device__ __forceinline__ void quantize_staged_q_rows(const AttnKernelParams& p,
                                                       uint32_t live_passes, const float (&kmu)[8],
                                                       const float (&q_factor)[8], int r_local0,
                                                       uint8_t* sQ, float* sQScale,
                                                       float* sLseShift, int lane,
                                                       const uint8_t* staging) {
  using QC = QChunks<DPAD>;
  static_assert(QC::kPasses % kGroup == 0, "passes in whole groups");
  const int chunk = lane % QC::kLanes, c0 = chunk * 8;
#pragma unroll 1
  for (int g = 0; g < QC::kPasses; g += kGroup) {
    uint4 raw[kGroup];
    bool live[kGroup];
    int r_local[kGroup];
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      const int row = (g + j) * QC::kRowsPerPass + lane / QC::kLanes;
      live[j] = (live_passes >> (g + j)) & 1u;  // warp-uniform
      r_local[j] = r_local0 + row;
      raw[j] = *reinterpret_cast<const uint4*>(staging + (row * QC::kLanes + chunk) * 16);
    }
    quantize_q_chunks<DPAD, QC::kLanes, QTile, kGroup>(p, raw, live, kmu, q_factor, r_local, c0, sQ,
                                                       sQScale, sLseShift);
  }
}

// Stage the warp's 16 query rows (packed rows packed_row0.., shared rows r_local0..) in sQ as
// INT8 with per-row scales, through cp.async copies into the staging area. kOtherCopies:
// other_copies() starts and commits exactly one more cp.async group once Q's copies are on their
// way (a key tile to fly during the quantization); the wait then leaves that group in flight.
template <int DPAD, typename QTile, bool kOtherCopies = false, int kGroup = 1,
          typename F = NoOtherCopies>
__device__ __forceinline__ void stage_q_rows_staged(const AttnKernelParams& p, int b, int hkv,
                                                    int L, int64_t kv_head, int packed_row0,
                                                    int r_local0, uint8_t* sQ, float* sQScale,
                                                    float* sLseShift, int lane, uint8_t* staging,
                                                    F&& other_copies = F{}) {
  const int c0 = (lane % QChunks<DPAD>::kLanes) * 8;
  // The channel constants' loads first: their latency (~1 us at the CTA's start) passes under
  // the copies' issue.
  float kmu[8], q_factor[8];
  load_q_chunk_constants<DPAD>(p, kv_head, c0, kmu, q_factor);
  const uint32_t live_passes =
      staged_q_passes<DPAD, true>(p, b, hkv, L, packed_row0, lane, staging);
  dev::cp_async_commit();
  if constexpr (kOtherCopies) other_copies();
  finish_q_chunk_constants(p, c0, kmu, q_factor);
  dev::cp_async_wait<kOtherCopies ? 1 : 0>();  // each lane reads back only its own copies
  quantize_staged_q_rows<DPAD, QTile, kGroup>(p, live_passes, kmu, q_factor, r_local0, sQ, sQScale,
                                              sLseShift, lane, staging);
}

// Write the warp's 16 rows of O (acc in the m16n8 / wgmma accumulator layout, l_run reduced
// over the quad) and the LSE, or with split-KV (p.num_splits > 1) this split's partial rows and
// LSEs: normalised fp32 rows into the staging area, then 16-byte stores of 8 channels with V's
// scale and mean applied (the same maths as write_output_rows).
template <int DPAD>
__device__ __forceinline__ void store_o_rows_staged(
    const AttnKernelParams& p, const float (&acc)[DPAD / 8][4], const float (&m_run)[2],
    const float (&l_run)[2], const RowInfo (&my_rows)[2], const float (&lse_shift)[2],
    float kPOffset, int split, int b, int hkv, int L, int64_t kv_head, int packed_row0, int lane,
    uint8_t* staging) {
  const bool split_out = p.num_splits > 1;
  // A row's place in the split partials (see write_output_rows).
  auto part_row = [&](const RowInfo& r) {
    return ((static_cast<int64_t>(split) * p.B + b) * p.Hq + r.h) * p.Nq + r.i;
  };
  using RC = QChunks<DPAD>;
  const int chunk = lane % RC::kLanes, c0 = chunk * 8;
  const bool live_chunk = c0 < p.D;
  // V's scale and mean of this lane's channels, loaded first: their latency passes under the
  // staging of the rows.
  float sc[8], mu[8];
  {
    const float* vs = p.v_scale + kv_head * DPAD + (live_chunk ? c0 : 0);
    const float* vm = p.v_mean + kv_head * DPAD + (live_chunk ? c0 : 0);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      sc[i] = vs[i];
      mu[i] = vm[i];
    }
  }
  // Rows of DPAD floats, each row's 8-float chunks XOR-swizzled by (row & 3) (DPAD is a
  // multiple of 32, so the swizzle stays in the row): a half-warp's float2 stores (4 rows, a
  // chunk each) then cover the 32 banks once, and so do a quarter-warp's float4 reads (8 chunks
  // of one row) when each lane reads its chunk's halves in the order `half` below gives. A pitch
  // of DPAD + 4 without the swizzle made both 2-way bank conflicted.
  static_assert(DPAD % 32 == 0, "the (row & 3) swizzle permutes chunks within groups of 4");
  float* sO = reinterpret_cast<float*>(staging);
  float* sEmpty = sO + 16 * DPAD;
  const auto chunk_at = [&](int row, int chunk) {
    return sO + row * DPAD + (chunk ^ (row & 3)) * 8;
  };
  const int g8 = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const bool empty = l_run[rh] == 0.f;  // no visible key (a NaN row sum is not empty)
    const float inv_l = empty ? 0.f : 1.0f / l_run[rh];
    const int row = g8 + 8 * rh;
#pragma unroll
    for (int dn = 0; dn < DPAD / 8; ++dn)
      *reinterpret_cast<float2*>(chunk_at(row, dn) + 2 * t4) =
          make_float2(acc[dn][2 * rh] * inv_l, acc[dn][2 * rh + 1] * inv_l);
    const RowInfo& r = my_rows[rh];
    if (t4 == 0) {
      sEmpty[row] = empty ? 1.f : 0.f;
      const float lse = row_lse(m_run[rh], l_run[rh], kPOffset, lse_shift[rh]);
      if (r.valid && split_out)
        p.part_lse[part_row(r)] = lse;
      else if (r.valid && p.lse != nullptr)
        p.lse[b * p.lse_stride[0] + r.h * p.lse_stride[1] + r.i * p.lse_stride[2]] = lse;
    }
  }
  __syncwarp();
  const bool bf16 = p.dtype == DType::kBF16;
  // Two rows an iteration, so their address chains and stores overlap.
#pragma unroll 2
  for (int ps = 0; ps < RC::kPasses; ++ps) {
    const int row = ps * RC::kRowsPerPass + lane / RC::kLanes;
    const RowInfo ri = row_info(p, hkv, packed_row0 + row, L);
    if (!ri.valid || !live_chunk) continue;
    const float* src = chunk_at(row, chunk);
    const int half = ((chunk ^ (row & 3)) >> 2) & 1;  // this lane's half to read first
    const float4 first = *reinterpret_cast<const float4*>(src + 4 * half);
    const float4 second = *reinterpret_cast<const float4*>(src + 4 * (half ^ 1));
    const float4 lo = half ? second : first, hi = half ? first : second;
    const bool empty = sEmpty[row] != 0.f;
    const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    if (split_out) {  // fp32 partial rows of D floats (D % 8 == 0: 32-byte aligned chunks)
      float o[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) o[i] = empty ? 0.f : v[i] * sc[i] + mu[i];
      float4* dst = reinterpret_cast<float4*>(p.part_o + part_row(ri) * p.D + c0);
      dst[0] = make_float4(o[0], o[1], o[2], o[3]);
      dst[1] = make_float4(o[4], o[5], o[6], o[7]);
      continue;
    }
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float a = empty ? 0.f : v[2 * i] * sc[2 * i] + mu[2 * i];
      const float c = empty ? 0.f : v[2 * i + 1] * sc[2 * i + 1] + mu[2 * i + 1];
      w[i] = pack_out_pair(a, c, bf16);
    }
    dev::st_global_16(static_cast<uint16_t*>(p.o) + b * p.o_stride[0] + ri.h * p.o_stride[1] +
                          ri.i * p.o_stride[2] + c0,
                      make_uint4(w[0], w[1], w[2], w[3]));
  }
}

// Stage 16 query rows of one warp (packed rows packed_row0.., shared rows r_local0..) in sQ:
// INT8 with a per-row scale (unless Q scales are per block: the caller quantizes then, from
// row_absmax) or fp16/bf16 for EXACT. Also the per-row LSE shift of K smoothing.
// kBatch rows have their loads in flight together (4 for the register-tight warp-MMA kernel,
// all 16 for the warpgroup kernel's consumers).
template <int DPAD, bool INT8QK, bool BF16, typename QTile, int kBatch = 4>
__device__ __forceinline__ void stage_q_warp_rows(const AttnKernelParams& p, int b, int hkv, int L,
                                                  int64_t kv_head, int packed_row0, int r_local0,
                                                  uint8_t* sQ, float* sQScale, float* sLseShift,
                                                  int lane, float (&row_absmax)[16]) {
  if constexpr (INT8QK) {
    if (p.q_vec && !p.q_per_block) {
      stage_q_warp_rows_vec<DPAD, QTile, kBatch >= 16 ? QChunks<DPAD>::kWideGroup : 1>(
          p, b, hkv, L, kv_head, packed_row0, r_local0, sQ, sQScale, sLseShift, lane);
      return;
    }
  }
  const float* qf = p.q_factor != nullptr ? p.q_factor + kv_head * DPAD : nullptr;
  const float* kmu = p.k_mean != nullptr ? p.k_mean + kv_head * DPAD : nullptr;
  // Every global load below is issued before any value is used, from an address that is always
  // readable (element 0 of a tensor for padding lanes and rows, then zeroed): a load behind a
  // validity branch with its conversion inside that branch made the compiler wait for each one,
  // 64 serialised memory latencies per warp at head dim 128 (~27 us per CTA).
  // Per-channel constants of this lane's channels, loaded once. INT8 Q is multiplied by its
  // channel factor (p.q_factor), then each group of 8 channels (8 consecutive lanes) is rotated.
  float kmu_c[DPAD / 32], q_factor_c[DPAD / 32];
#pragma unroll
  for (int c = 0; c < DPAD / 32; ++c) {
    const int d = c * 32 + lane < p.D ? c * 32 + lane : 0;
    kmu_c[c] = kmu != nullptr ? kmu[d] : 0.f;
    q_factor_c[c] = qf != nullptr ? qf[d] : qm::kRotateNorm;
  }
#pragma unroll
  for (int c = 0; c < DPAD / 32; ++c) {
    const bool live = c * 32 + lane < p.D;
    kmu_c[c] = live ? kmu_c[c] : 0.f;
    q_factor_c[c] = live && INT8QK ? q_factor_c[c] : 1.f;
  }
  const uint16_t* q16 = static_cast<const uint16_t*>(p.q);
  // kBatch rows at a time: all their loads are issued before any conversion or reduction.
#pragma unroll
  for (int r0 = 0; r0 < 16; r0 += kBatch) {
    RowInfo ris[kBatch];
    uint16_t raw[kBatch][DPAD / 32];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      ris[u] = row_info(p, hkv, packed_row0 + r0 + u, L);
      const int64_t base = b * p.q_stride[0] + ris[u].h * p.q_stride[1] + ris[u].i * p.q_stride[2];
#pragma unroll
      for (int c = 0; c < DPAD / 32; ++c) {
        const int d = c * 32 + lane;
        raw[u][c] = q16[(ris[u].valid && d < p.D) ? base + d * p.q_stride[3] : 0];
      }
    }
    float vals4[kBatch][DPAD / 32];
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
#pragma unroll
      for (int c = 0; c < DPAD / 32; ++c) {
        const float f = dev::bits16_to_float(raw[u][c], p.dtype);  // no branch around it
        vals4[u][c] = (ris[u].valid && c * 32 + lane < p.D) ? f : 0.f;
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
        vals[c] *= q_factor_c[c];
        if constexpr (INT8QK) vals[c] = rotate8_lanes(vals[c], lane);
        amax = dev::fmax_nan(amax, fabsf(vals[c]));
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        amax = dev::fmax_nan(amax, __shfl_xor_sync(0xffffffffu, amax, o));
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
// V's per-channel scale and mean are loaded in batches before the stores that use them:
// interleaved with the stores, each load waited for the store before it (the compiler cannot
// tell that O does not alias them).
template <int DPAD, bool INT8>
__device__ __forceinline__ void write_output_rows(const AttnKernelParams& p,
                                                  const float (&acc)[DPAD / 8][4],
                                                  const float (&m_run)[2], const float (&l_run)[2],
                                                  const RowInfo (&my_rows)[2],
                                                  const float (&lse_shift)[2], float kPOffset,
                                                  int split, int b, int64_t kv_head, int t4) {
  const float* vs = INT8 ? p.v_scale + kv_head * DPAD : nullptr;
  const float* vm = INT8 ? p.v_mean + kv_head * DPAD : nullptr;
  const bool split_out = p.num_splits > 1;
  bool empty[2], paired[2];
  float inv_l[2], lse[2];
  int64_t base[2];  // O element offset of the row, or its row in the split partials
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const RowInfo& r = my_rows[rh];
    empty[rh] = l_run[rh] == 0.f;  // no visible key (a NaN row sum is not empty)
    inv_l[rh] = empty[rh] ? 0.f : 1.0f / l_run[rh];
    lse[rh] = row_lse(m_run[rh], l_run[rh], kPOffset, lse_shift[rh]);
    base[rh] = split_out ? ((static_cast<int64_t>(split) * p.B + b) * p.Hq + r.h) * p.Nq + r.i
                         : b * p.o_stride[0] + r.h * p.o_stride[1] + r.i * p.o_stride[2];
    // Channel pairs (2·t4, 2·t4+1) go out as one 4-byte store when O's channels are
    // contiguous and the row start is even (the common layouts), else element by element.
    paired[rh] = p.o_stride[3] == 1 && (base[rh] & 1) == 0 && p.dtype != DType::kF32 &&
                 (reinterpret_cast<uintptr_t>(p.o) & 3) == 0;
  }
  // V's scale and mean for kGroup column groups are loaded before their stores: all of them at
  // once up to head dim 128 (64 registers, free by now), 4 groups at a time above.
  constexpr int kGroup = DPAD <= 128 ? DPAD / 8 : 4;  // divides DPAD / 8 (DPAD % 32 == 0)
  // Loads of V's per-channel scale and mean for column groups d0.. (of this thread's channels).
  auto load_v_consts = [&](int d0, float(&sc)[kGroup][2], float(&mu)[kGroup][2]) {
    if constexpr (INT8) {
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = (d0 + j) * 8 + 2 * t4 + e;
          sc[j][e] = vs[c < p.D ? c : 0];
          mu[j][e] = vm[c < p.D ? c : 0];
        }
    }
  };
  // Channel pair (2·t4, 2·t4+1) of column group d0 + j of row half rh: normalised, V's scale
  // and mean applied (0 for an empty row and past the head dim).
  auto out_pair = [&](int rh, int d0, int j, const float(&sc)[kGroup][2],
                      const float(&mu)[kGroup][2], float(&o2)[2]) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float o = acc[d0 + j][2 * rh + e] * inv_l[rh];
      if constexpr (INT8)
        o2[e] = (empty[rh] || (d0 + j) * 8 + 2 * t4 + e >= p.D) ? 0.f : o * sc[j][e] + mu[j][e];
      else
        o2[e] = o;
    }
  };
  if (!split_out && p.o_vec) {
    // The short path (contiguous, 16-byte aligned O rows: every pair is one 4-byte store;
    // D % 8 == 0, so a pair is all in or all out). Like the Q prologue, this code runs once per
    // CTA from a cold instruction cache: one store path instead of three keeps it short.
    const bool bf16 = p.dtype == DType::kBF16;
#pragma unroll
    for (int d0 = 0; d0 < DPAD / 8; d0 += kGroup) {
      float sc[kGroup][2], mu[kGroup][2];
      load_v_consts(d0, sc, mu);
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        if (!my_rows[rh].valid) continue;
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
          const int c0 = (d0 + j) * 8 + 2 * t4;
          if (c0 >= p.D) continue;
          float o2[2];
          out_pair(rh, d0, j, sc, mu, o2);
          *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + base[rh] + c0) =
              pack_out_pair(o2[0], o2[1], bf16);
        }
      }
    }
  } else {
#pragma unroll
    for (int d0 = 0; d0 < DPAD / 8; d0 += kGroup) {
      float sc[kGroup][2], mu[kGroup][2];
      load_v_consts(d0, sc, mu);
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        if (!my_rows[rh].valid) continue;
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
          const int c0 = (d0 + j) * 8 + 2 * t4;
          float o2[2];
          out_pair(rh, d0, j, sc, mu, o2);
          if (split_out) {
            float* dst = p.part_o + base[rh] * p.D;
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (c0 + e < p.D) dst[c0 + e] = o2[e];
          } else if (paired[rh] && c0 + 1 < p.D) {
            *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + base[rh] + c0) =
                pack_out_pair(o2[0], o2[1], p.dtype == DType::kBF16);
          } else {
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (c0 + e < p.D)
                dev::store_from_float(p.o, base[rh] + (c0 + e) * p.o_stride[3], p.dtype, o2[e]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const RowInfo& r = my_rows[rh];
    if (!r.valid || t4 != 0) continue;
    if (split_out)
      p.part_lse[base[rh]] = lse[rh];
    else if (p.lse != nullptr)
      p.lse[b * p.lse_stride[0] + r.h * p.lse_stride[1] + r.i * p.lse_stride[2]] = lse[rh];
  }
}

}  // namespace int8attn
