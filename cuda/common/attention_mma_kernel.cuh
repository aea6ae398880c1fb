// The flash-attention kernel for every precision mode, on warp-level MMAs (sm80, sm89, sm90).
//
// One CTA = 8 warps (128 query rows), 4 warps (64 rows: head dims above 64) or 1 warp (16 rows:
// decode) of one (batch, kv-head); each warp owns 16 rows (host: forward_plan.cu). Rows are
// "packed": the M dimension of a kv-head enumerates (q-head of the group, query) pairs with a
// pitch of row_pitch rows per q-head, so GQA/MQA and decode (Nq = 1) share K/V tiles between
// the q-heads of a group instead of re-reading them.
//
// Per 64-key tile: Q·Kᵀ (INT8 m16n8k32, or fp16/bf16 m16n8k16 in EXACT), online softmax in the
// log2 domain with all scales folded into one multiply per score, then P·V (fp16 m16n8k16 or
// FP8 m16n8k32 with a per-tile fp32 temporary: two-level accumulation). K/V tiles are
// double-buffered with cp.async; tiles no row can see (lengths, causal, block mask) are never
// loaded; per-element masking runs only on tiles that are partially visible. Without a block
// mask, tile visibility follows from the CTA's smallest and largest visible key range, computed
// once; with one, the CTA votes per tile (two extra barriers per tile).
#pragma once

#include <cfloat>
#include <cstdint>

#include "common/quant_math.h"
#include "cuda/common/mma.cuh"
#include "cuda/common/swizzle.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/attention_common.cuh"
#include "cuda/common/attention_params.h"
#include "cuda/common/head_dims.h"

namespace int8attn {

template <int DPAD, Mode MODE, bool BF16, int WARPS>
struct AttnTraits {
  static constexpr int kDpad = DPAD;
  static constexpr int kWarps = WARPS;
  static constexpr int kBM = 16 * WARPS;  // query rows per CTA
  static constexpr int kThreads = 32 * WARPS;
  static constexpr bool kInt8QK = MODE != Mode::kExact;
  static constexpr bool kFp8PV = MODE == Mode::kFast;
  static constexpr int kQRowBytes = kInt8QK ? DPAD : DPAD * 2;  // Q and K smem rows
  static constexpr int kKSteps = kQRowBytes / 32;               // 32 bytes per MMA k-step
  static constexpr int kVRowBytes = kFp8PV ? kAttnBlockN : DPAD * 2;
  static constexpr int kVRows = kFp8PV ? DPAD : kAttnBlockN;
  using QTile = dev::SwizzledTile<kQRowBytes>;
  using VTile = dev::SwizzledTile<kVRowBytes>;
  static constexpr int kQBytes = kBM * QTile::kPitch;
  static constexpr int kKBytes = kAttnBlockN * QTile::kPitch;
  static constexpr int kVBytes = kVRows * VTile::kPitch;
  static constexpr int kStageBytes = kKBytes + kVBytes + kAttnBlockN * 4;  // + key scales
  static constexpr int kSmemBytes = kQBytes + 2 * kBM * 4 + 2 * kStageBytes;
  static constexpr int kDTiles = DPAD / 8;                         // output n-tiles of 8 channels
  static constexpr bool kPvBf16 = (MODE == Mode::kExact) && BF16;  // BALANCED V is fp16
  // Q in and O out through per-warp staging areas (rolled loops instead of ~3,000 unrolled
  // instructions per warp, fetched cold) above head dim 128, where the unrolled
  // paths are longest, and in the 1-warp decode CTAs at every head dim (their one warp has no
  // other warp to hide the fetches behind: 36% of a decode call's stall samples):
  // raw Q in the K/V stages (free until the first tile load), O anywhere (the K/V loop is
  // over, and Q's scales and shifts are in registers by then).
  static constexpr bool kStagedIO = kInt8QK && (DPAD > 128 || WARPS == 1);
  static constexpr bool kStagedQ = kStagedIO && WARPS * staged_q_bytes<DPAD>() <= 2 * kStageBytes;
  static constexpr bool kStagedO = kStagedIO && WARPS * staged_o_bytes<DPAD>() <= kSmemBytes;
};

// Visibility of key tile [j0, j0+64) for this thread's row (threads 0..63 own one row each).
__device__ __forceinline__ void tile_visibility(const AttnKernelParams& p, int b, const RowInfo& r,
                                                int j0, bool& any, bool& all) {
  const int j1 = j0 + kAttnBlockN;
  if (!r.valid) {
    any = false;
    all = true;
    return;
  }
  any = j0 < r.hi;
  all = j1 <= r.hi;
  if (p.mask != nullptr && any) {
    const int last = min(j1, r.hi) - 1;
    bool m_any = false, m_all = true;
    for (int kb = j0 / p.mask_kb; kb <= last / p.mask_kb; ++kb) {
      const bool keep = mask_keep(p, b, r, kb * p.mask_kb);
      m_any |= keep;
      m_all &= keep;
    }
    any = m_any;
    all = all && m_all;
  }
}

// cp.async of a [ROWS][Tile::kRowBytes] tile whose global rows lie `gstride` bytes apart into a
// SwizzledTile, THREADS threads sharing the 16-byte chunks. Where the threads cover whole rows,
// each thread keeps one column and steps down the rows: the XOR swizzle repeats every 8 rows,
// so its few shared-memory offsets are computed once and the rest are immediates; the copy is
// then ~2-3 instructions a chunk instead of ~20 for a runtime chunk loop with the swizzle
// recomputed per chunk (~650 instructions a tile in the 1-warp decode CTA).
template <typename Tile, int ROWS, int THREADS>
__device__ __forceinline__ void cp_async_tile(uint8_t* s, const uint8_t* g, int64_t gstride,
                                              int tid) {
  constexpr int C = Tile::kChunks;
  if constexpr (THREADS % C == 0) {
    constexpr int kRowsPerPass = THREADS / C;
    constexpr int kPasses = (ROWS + kRowsPerPass - 1) / kRowsPerPass;
    constexpr int kPhases = (!Tile::kPow2 || kRowsPerPass % 8 == 0) ? 1 : 8 / kRowsPerPass;
    const int row0 = tid / C, col = (tid % C) * 16;
    int soff[kPhases];
#pragma unroll
    for (int ph = 0; ph < kPhases; ++ph) soff[ph] = Tile::offset(row0 + ph * kRowsPerPass, col);
    const uint8_t* g0 = g + row0 * gstride + col;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      if (ROWS % kRowsPerPass == 0 || row0 + i * kRowsPerPass < ROWS)
        dev::cp_async_16(
            s + soff[i % kPhases] + (i / kPhases) * kPhases * kRowsPerPass * Tile::kPitch,
            g0 + static_cast<int64_t>(i * kRowsPerPass) * gstride, true);
    }
  } else {
#pragma unroll
    for (int i = 0; i < (ROWS * C + THREADS - 1) / THREADS; ++i) {
      const int c = tid + i * THREADS, row = c / C, col = (c % C) * 16;
      if ((ROWS * C) % THREADS == 0 || c < ROWS * C)
        dev::cp_async_16(s + Tile::offset(row, col), g + row * gstride + col, true);
    }
  }
}

// S = Q·Kᵀ for one warp's 16 rows x 64 keys (8 n-tiles of 8 keys): INT8 m16n8k32 into int
// accumulators, or fp16/bf16 m16n8k16 into float ones. K comes from the swizzled smem tile.
// Only the first `pairs` 16-key groups are computed (a warp-uniform count; the others stay 0,
// for the caller to mask): the few-keys kernel's last tile is mostly past the keys.
template <typename T, bool BF16, typename Acc>
__device__ __forceinline__ void qk_tile(Acc (&acc)[8][4], const uint32_t (&qf)[T::kKSteps][4],
                                        const uint8_t* sK, int lane, int pairs = 4) {
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = Acc(0);
#pragma unroll
  for (int kk = 0; kk < T::kKSteps; ++kk) {
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      if (np >= pairs) break;
      uint32_t kf[4];
      const int m = lane >> 3;
      const int key = np * 16 + (m >> 1) * 8 + (lane & 7);
      dev::ldmatrix_x4(kf, sK + T::QTile::offset(key, kk * 32 + (m & 1) * 16));
      if constexpr (T::kInt8QK) {
        dev::mma_s8(acc[2 * np], qf[kk], kf[0], kf[1]);
        dev::mma_s8(acc[2 * np + 1], qf[kk], kf[2], kf[3]);
      } else {
        dev::mma_16816<BF16>(acc[2 * np], qf[kk], kf[0], kf[1]);
        dev::mma_16816<BF16>(acc[2 * np + 1], qf[kk], kf[2], kf[3]);
      }
    }
  }
}

// Rows this thread's scores belong to (my_rows[0]: e = 0, 1; [1]: e = 2, 3) mask the keys of
// tile [j0, j0 + 64) they cannot see: past their range, or dropped by the block mask.
// Only the first `pairs` 16-key groups (as qk_tile).
__device__ __forceinline__ void mask_partial_tile(const AttnKernelParams& p, int b,
                                                  const RowInfo (&my_rows)[2], int j0, int t4,
                                                  float (&s)[8][4], int pairs = 4) {
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    if (n >= 2 * pairs) break;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const RowInfo& r = my_rows[e >> 1];
      const int j = j0 + n * 8 + 2 * t4 + (e & 1);
      const bool vis = j < r.hi && (p.mask == nullptr || mask_keep(p, b, r, j));
      if (!vis) s[n][e] = -INFINITY;
    }
  }
}

// FAST's O += P·V for one warp's 16 rows and a 64-key tile: P (s, already exponentiated and
// scaled by 448) rounded to E4M3, V^T E4M3 from the swizzled stage sV; the rows' sums of the
// rounded P go into l_run.
template <int ARCH, typename T>
__device__ __forceinline__ void pv_tile_fp8(const float (&s)[8][4], const uint8_t* sV,
                                            float (&acc)[T::kDTiles][4], float (&l_run)[2],
                                            int lane, int t4) {
  uint32_t pa[2][4];
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    dev::pack_a_e4m3(s, 4 * kk, pa[kk]);
    if constexpr (ARCH < 90) {  // sm90: on the tensor cores below
      l_run[0] += dev::sum4_e4m3(pa[kk][0]) + dev::sum4_e4m3(pa[kk][2]);
      l_run[1] += dev::sum4_e4m3(pa[kk][1]) + dev::sum4_e4m3(pa[kk][3]);
    }
  }
  // sm90 has no FP8 mma.sync: fp16 MMAs on the unpacked E4M3 values, accumulating into O
  // directly (fp32; ptxas's own emulation adds each product to C with 4 FADDs instead).
  [[maybe_unused]] uint32_t pa16[2][2][4];
  if constexpr (ARCH >= 90) {
    dev::unpack_a_e4m3(pa[0], pa16[0]);
    dev::unpack_a_e4m3(pa[1], pa16[1]);
    // The row sums of the rounded P on the tensor cores: P times a column of ones. Every
    // lane of a quad gets its rows' full sums; lane t4 == 0 adds them, as the epilogue sums
    // l_run over the quad.
    constexpr uint32_t kOnes = 0x3c003c00u;  // fp16 1.0 x2
    float lt[4] = {0.f, 0.f, 0.f, 0.f};
    dev::mma_16816<false>(lt, pa16[0][0], kOnes, kOnes);
    dev::mma_16816<false>(lt, pa16[0][1], kOnes, kOnes);
    dev::mma_16816<false>(lt, pa16[1][0], kOnes, kOnes);
    dev::mma_16816<false>(lt, pa16[1][1], kOnes, kOnes);
    if (t4 == 0) {
      l_run[0] += lt[0];
      l_run[1] += lt[2];
    }
  }
#pragma unroll
  for (int dn = 0; dn < T::kDTiles; ++dn) {
    uint32_t vf[4];
    dev::ldmatrix_x4(vf, sV + T::VTile::offset(dn * 8 + (lane & 7), (lane >> 3) * 16));
    if constexpr (ARCH >= 90) {
      dev::mma_e4m3_as_f16(acc[dn], pa16[0], vf[0], vf[1]);
      dev::mma_e4m3_as_f16(acc[dn], pa16[1], vf[2], vf[3]);
    } else {
      float tmp[4] = {0.f, 0.f, 0.f, 0.f};  // two-level accumulation: one tile, then fp32
      dev::mma_e4m3(tmp, pa[0], vf[0], vf[1]);
      dev::mma_e4m3(tmp, pa[1], vf[2], vf[3]);
      acc[dn][0] += tmp[0];
      acc[dn][1] += tmp[1];
      acc[dn][2] += tmp[2];
      acc[dn][3] += tmp[3];
    }
  }
}

// BALANCED's and EXACT's O += P·V (fp16, or bf16 in EXACT with bf16 inputs): P rounded to the
// MMA's type, V rows from the swizzled stage sV; the rows' sums of the rounded P into l_run.
// Only the first `steps` 16-key groups (a warp-uniform count; P is 0 past them).
template <typename T>
__device__ __forceinline__ void pv_tile_f16(const float (&s)[8][4], const uint8_t* sV,
                                            float (&acc)[T::kDTiles][4], float (&l_run)[2],
                                            int lane, int t4, int steps = 4) {
  // Row sums of the rounded P the MMA sees (consistent numerator and denominator), as P
  // times a column of ones on the tensor cores like the FAST path's.
  constexpr uint32_t kOnes = T::kPvBf16 ? 0x3f803f80u : 0x3c003c00u;  // 1.0 x2
  float lt[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    if (ks >= steps) break;
    uint32_t pa[4];
    pa[0] = dev::pack2<T::kPvBf16>(s[2 * ks][0], s[2 * ks][1]);
    pa[1] = dev::pack2<T::kPvBf16>(s[2 * ks][2], s[2 * ks][3]);
    pa[2] = dev::pack2<T::kPvBf16>(s[2 * ks + 1][0], s[2 * ks + 1][1]);
    pa[3] = dev::pack2<T::kPvBf16>(s[2 * ks + 1][2], s[2 * ks + 1][3]);
    dev::mma_16816<T::kPvBf16>(lt, pa, kOnes, kOnes);
#pragma unroll
    for (int dp = 0; dp < T::kDTiles / 2; ++dp) {
      uint32_t vf[4];
      const int m = lane >> 3;
      const int key = ks * 16 + (m & 1) * 8 + (lane & 7);
      dev::ldmatrix_x4_trans(vf, sV + T::VTile::offset(key, dp * 32 + (m >> 1) * 16));
      dev::mma_16816<T::kPvBf16>(acc[2 * dp], pa, vf[0], vf[1]);
      dev::mma_16816<T::kPvBf16>(acc[2 * dp + 1], pa, vf[2], vf[3]);
    }
  }
  if (t4 == 0) {
    l_run[0] += lt[0];
    l_run[1] += lt[2];
  }
}

// Per-block Q scales (q_per_block): one INT8 scale per 64 rows (row_pitch is a multiple of 64
// in this mode, so each 64-row half of the CTA is one 64-token block of one head: warps 0-3
// and 4-7; a 4-warp CTA holds one such block; decode's 1-warp CTAs never take per-block
// scales). The warps' row maxima (row_absmax, from stage_q_warp_rows) give the block's; Q is
// then read again (balanced if balancing is on, and rotated, as there) and quantized with it into
// sQ, its scales times sm_scale·log2 e into sQScale. Contains __syncthreads: every thread of the
// CTA calls it.
template <typename T>
__device__ __forceinline__ void quantize_q_per_block(const AttnKernelParams& p, int b, int hkv,
                                                     int L, int m_tile, int warp, int lane,
                                                     const float* q_factor,
                                                     const float (&row_absmax)[16], uint8_t* sQ,
                                                     float* sQScale) {
  constexpr int WARPS = T::kWarps, DPAD = T::kDpad;
  float amax = 0.f;
#pragma unroll
  for (int rr = 0; rr < 16; ++rr) amax = dev::fmax_nan(amax, row_absmax[rr]);
  if (lane == 0) sQScale[warp] = amax;
  __syncthreads();
  const int w0 = (warp & ~3) % WARPS;
  amax = dev::fmax_nan(dev::fmax_nan(sQScale[w0], sQScale[(w0 + 1) % WARPS]),
                       dev::fmax_nan(sQScale[(w0 + 2) % WARPS], sQScale[(w0 + 3) % WARPS]));
  __syncthreads();
  const float s = qm::int8_scale(amax, p.q_multiplier);
  const float inv = 1.0f / s;
  for (int rr = 0; rr < 16; ++rr) {
    const int r_local = warp * 16 + rr;
    const RowInfo ri = row_info(p, hkv, m_tile * T::kBM + r_local, L);
    for (int c = 0; c < DPAD / 32; ++c) {
      const int d = c * 32 + lane;
      float x = 0.f;
      if (ri.valid && d < p.D) {
        x = dev::bits16_to_float(
            static_cast<const uint16_t*>(p.q)[b * p.q_stride[0] + ri.h * p.q_stride[1] +
                                              ri.i * p.q_stride[2] + d * p.q_stride[3]],
            p.dtype);
        x *= q_factor != nullptr ? q_factor[d] : qm::kRotateNorm;
      }
      x = rotate8_lanes(x, lane);  // as stage_q_warp_rows
      sQ[T::QTile::offset(r_local, d)] = static_cast<uint8_t>(qm::quantize_int8(x, inv));
    }
    if (lane == 0) sQScale[r_local] = s * p.sm_scale_log2;
  }
}

// Two 8-warp CTAs per SM where the registers allow (D <= 64): one CTA's softmax then overlaps
// the other's matrix work (the kernel is latency-bound with one CTA per SM).
template <int DPAD, int WARPS>
constexpr int attention_min_blocks() {
  return ((DPAD <= 64 && WARPS == 8) || WARPS == 4) ? 2 : 1;
}

template <int ARCH, int DPAD, Mode MODE, bool BF16, int WARPS>
__global__ void __launch_bounds__(32 * WARPS, (attention_min_blocks<DPAD, WARPS>()))
    attention_kernel(const __grid_constant__ AttnKernelParams p) {
  dev::chain_kernels();
  using T = AttnTraits<DPAD, MODE, BF16, WARPS>;
  constexpr int kAttnBlockM = T::kBM;
  constexpr int kAttnThreads = T::kThreads;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* sQ = smem;
  float* sQScale = reinterpret_cast<float*>(smem + T::kQBytes);
  float* sLseShift = sQScale + kAttnBlockM;
  uint8_t* sStage = smem + T::kQBytes + 2 * kAttnBlockM * 4;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;  // fragment row group / thread in group
  const CtaWork work = cta_work(p);
  const int m_tile = work.m_tile, b = work.b, hkv = work.hkv, split = work.split, L = work.L;
  const int64_t kv_head = work.kv_head;
  const uint8_t* gK = static_cast<const uint8_t*>(p.k) + kv_head * p.nk_pad * T::kQRowBytes;
  const uint8_t* gV =
      static_cast<const uint8_t*>(p.v) + kv_head * p.nk_pad * DPAD * (T::kFp8PV ? 1 : 2);
  const float* gKs = T::kInt8QK ? p.k_scale + kv_head * p.nk_pad : nullptr;

  const RowInfo my_rows[2] = {row_info(p, hkv, m_tile * kAttnBlockM + warp * 16 + g8, L),
                              row_info(p, hkv, m_tile * kAttnBlockM + warp * 16 + g8 + 8, L)};
  const RowInfo vis_row = row_info(p, hkv, m_tile * kAttnBlockM + (tid & (kAttnBlockM - 1)), L);
  // Smallest and largest visible key range over the CTA's valid rows (no block mask: a tile is
  // skipped when no row reaches it and needs no per-element masking when every row covers it).
  __shared__ int s_min_hi, s_max_hi;
  if (tid == 0) {
    s_min_hi = 0x7fffffff;
    s_max_hi = 0;
  }
  __syncthreads();
  if (tid < kAttnBlockM && vis_row.valid) {
    atomicMin(&s_min_hi, vis_row.hi);
    atomicMax(&s_max_hi, vis_row.hi);
  }
  __syncthreads();
  const int min_hi = s_min_hi, max_hi = s_max_hi;

  // ---- key-tile range of this CTA (split-KV) ------------------------------------------------
  int t_begin = 0, t_end = (max_hi + kAttnBlockN - 1) / kAttnBlockN;
  if (p.num_splits > 1) {
    t_begin = split * p.tiles_per_split;
    t_end = min(t_end, t_begin + p.tiles_per_split);
  }

  // Next tile at or after `t` that some row can see; sets `full` when every row sees all of it.
  auto next_visible = [&](int t, bool& full) -> int {
    if (p.mask == nullptr) {  // rows see a prefix [0, hi) of the keys: tiles up to t_end
      full = (t + 1) * kAttnBlockN <= min_hi;
      return t < t_end ? t : t_end;
    }
    for (; t < t_end; ++t) {
      bool any, all;
      tile_visibility(p, b, vis_row, t * kAttnBlockN, any, all);
      if (tid >= kAttnBlockM) {
        any = false;
        all = true;
      }
      const int cta_any = __syncthreads_or(any);
      const int cta_all = __syncthreads_and(all);
      if (cta_any) {
        full = cta_all != 0;
        return t;
      }
    }
    full = true;
    return t_end;
  };

  auto load_tile = [&](int t, int stage) {
    uint8_t* sK = sStage + stage * T::kStageBytes;
    uint8_t* sV = sK + T::kKBytes;
    float* sKs = reinterpret_cast<float*>(sV + T::kVBytes);
    const int64_t key0 = static_cast<int64_t>(t) * kAttnBlockN;
    cp_async_tile<typename T::QTile, kAttnBlockN, kAttnThreads>(sK, gK + key0 * T::kQRowBytes,
                                                                T::kQRowBytes, tid);
    if constexpr (T::kFp8PV)  // V^T: DPAD rows of 64 keys, taken from rows of nk_pad bytes
      cp_async_tile<typename T::VTile, T::kVRows, kAttnThreads>(sV, gV + key0, p.nk_pad, tid);
    else
      cp_async_tile<typename T::VTile, T::kVRows, kAttnThreads>(sV, gV + key0 * T::kVRowBytes,
                                                                T::kVRowBytes, tid);
    if constexpr (T::kInt8QK) {
      if (tid < kAttnBlockN / 4) dev::cp_async_16(sKs + tid * 4, gKs + key0 + tid * 4, true);
    }
    dev::cp_async_commit();
  };

  bool full = true;
  int t = next_visible(t_begin, full);
  const int t_first = t;
  // The first key tile flies during the Q prologue where Q stages outside stage 0 (for
  // the 1-warp decode CTAs the prologue is a fifth of their time).
  constexpr bool kEarlyTile = T::kStagedQ && WARPS * staged_q_bytes<DPAD>() <= T::kStageBytes;
  auto first_tile = [&] {
    if (t < t_end)
      load_tile(t, 0);
    else
      dev::cp_async_commit();  // an empty group: the prologue waits for all but one
  };

  // ---- prologue: load Q rows, (balance, ) quantize, stage in shared memory ----------------
  if (T::kStagedQ && p.q_vec && !p.q_per_block) {
    stage_q_rows_staged<DPAD, typename T::QTile, kEarlyTile>(
        p, b, hkv, L, kv_head, m_tile * kAttnBlockM + warp * 16, warp * 16, sQ, sQScale, sLseShift,
        lane, sStage + (kEarlyTile ? T::kStageBytes : 0) + warp * staged_q_bytes<DPAD>(),
        first_tile);
  } else {
    if constexpr (kEarlyTile) first_tile();  // this path reads Q from global memory directly
    float row_absmax[16];
    stage_q_warp_rows<DPAD, T::kInt8QK, BF16, typename T::QTile>(
        p, b, hkv, L, kv_head, m_tile * kAttnBlockM + warp * 16, warp * 16, sQ, sQScale, sLseShift,
        lane, row_absmax);
    const float* q_factor = p.q_factor != nullptr ? p.q_factor + kv_head * DPAD : nullptr;
    if constexpr (T::kInt8QK) {
      if (p.q_per_block)
        quantize_q_per_block<T>(p, b, hkv, L, m_tile, warp, lane, q_factor, row_absmax, sQ,
                                sQScale);
    }
  }
  __syncthreads();

  // Q fragments stay in registers for the whole key loop.
  uint32_t qf[T::kKSteps][4];
  {
    const int m = lane >> 3;
    const int row = warp * 16 + (m & 1) * 8 + (lane & 7);
#pragma unroll
    for (int kk = 0; kk < T::kKSteps; ++kk)
      dev::ldmatrix_x4(qf[kk], sQ + T::QTile::offset(row, kk * 32 + (m >> 1) * 16));
  }
  float q_scale_row[2] = {p.sm_scale_log2, p.sm_scale_log2};
  if constexpr (T::kInt8QK) {
    q_scale_row[0] = sQScale[warp * 16 + g8];
    q_scale_row[1] = sQScale[warp * 16 + g8 + 8];
  }
  const float lse_shift[2] = {sLseShift[warp * 16 + g8], sLseShift[warp * 16 + g8 + 8]};
  // ---- main loop -----------------------------------------------------------------------------
  float acc[T::kDTiles][4];
#pragma unroll
  for (int n = 0; n < T::kDTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  // FAST: P is scaled by 448 (E4M3's largest value) before rounding, folded into the exponent.
  constexpr float kPOffset = T::kFp8PV ? 8.807354922057604f : 0.f;  // log2(448)

  int stage = 0;
  if (!kEarlyTile && t < t_end) load_tile(t, 0);
  while (t < t_end) {
    bool full_next = true;
    const int tn = next_visible(t + 1, full_next);
    if (tn < t_end) {
      load_tile(tn, stage ^ 1);
      dev::cp_async_wait<1>();
    } else {
      dev::cp_async_wait<0>();
    }
    __syncthreads();

    const uint8_t* sK = sStage + stage * T::kStageBytes;
    const uint8_t* sV = sK + T::kKBytes;
    const float* sKs = reinterpret_cast<const float*>(sV + T::kVBytes);

    // S = Q·Kᵀ for this warp's 16 rows x 64 keys (8 n-tiles).
    float s[8][4];
    if constexpr (T::kInt8QK) {
      int si[8][4];
      qk_tile<T, BF16>(si, qf, sK, lane);
      key_scaled_scores(si, sKs, t4, s);
    } else {
      qk_tile<T, BF16>(s, qf, sK, lane);  // scaled by q_scale_row (sm_scale·log2 e) below
    }

    if (!full) mask_partial_tile(p, b, my_rows, t * kAttnBlockN, t4, s);

    online_softmax_step</*kSkipUnitRescale=*/true>(s, q_scale_row, m_run, l_run, acc, kPOffset);

    // O += P·V.
    if constexpr (T::kFp8PV)
      pv_tile_fp8<ARCH, T>(s, sV, acc, l_run, lane, t4);
    else
      pv_tile_f16<T>(s, sV, acc, l_run, lane, t4);
    __syncthreads();  // this stage may be overwritten by the next load
    t = tn;
    full = full_next;
    stage ^= 1;
  }

  // ---- epilogue ------------------------------------------------------------------------------
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 1);
    l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 2);
  }
  if (T::kStagedO && (p.num_splits > 1 || p.o_vec)) {
    // The staging areas overlap Q's (read after the prologue's barrier): without a key tile
    // (a CTA whose rows see no key), no loop barrier separated those reads from these writes.
    if (t_first >= t_end) __syncthreads();
    store_o_rows_staged<DPAD>(p, acc, m_run, l_run, my_rows, lse_shift, kPOffset, split, b, hkv, L,
                              kv_head, m_tile * kAttnBlockM + warp * 16, lane,
                              smem + warp * staged_o_bytes<DPAD>());
  } else {
    write_output_rows<DPAD, T::kInt8QK>(p, acc, m_run, l_run, my_rows, lse_shift, kPOffset, split,
                                        b, kv_head, t4);
  }
}

// Launch one instantiation (dynamic_smem.h sets its shared-memory limit on first use).
template <int ARCH, int DPAD, Mode MODE, bool BF16, int WARPS>
cudaError_t launch_attention_warps(const AttnKernelParams& p, cudaStream_t stream) {
  using T = AttnTraits<DPAD, MODE, BF16, WARPS>;
  auto kernel = attention_kernel<ARCH, DPAD, MODE, BF16, WARPS>;
  const dim3 grid(static_cast<unsigned>(p.m_tiles) * p.B * p.Hkv, p.num_splits);
  return with_dynamic_smem(reinterpret_cast<const void*>(kernel), T::kSmemBytes, [&] {
    return launch_kernel(kernel, grid, dim3(T::kThreads), T::kSmemBytes, stream, p.launch_early, p);
  });
}

// Prefill CTAs have 8 warps (128 rows); the INT8 modes also have a 1-warp (16-row) CTA for
// kv-heads with at most 16 query rows (decode), which the host picks via p.block_m.
template <int ARCH, int DPAD, Mode MODE, bool BF16>
cudaError_t launch_attention_instance(const AttnKernelParams& p, cudaStream_t stream) {
  if constexpr (MODE != Mode::kExact) {
    if (p.block_m == 16) return launch_attention_warps<ARCH, DPAD, MODE, BF16, 1>(p, stream);
  }
  if constexpr (DPAD > 64) {
    if (p.block_m == 64) return launch_attention_warps<ARCH, DPAD, MODE, BF16, 4>(p, stream);
  }
  return launch_attention_warps<ARCH, DPAD, MODE, BF16, 8>(p, stream);
}

// One architecture's instantiations of one mode over MmaHeadDims. EXACT's operands are the
// input type (fp16 or bf16); the INT8 modes' P·V operands are fp16 or FP8 whatever the input.
template <int ARCH, Mode MODE>
cudaError_t launch_attention_mma(const AttnKernelParams& p, int dpad, cudaStream_t stream) {
  return MmaHeadDims::dispatch(dpad, [&](auto d) {
    if constexpr (MODE == Mode::kExact) {
      if (p.dtype == DType::kBF16)
        return launch_attention_instance<ARCH, d.value, MODE, true>(p, stream);
    }
    return launch_attention_instance<ARCH, d.value, MODE, false>(p, stream);
  });
}

// One architecture's entry (cuda/smXX): the modes it runs; cudaErrorInvalidValue for others.
template <int ARCH, Mode... kModes>
cudaError_t launch_attention_mma_modes(const AttnKernelParams& p, int dpad, Mode mode,
                                       cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  (void)((mode == kModes ? (err = launch_attention_mma<ARCH, kModes>(p, dpad, stream), true)
                         : false) ||
         ...);
  return err;
}

}  // namespace int8attn
