// The Hopper (sm90a) attention kernel for BALANCED and FAST: warp-specialised, TMA-fed,
// warpgroup MMAs (FlashAttention-3's structure, written for INT8 Q·Kᵀ).
//
// One CTA = 1 + C warpgroups = 64·C query rows of one (batch, kv-head) (C = 2 consumers at head
// dim 128, 3 at 64), rows packed as in attention_mma_kernel.cuh (the q-heads of a GQA group share
// one M dimension):
//   warpgroup 0, the producer: gives most of its registers away (setmaxnreg) and one thread
//     streams 128-key tiles of K (INT8), V (E4M3 V^T for FAST, fp16 V for BALANCED) and the
//     per-key K scales into a ring of shared-memory stages with TMA, signalling "full" mbarriers;
//   warpgroups 1.., the consumers: 64 rows each. Per tile: S = Q·Kᵀ with wgmma s8 (both
//     operands in shared memory, Q quantized there once in the prologue), online softmax in
//     registers (log2 domain: one multiply by the key's scale per score, the row's Q scale
//     folded into the exponent's FFMA), then
//     O += P·V with wgmma from registers (P as the A operand: the S accumulator layout is the
//     A fragment layout, FAST's V^T keys are permuted to match), and an "empty" arrive that
//     hands the stage back to the producer.
// Overlap, as in FlashAttention-3: each consumer issues tile n's Q·Kᵀ together with tile n-1's
// P·V and runs tile n's softmax while that P·V executes (intra-warpgroup pipelining); the two
// consumers run free of each other, so one's softmax also overlaps the other's MMAs. (FA3's
// ping-pong, consumers taking turns on named barriers, did not pay here
// and 37.)
//
// Scope (the host routes everything else to the warp-MMA kernel): padded head dims 64, 96, 128,
// 160 and 192 (WgmmaHeadDims); no block mask, per-token Q scales. Causal, valid lengths,
// GQA, broadcast K/V, LSE and split-KV are supported. Shared-memory layouts are the wgmma
// canonical K-major swizzled ones, written by TMA with the matching swizzle mode (and by the Q
// prologue through dev::SlabTile): Q and K rows that are not one swizzle span (96, 160, 192
// bytes), and BALANCED's fp16 V rows, are stored as column slabs of 32, 64 or 128 bytes.
#pragma once

#include <cuda.h>

#include <cfloat>
#include <cstdint>

#include "cuda/sm90/primitives.cuh"
#include "cuda/common/swizzle.cuh"
#include "cuda/sm90/wgmma_ops.cuh"
#include "cuda/common/attention_common.cuh"
#include "cuda/common/head_dims.h"

namespace int8attn {

struct Sm90AttnParams {
  AttnKernelParams a;
  CUtensorMap k_map;  // K [heads][nk_pad][DPAD] int8, box (one slab) kSpan bytes x 128 keys
  CUtensorMap v_map;  // FAST: V^T [heads][DPAD][nk_pad] E4M3, box 128 keys x DPAD
                      // BALANCED: V [heads][nk_pad][DPAD] fp16, box 32 or 64 ch x 128 keys
};

template <int DPAD, Mode MODE>
struct Sm90Traits {
  static_assert(WgmmaHeadDims::contains(DPAD), "no sm90 kernel for this head dim");
  static constexpr bool kFp8PV = MODE == Mode::kFast;
  // Consumer warpgroups (64 rows each): three at head dim 64, whose small O accumulator leaves
  // the registers for it, so each K/V tile read from L2 serves 192 rows; two at 128.
  static constexpr int kConsumers = sm90_consumer_warpgroups(DPAD);
  static constexpr int kBM = 64 * kConsumers;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // setmaxnreg split of the 64K registers: the producer keeps 24 per thread.
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160;
  using QTile = dev::SlabTile<DPAD, kBM>;          // Q [slab][kBM rows][span]
  using KTile = dev::SlabTile<DPAD, kSm90BlockN>;  // K [slab][128 keys][span]
  // BALANCED's fp16 V tile, N-major: [channel block][128 keys][span] (a block = span/2 channels).
  using VTile = dev::SlabTile<2 * DPAD, kSm90BlockN>;
  static constexpr int kQBytes = kBM * DPAD;
  static constexpr int kKBytes = kSm90BlockN * DPAD;
  static constexpr int kVBytes = kSm90BlockN * DPAD * (kFp8PV ? 1 : 2);
  // FAST sums each row's P on the tensor cores: below V^T's DPAD rows every stage keeps 8 more
  // (the MMA's N granularity), the first all ones, written once in the prologue, so column
  // DPAD of the P·V accumulator is the row sum of the rounded P (64 FADDs per tile and thread
  // fewer in the softmax, the consumers' critical path). That column is moved
  // into fp32 after every tile (drain_row_sums).
  static constexpr bool kOnesColumn = kFp8PV;
  static constexpr int kOnesBytes = kOnesColumn ? 8 * kSm90BlockN : 0;
  static constexpr int kAccN = DPAD + (kOnesColumn ? 8 : 0);  // P·V's N
  // K scales after V (and the ones), padded so every stage (and every tile in it) stays
  // 1024-byte aligned, as the 128-byte swizzle requires.
  static constexpr int kStageBytes = kKBytes + kVBytes + kOnesBytes + 1024;
  static constexpr int kMiscBytes = 8 * kBM + 128;  // Q scales, LSE shifts, barriers
  // Per consumer warp: its 16 raw Q rows on the way in, its 16 fp32 O rows on the way out
  // (stage_q_rows_staged / store_o_rows_staged, attention_common.cuh).
  // Only where it fits: BALANCED at head dim 128 (fp16 V tiles) has no room left for it.
  static constexpr int kWarpStagingBytes = staged_o_bytes<DPAD>();
  static_assert(staged_q_bytes<DPAD>() <= kWarpStagingBytes, "Q staging must fit");
  // Ring of K/V tiles: four stages, two above head dim 128, where the staging areas (the
  // tiny shapes of those head dims are latency-bound on the once-per-CTA code)
  // would not fit beside four.
  static constexpr int kStages = DPAD > 128 ? 2 : 4;
  static constexpr int kBaseSmemBytes = 1024 + kQBytes + kStages * kStageBytes + kMiscBytes;
  static constexpr bool kStagedIO =
      DPAD > 64 && kBaseSmemBytes + 4 * kConsumers* kWarpStagingBytes <= 227 * 1024;
  static constexpr int kSmemBytes =
      kBaseSmemBytes + (kStagedIO ? 4 * kConsumers * kWarpStagingBytes : 0);
  static_assert(kSmemBytes <= 227 * 1024, "over the sm90 per-block shared memory limit");
  // The tile's key scales loaded between the MMA issue and the Q·Kᵀ wait (their latency hidden
  // under the MMAs): 1-5% faster with two consumers (240 registers); with three (160) BALANCED
  // lost 19%, so there they are loaded after the wait.
  static constexpr bool kEarlyKeyScales = kConsumers == 2;
  static constexpr int kKSteps = DPAD / 32;  // Q·Kᵀ k-steps of 32 bytes
  static constexpr int kDTiles = DPAD / 8;
  static constexpr int kAccTiles = kAccN / 8;
};

// KBLOCK: K scales per 64 keys (INT8ATTN_GRANULARITY_PER_BLOCK; the two halves of a 128-key
// tile), which takes the key scale out of the per-score work: see the softmax.
template <int DPAD, Mode MODE, bool KBLOCK>
__global__ void __launch_bounds__(Sm90Traits<DPAD, MODE>::kThreads, 1)
    attention_sm90_kernel(const __grid_constant__ Sm90AttnParams P) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  dev::chain_kernels();
  using T = Sm90Traits<DPAD, MODE>;
  const AttnKernelParams& p = P.a;
  extern __shared__ uint8_t smem_raw[];
  // Aligned to 1024 bytes (128-byte swizzle) by pointer arithmetic on smem_raw itself: a
  // round trip through an integer loses the address space, and every access through the result
  // became a generic LD/ST instead of LDS/STS.
  uint8_t* smem = smem_raw + ((1024u - (dev::smem_addr(smem_raw) & 1023u)) & 1023u);
  uint8_t* sQ = smem;
  uint8_t* sStages = smem + T::kQBytes;
  uint8_t* misc = sStages + T::kStages * T::kStageBytes;
  float* sQScale = reinterpret_cast<float*>(misc);
  float* sLseShift = sQScale + T::kBM;
  uint64_t* full_bar = reinterpret_cast<uint64_t*>(misc + 8 * T::kBM);
  uint64_t* empty_bar = full_bar + T::kStages;
  uint8_t* staging = misc + T::kMiscBytes;  // + (warp - 4) * kWarpStagingBytes per consumer warp

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = tid >> 7;
  const CtaWork work = cta_work(p);
  const int m_tile = work.m_tile, b = work.b, hkv = work.hkv, split = work.split, L = work.L;
  const int64_t kv_head = work.kv_head;

  if constexpr (T::kOnesColumn) {
    // V^T's extra rows in every stage (TMA never writes them): row DPAD all ones (E4M3 0x38),
    // the other seven zero. Uniform rows, so the 128-byte swizzle cannot move anything.
    constexpr int kChunks = T::kOnesBytes / 16;
    for (int i = tid; i < T::kStages * kChunks; i += T::kThreads) {
      const uint32_t one = (i % kChunks) < kSm90BlockN / 16 ? 0x38383838u : 0u;
      *reinterpret_cast<uint4*>(sStages + (i / kChunks) * T::kStageBytes + T::kKBytes + T::kVBytes +
                                (i % kChunks) * 16) = make_uint4(one, one, one, one);
    }
    dev::fence_proxy_async_smem();  // read by wgmma (async proxy) after the barrier below
  }
  if (tid == 0) {
    for (int s = 0; s < T::kStages; ++s) {
      dev::mbar_init(&full_bar[s], 1);
      // One arrive per consumer thread, each after its own reads of the stage (see the arrives).
      dev::mbar_init(&empty_bar[s], 128 * T::kConsumers);
    }
    dev::mbar_init_fence();
  }
  __syncthreads();  // the only CTA-wide barrier: barriers initialised

  // ---- visible key range of the CTA's rows --------------------------------------------------
  // Every warp reduces it over all the CTA's rows itself (a few rows per lane, then warp
  // reductions): no shared atomics and no CTA-wide barrier, so the producer starts streaming
  // K/V at once while the consumers quantize Q.
  int min_hi = 0x7fffffff, max_hi = 0;
  for (int row = lane; row < T::kBM; row += 32) {
    const RowInfo r = row_info(p, hkv, m_tile * T::kBM + row, L);
    if (r.valid) {
      min_hi = min(min_hi, r.hi);
      max_hi = max(max_hi, r.hi);
    }
  }
  min_hi = __reduce_min_sync(0xffffffffu, min_hi);
  max_hi = __reduce_max_sync(0xffffffffu, max_hi);
  int t_begin = 0, t_end = (max_hi + kSm90BlockN - 1) / kSm90BlockN;
  if (p.num_splits > 1) {
    t_begin = split * p.tiles_per_split;
    t_end = min(t_end, t_begin + p.tiles_per_split);
  }

  if (wg == 0) {
    // ---- producer -------------------------------------------------------------------------
    dev::regs_dealloc<24>();
    if (tid == 0) {
      const uint8_t* gKs = reinterpret_cast<const uint8_t*>(p.k_scale + kv_head * p.nk_pad);
      for (int t = t_begin, n = 0; t < t_end; ++t, ++n) {
        const int st = n % T::kStages;
        if (n >= T::kStages) dev::mbar_wait(&empty_bar[st], ((n / T::kStages) - 1) & 1);
        uint8_t* sK = sStages + st * T::kStageBytes;
        uint8_t* sV = sK + T::kKBytes;
        uint8_t* sKs = sV + T::kVBytes + T::kOnesBytes;
        const int key0 = t * kSm90BlockN;
        const uint32_t ks_bytes =
            static_cast<uint32_t>(p.nk_pad - key0 < kSm90BlockN ? p.nk_pad - key0 : kSm90BlockN) *
            4u;
        dev::mbar_arrive_expect_tx(&full_bar[st], T::kKBytes + T::kVBytes + ks_bytes);
        const int head = static_cast<int>(kv_head);
#pragma unroll
        for (int sl = 0; sl < T::KTile::kSlabs; ++sl)
          dev::tma_load_3d(sK + sl * T::KTile::kSlabBytes, &P.k_map, &full_bar[st],
                           sl * T::KTile::kSpan, key0, head);
        if constexpr (T::kFp8PV) {
          dev::tma_load_3d(sV, &P.v_map, &full_bar[st], key0, 0, head);
        } else {
#pragma unroll
          for (int cb = 0; cb < T::VTile::kSlabs; ++cb)
            dev::tma_load_3d(sV + cb * T::VTile::kSlabBytes, &P.v_map, &full_bar[st],
                             cb * T::VTile::kSpan / 2, key0, head);
        }
        dev::bulk_load(sKs, gKs + static_cast<int64_t>(key0) * 4, ks_bytes, &full_bar[st]);
      }
    }
    return;
  }

  // ---- consumers ----------------------------------------------------------------------------
  dev::regs_alloc<T::kConsumerRegs>();
  {
    // Q of this warp's 16 rows: quantized into shared memory once; the warpgroup's 64 rows are
    // complete after its named barrier (ids 1.. : one per consumer warpgroup).
    const int cw = warp - 4;
    if (T::kStagedIO && p.q_vec) {
      stage_q_rows_staged<DPAD, typename T::QTile>(p, b, hkv, L, kv_head, m_tile * T::kBM + cw * 16,
                                                   cw * 16, sQ, sQScale, sLseShift, lane,
                                                   staging + cw * T::kWarpStagingBytes);
    } else {
      float row_absmax[16];
      stage_q_warp_rows<DPAD, true, false, typename T::QTile, 16>(
          p, b, hkv, L, kv_head, m_tile * T::kBM + cw * 16, cw * 16, sQ, sQScale, sLseShift, lane,
          row_absmax);
    }
    dev::fence_proxy_async_smem();  // Q is read by wgmma (async proxy)
    dev::named_bar_sync(wg, 128);
  }
  // Consumer warpgroup (rows cwg*64 ..), broadcast from lane 0 so the compiler knows it is
  // warp-uniform: the wgmma descriptors derived from it then live in uniform registers.
  const int cwg = __shfl_sync(0xffffffffu, wg - 1, 0);
  const int row0 = cwg * 64 + (warp & 3) * 16;  // this warp's first shared row
  const int g8 = lane >> 2, t4 = lane & 3;
  const float q_scale_row[2] = {sQScale[row0 + g8], sQScale[row0 + g8 + 8]};
  const float lse_shift[2] = {sLseShift[row0 + g8], sLseShift[row0 + g8 + 8]};
  const RowInfo my_rows[2] = {row_info(p, hkv, m_tile * T::kBM + row0 + g8, L),
                              row_info(p, hkv, m_tile * T::kBM + row0 + g8 + 8, L)};

  // O, and with kOnesColumn the current tile's row sums in column DPAD (tile kDTiles).
  float o[T::kAccTiles][4];
#pragma unroll
  for (int n = 0; n < T::kAccTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float(&o_flat)[T::kAccN / 2] = reinterpret_cast<float(&)[T::kAccN / 2]>(o);
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  constexpr float kPOffset = T::kFp8PV ? 8.807354922057604f : 0.f;  // log2(448), see FAST
  // P of one tile as the A operand of P·V: FAST 4 k-steps of 32 keys (E4M3), BALANCED 8
  // k-steps of 16 keys (fp16); 4 registers per step.
  constexpr int kPSteps = T::kFp8PV ? 4 : 8;

  auto stage_of = [&](int n) { return sStages + (n % T::kStages) * T::kStageBytes; };
  // Descriptors of the MMAs of tile n (warp-uniform values: ptxas keeps them in uniform
  // registers, as wgmma needs; per-thread values would be moved there between the MMAs,
  // which makes ptxas serialise them).
  struct Descs {
    uint64_t q[T::kKSteps], k[T::kKSteps];  // Q·Kᵀ: Q and K tiles per 32-byte k-step
    uint64_t v[kPSteps];                    // P·V: V tile per k-step
  };
  auto descs_of = [&](int n, Descs& d) {
    const uint8_t* sK = stage_of(n);
    // Slab layouts (dev::SlabTile): rows of one slab are kSpan bytes apart, so 8-row groups
    // are 8·kSpan apart; a k-step starts kstep_offset bytes into the tile (descriptor
    // addresses count 16-byte units).
    constexpr int kSpan = T::QTile::kSpan;
    const uint64_t q0 = dev::smem_desc(sQ + cwg * 64 * kSpan, 16, 8 * kSpan, kSpan);
    const uint64_t k0 = dev::smem_desc(sK, 16, 8 * kSpan, kSpan);
#pragma unroll
    for (int kk = 0; kk < T::kKSteps; ++kk) {
      d.q[kk] = q0 + T::QTile::kstep_offset(kk) / 16;
      d.k[kk] = k0 + T::KTile::kstep_offset(kk) / 16;
    }
    if constexpr (T::kFp8PV) {
      // V^T tile: DPAD rows of 128 keys, K-major; 32 keys per k-step.
      const uint64_t v0 = dev::smem_desc(sK + T::kKBytes, 16, 1024, 128);
#pragma unroll
      for (int i = 0; i < kPSteps; ++i) d.v[i] = v0 + 2 * i;
    } else {
      // V tile: channel blocks of [128 keys][kVSpan bytes] fp16 (N-major; 64 channels a block,
      // or 32 where 64 do not divide the head dim), kSlabBytes apart (the descriptor's leading
      // offset); a k-step of 16 keys advances 16 rows of kVSpan bytes.
      constexpr int kVSpan = T::VTile::kSpan;
      const uint64_t v0 = dev::smem_desc(sK + T::kKBytes, T::VTile::kSlabBytes, 8 * kVSpan, kVSpan);
#pragma unroll
      for (int i = 0; i < kPSteps; ++i) d.v[i] = v0 + i * (16 * kVSpan / 16);
    }
  };
  // S = Q·Kᵀ: 64 rows x 128 keys per warpgroup.
  auto issue_qk = [&](const Descs& d, int(&si)[64]) {
#pragma unroll
    for (int kk = 0; kk < T::kKSteps; ++kk) {
      if (kk == 0)
        dev::WgmmaOps<128>::template s8_ss<false>(si, d.q[kk], d.k[kk]);
      else
        dev::WgmmaOps<128>::template s8_ss<true>(si, d.q[kk], d.k[kk]);
    }
  };
  // O += P·V.
  auto issue_pv = [&](const Descs& d, const uint32_t(&pa)[kPSteps][4]) {
#pragma unroll
    for (int i = 0; i < kPSteps; ++i) {
      if constexpr (T::kFp8PV)
        dev::WgmmaOps<T::kAccN>::template e4m3_rs<true>(o_flat, pa[i], d.v[i]);
      else
        dev::WgmmaOps<DPAD>::template f16_rs<true>(o_flat, pa[i], d.v[i]);
    }
  };
  // Online softmax of tile t (log2 domain; see attention_mma_kernel.cuh for the empty-row
  // convention): updates m_run / l_run, returns O's rescale factor and P (fp32) in s.
  // Scores are kept as x·k_scale; the row's q_scale (> 0, with sm_scale·log2 e folded in) is
  // applied to the row maximum and inside the exponent's FFMA, one multiply fewer per score.
  // The tile's key scales, this thread's 32 columns (kEarlyKeyScales: before the Q·Kᵀ wait);
  // KBLOCK: the two blocks' scales (columns 0-63 and 64-127; every key holds its block's).
  float2 ksr[KBLOCK ? 1 : 16];
  auto load_ks = [&](int n) {
    const float* sKs =
        reinterpret_cast<const float*>(stage_of(n) + T::kKBytes + T::kVBytes + T::kOnesBytes);
    if constexpr (KBLOCK) {
      ksr[0] = make_float2(sKs[0], sKs[kSm90BlockN / 2]);
    } else {
#pragma unroll
      for (int c = 0; c < 16; ++c) ksr[c] = *reinterpret_cast<const float2*>(sKs + c * 8 + 2 * t4);
    }
  };
  // KBLOCK keeps the scores as x = 1.5·2^23 + dot (exact, monotone in dot: one instruction a
  // score); each block's scale joins the row's q_scale in the exponent's FFMA and is applied
  // to the block maxima only: 4.5 instructions a score instead of 6-7.5.
  auto softmax = [&](int t, int n, const int(&si)[64], float(&alpha)[2], float(&s)[16][4]) {
    if constexpr (!T::kEarlyKeyScales || KBLOCK) load_ks(n);
#pragma unroll
    for (int c = 0; c < 16; ++c) {
      if constexpr (KBLOCK) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[c][e] = dev::biased_int_as_float(si[4 * c + e]);
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
    if ((t + 1) * kSm90BlockN > min_hi) {  // some row does not see every key of this tile
      const int j0 = t * kSm90BlockN;
#pragma unroll
      for (int c = 0; c < 16; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j0 + c * 8 + 2 * t4 + (e & 1) >= my_rows[e >> 1].hi) s[c][e] = -INFINITY;
    }
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      // Four independent partial maxima / sums: short dependency chains for a warp that has
      // no other warp on its scheduler to hide latency behind.
      float mx;
      if constexpr (KBLOCK) {  // per block (c < 8, c >= 8), two partials each, then scaled
        float mb[2][2];
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          mb[b][0] = fmaxf(s[8 * b][2 * rh], s[8 * b][2 * rh + 1]);
          mb[b][1] = fmaxf(s[8 * b + 1][2 * rh], s[8 * b + 1][2 * rh + 1]);
#pragma unroll
          for (int c = 8 * b + 2; c < 8 * b + 8; ++c)
            mb[b][c & 1] = fmaxf(mb[b][c & 1], fmaxf(s[c][2 * rh], s[c][2 * rh + 1]));
        }
        // -inf (a masked block) stays -inf: (−inf − bias)·ks.
        mx = fmaxf((fmaxf(mb[0][0], mb[0][1]) - dev::kIntFloatBias) * ksr[0].x,
                   (fmaxf(mb[1][0], mb[1][1]) - dev::kIntFloatBias) * ksr[0].y);
      } else {
        float mx4[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) mx4[i] = fmaxf(s[i][2 * rh], s[i][2 * rh + 1]);
#pragma unroll
        for (int c = 4; c < 16; ++c)
          mx4[c & 3] = fmaxf(mx4[c & 3], fmaxf(s[c][2 * rh], s[c][2 * rh + 1]));
        mx = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3]));
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float qs = q_scale_row[rh];
      mx = fmaxf(m_run[rh], mx * qs);
      const float ref = (mx == -INFINITY) ? 0.f : mx;
      alpha[rh] = dev::fast_exp2(m_run[rh] - ref);
      m_run[rh] = mx;
      const float sub = ref - kPOffset;
      if constexpr (KBLOCK) {
        // 2^(dot·ks·qs − sub) = 2^(x·a + b), a = ks·qs, b = −1.5·2^23·a − sub (its rounding:
        // under one unit of the integer dot product, as for per-key scales).
        const float a[2] = {ksr[0].x * qs, ksr[0].y * qs};
        const float bb[2] = {fmaf(-dev::kIntFloatBias, a[0], -sub),
                             fmaf(-dev::kIntFloatBias, a[1], -sub)};
#pragma unroll
        for (int c = 0; c < 16; ++c) {
          s[c][2 * rh] = dev::fast_exp2(fmaf(s[c][2 * rh], a[c >> 3], bb[c >> 3]));
          s[c][2 * rh + 1] = dev::fast_exp2(fmaf(s[c][2 * rh + 1], a[c >> 3], bb[c >> 3]));
        }
      } else {
#pragma unroll
        for (int c = 0; c < 16; ++c) {
          s[c][2 * rh] = dev::fast_exp2(fmaf(s[c][2 * rh], qs, -sub));
          s[c][2 * rh + 1] = dev::fast_exp2(fmaf(s[c][2 * rh + 1], qs, -sub));
        }
      }
      if constexpr (!T::kOnesColumn) {
        float sum4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int c = 0; c < 16; ++c) sum4[c & 3] += s[c][2 * rh] + s[c][2 * rh + 1];
        l_run[rh] = l_run[rh] * alpha[rh] + ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
      }
    }
  };
  // FAST's row sums, out of the P·V accumulator into l_run after each tile's P·V (then rescaled
  // like O): the FP8 MMAs add into their accumulator with a truncating, reduced precision, and
  // P is all positive, so left there the error grows with the tiles a CTA walks (rel-L1 0.26 at
  // 16K keys); one tile's sum is exact enough. Only lanes t4 == 0 hold column
  // DPAD; the others add zeros.
  auto drain_row_sums = [&](const float(&scale)[2]) {
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      l_run[rh] = (l_run[rh] + o[T::kDTiles][2 * rh]) * scale[rh];
      o[T::kDTiles][2 * rh] = 0.f;
    }
  };
  // P as the A operand of P·V. Packed only once the previous P·V has completed: writing the
  // registers of an in-flight wgmma's A operand would make ptxas serialise the MMAs.
  auto pack_p = [&](const float(&s)[16][4], uint32_t(&pa)[kPSteps][4]) {
    if constexpr (T::kFp8PV) {
      // 32-key group kk holds S columns {8(4kk+i) + 2t4 + e}; FAST's V^T layout stores them at
      // the A fragment's positions (fp8_v_logical_position).
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int c0 = 4 * kk;
        pa[kk][0] = dev::pack4_e4m3(s[c0][0], s[c0][1], s[c0 + 1][0], s[c0 + 1][1]);
        pa[kk][1] = dev::pack4_e4m3(s[c0][2], s[c0][3], s[c0 + 1][2], s[c0 + 1][3]);
        pa[kk][2] = dev::pack4_e4m3(s[c0 + 2][0], s[c0 + 2][1], s[c0 + 3][0], s[c0 + 3][1]);
        pa[kk][3] = dev::pack4_e4m3(s[c0 + 2][2], s[c0 + 2][3], s[c0 + 3][2], s[c0 + 3][3]);
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        pa[ks][0] = dev::pack2<false>(s[2 * ks][0], s[2 * ks][1]);
        pa[ks][1] = dev::pack2<false>(s[2 * ks][2], s[2 * ks][3]);
        pa[ks][2] = dev::pack2<false>(s[2 * ks + 1][0], s[2 * ks + 1][1]);
        pa[ks][3] = dev::pack2<false>(s[2 * ks + 1][2], s[2 * ks + 1][3]);
      }
    }
  };

  // Software pipeline per warpgroup: tile n's Q·Kᵀ and tile n-1's P·V are issued together;
  // the softmax of tile n then overlaps the P·V still running.
  const int ntiles = t_end - t_begin;
  if (ntiles > 0) {
    int si[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) si[i] = 0;
    uint32_t pa[kPSteps][4];
    float alpha[2];
    // Every register a wgmma reads is pinned (wgmma_fence_regs) before the MMA section opens:
    // an instruction defining one inside it would make ptxas serialise the wgmmas.
    dev::wgmma_fence_regs(si);
    dev::wgmma_fence_regs(o_flat);
    Descs cur, prev;
    descs_of(0, cur);
    dev::mbar_wait(&full_bar[0], 0);
    dev::wgmma_fence();
    issue_qk(cur, si);
    dev::wgmma_commit();
    if constexpr (T::kEarlyKeyScales && !KBLOCK) load_ks(0);
    dev::wgmma_wait<0>();
    dev::wgmma_fence_regs(si);
    float p_tile[16][4];
    softmax(t_begin, 0, si, alpha, p_tile);
    pack_p(p_tile, pa);
    dev::wgmma_fence_regs(pa);
    for (int n = 1; n < ntiles; ++n) {
      prev = cur;
      descs_of(n, cur);
      dev::mbar_wait(&full_bar[n % T::kStages], (n / T::kStages) & 1);
      dev::wgmma_fence();
      issue_qk(cur, si);
      dev::wgmma_commit();
      issue_pv(prev, pa);
      dev::wgmma_commit();
      if constexpr (T::kEarlyKeyScales && !KBLOCK) load_ks(n);
      dev::wgmma_wait<1>();  // Q·Kᵀ of tile n done; P·V of tile n-1 still running
      // Registers an in-flight wgmma reads stay live until its wait (pinned after it), so the
      // compiler cannot hand them to the softmax meanwhile.
      dev::wgmma_fence_regs(si);
      softmax(t_begin + n, n, si, alpha, p_tile);
      dev::wgmma_wait<0>();
      dev::wgmma_fence_regs(o_flat);
      // Every thread arrives after its own ld.shared of the stage's key scales: a lane-0 arrive
      // would order only lane 0's reads before the producer's refill (tests/gpu/sanitizer).
      dev::mbar_arrive(&empty_bar[(n - 1) % T::kStages]);
      if constexpr (T::kOnesColumn) drain_row_sums(alpha);
      // Rescale O only when some row's maximum moved (rare after the first tiles); the vote
      // keeps the branch warp-uniform.
      if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
        for (int dn = 0; dn < T::kDTiles; ++dn)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[dn][e] *= alpha[e >> 1];
      }
      pack_p(p_tile, pa);
      dev::wgmma_fence_regs(o_flat);
      dev::wgmma_fence_regs(pa);
    }
    dev::wgmma_fence();
    issue_pv(cur, pa);
    dev::wgmma_commit();
    dev::wgmma_wait<0>();
    dev::wgmma_fence_regs(o_flat);
    dev::mbar_arrive(&empty_bar[(ntiles - 1) % T::kStages]);
    if constexpr (T::kOnesColumn) drain_row_sums({1.f, 1.f});
  }

  // ---- epilogue ------------------------------------------------------------------------------
  if constexpr (T::kOnesColumn) {
    // The row sums drained from column DPAD sit in lane t4 == 0 of each quad.
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) l_run[rh] = __shfl_sync(0xffffffffu, l_run[rh], lane & ~3);
  } else {
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 1);
      l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 2);
    }
  }
  const float(&o_out)[T::kDTiles][4] = reinterpret_cast<const float(&)[T::kDTiles][4]>(o);
  if (T::kStagedIO && p.num_splits == 1 && p.o_vec)
    store_o_rows_staged<DPAD>(p, o_out, m_run, l_run, my_rows, lse_shift, kPOffset, split, b, hkv,
                              L, kv_head, m_tile * T::kBM + row0, lane,
                              staging + (warp - 4) * T::kWarpStagingBytes);
  else
    write_output_rows<DPAD, true>(p, o_out, m_run, l_run, my_rows, lse_shift, kPOffset, split, b,
                                  kv_head, t4);
#else
  __trap();  // compiled for sm_90a only
#endif
}

}  // namespace int8attn
