// The Hopper (sm90a) attention kernel for BALANCED and FAST: warp-specialised, TMA-fed,
// warpgroup MMAs (FlashAttention-3's structure, written for INT8 Q·Kᵀ). This file is the
// kernel's outline; each stage has its own file:
//   wgmma_traits.cuh    parameters, warpgroups, registers, the shared-memory layout;
//   wgmma_producer.cuh  the producer: TMA streaming of K/V tiles into a ring of stages;
//   wgmma_mainloop.cuh  the consumers' pipelined Q·Kᵀ / P·V loop;
//   wgmma_softmax.cuh   the online softmax of a tile;
//   wgmma_exp_turns.cuh the consumers' turns at the exponentials;
//   wgmma_q_prologue.cuh Q's raw rows by TMA into the consumer warps' staging areas;
//   wgmma_key_split.cuh key-split CTAs (the grid's tail): the warpgroups' key shares, the merge;
//   attention_common.cuh (shared with the warp-MMA kernel) the tile scheduler (cta_work), row
//     visibility, the Q prologue and the output epilogue.
//
// One CTA = 1 + C warpgroups = 64·C query rows of one (batch, kv-head) (C = 2 consumers at head
// dim 128, 3 at 64), rows packed as in attention_mma_kernel.cuh (the q-heads of a GQA group share
// one M dimension):
//   warpgroup 0, the producer, gives most of its registers away (setmaxnreg) and one thread
//     streams the tiles;
//   warpgroups 1.., the consumers, 64 rows each, quantize their Q rows into shared memory once
//     (the raw rows copied by the producer's TMA where the layout allows, by the lanes
//     otherwise), then run the main loop, then write O.
// The consumers run free of each other, so one's softmax also overlaps the other's MMAs, but
// take turns at starting their exponentials (wgmma_exp_turns.cuh). (FA3's ping-pong, turns at
// the MMA issue, was measured four times here and never paid: docs/design/cuda.md.)
//
// Scope (the host routes everything else to the warp-MMA kernel): padded head dims 64, 96, 128,
// 160, 192, 224 and 256 (WgmmaHeadDims; key tiles of 128 or 64: sm90_block_n); no block mask,
// per-token Q scales. Causal, valid lengths, GQA, broadcast K/V, LSE and split-KV are supported.
// Shared-memory layouts are the wgmma canonical K-major swizzled ones, written by TMA with the
// matching swizzle mode (and by the Q prologue through dev::SlabTile): Q and K rows that are not
// one swizzle span (96, 160, 192, 224 bytes), and BALANCED's fp16 V rows, are stored as column
// slabs of 32, 64 or 128 bytes; FAST's V^T rows of 64 keys are one 64-byte span.
#pragma once

#include <cstdint>

#include "cuda/common/attention_common.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/sm90/cta_clocks.cuh"
#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/wgmma_mainloop.cuh"
#include "cuda/sm90/wgmma_key_split.cuh"
#include "cuda/sm90/wgmma_producer.cuh"
#include "cuda/sm90/wgmma_q_prologue.cuh"
#include "cuda/sm90/wgmma_softmax.cuh"
#include "cuda/sm90/wgmma_traits.cuh"

namespace int8attn {

// The key tiles the CTA's rows see, [t_begin, t_end). Every warp reduces it over all the CTA's
// rows itself (a few rows per lane, then warp reductions): no shared atomics and no CTA-wide
// barrier, so the producer starts streaming K/V at once while the consumers quantize Q.
// min_hi: the smallest key bound of a valid row (tiles below it need no masking).
template <class T>
__device__ __forceinline__ void visible_tiles(const AttnKernelParams& p, const CtaWork& w, int lane,
                                              int& t_begin, int& t_end, int& min_hi) {
  int lo = 0x7fffffff, hi = 0;
  for (int row = lane; row < cta_rows<T>(w); row += 32) {
    const RowInfo r = row_info(p, w.hkv, w.row0 + row, w.L);
    if (r.valid) {
      lo = min(lo, r.hi);
      hi = max(hi, r.hi);
    }
  }
  min_hi = __reduce_min_sync(0xffffffffu, lo);
  hi = __reduce_max_sync(0xffffffffu, hi);
  t_begin = 0;
  t_end = (hi + T::kBN - 1) / T::kBN;
  if (p.num_splits > 1) {
    t_begin = w.split * p.tiles_per_split;
    t_end = min(t_end, t_begin + p.tiles_per_split);
  }
}

// Before any warp specialises: FAST's ones rows below V^T in every stage or BALANCED's block of
// ones (T::kTensorRowSums), and the barriers.
template <class T>
__device__ __forceinline__ void init_shared(const Sm90Smem<T>& sm, int tid, bool one_reader) {
  if constexpr (T::kOnesColumn) {
    // V^T's extra rows in every stage (TMA never writes them): row DPAD all ones (E4M3 0x38),
    // the other seven zero. Uniform rows, so the swizzle cannot move anything.
    constexpr int kChunks = T::kOnesBytes / 16;
    for (int i = tid; i < T::kStages * kChunks; i += T::kThreads) {
      const uint32_t one = (i % kChunks) < T::kBN / 16 ? 0x38383838u : 0u;
      *reinterpret_cast<uint4*>(sm.stage_ones(i / kChunks) + (i % kChunks) * 16) =
          make_uint4(one, one, one, one);
    }
    dev::fence_proxy_async_smem();  // read by wgmma (async proxy) after the barrier below
  } else if constexpr (T::kOnesBlock) {
    // BALANCED's block of fp16 ones (the row sums' MMA operand).
    for (int i = tid; i < T::kOnesBlockBytes / 16; i += T::kThreads)
      reinterpret_cast<uint4*>(sm.ones)[i] =
          make_uint4(0x3C003C00u, 0x3C003C00u, 0x3C003C00u, 0x3C003C00u);
    dev::fence_proxy_async_smem();
  }
  if (tid == 0) {
    for (int s = 0; s < T::kStages; ++s) {
      dev::mbar_init(&sm.full[s], 1);
      // One arrive per consumer thread, each after its own reads of the stage (see the arrives);
      // in a key-split CTA one warpgroup reads each stage.
      dev::mbar_init(&sm.empty[s], one_reader ? 128 : 128 * T::kConsumers);
    }
    if constexpr (T::kQTma)
      for (int cw = 0; cw < T::kStagingWarps; ++cw) dev::mbar_init(&sm.q_full[cw], 1);
    dev::mbar_init_fence();
  }
}

// KBLOCK: K scales per 64 keys (INT8ATTN_GRANULARITY_PER_BLOCK), see wgmma_softmax.cuh.
template <int DPAD, Mode MODE, bool KBLOCK>
__global__ void __launch_bounds__(Sm90Traits<DPAD, MODE>::kThreads, 1)
    attention_sm90_kernel(const __grid_constant__ Sm90AttnParams P) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (threadIdx.x == 0) cta_clocks::entry();
  dev::start_next_kernel();
  using T = Sm90Traits<DPAD, MODE>;
  const AttnKernelParams& p = P.a;
  extern __shared__ uint8_t smem_raw[];
  // Aligned to 1024 bytes (128-byte swizzle) by pointer arithmetic on smem_raw itself: a
  // round trip through an integer loses the address space, and every access through the result
  // became a generic LD/ST instead of LDS/STS.
  const Sm90Smem<T> sm(smem_raw + ((1024u - (dev::smem_addr(smem_raw) & 1023u)) & 1023u));
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = tid >> 7;
  const CtaWork work = cta_work(p);
  init_shared(sm, tid, key_split<T>(work));
  __syncthreads();  // the only CTA-wide barrier: barriers initialised
  if constexpr (T::kQTma)
    if (P.q_tma && tid == 0) produce_q_rows(P, work, sm);  // first: Q is the consumers' first need
  // Shared memory, barriers and Q's copies need nothing of the preparation (Q is the caller's,
  // complete before the call's first kernel began): they run during its tail when this kernel
  // was launched early. Everything below reads what it wrote.
  dev::wait_previous_kernels();
  if (tid == 0) cta_clocks::stamp<cta_clocks::kPrepared>();

  int t_begin, t_end, min_hi;
  visible_tiles<T>(p, work, lane, t_begin, t_end, min_hi);
  if (wg == 0) {
    dev::regs_dealloc<24>();
    if (tid == 0) produce_kv_tiles(P, work, sm, t_begin, t_end);
    return;
  }

  // ---- consumers ----------------------------------------------------------------------------
  dev::regs_alloc<T::kConsumerRegs>();
  const int cw = warp - 4;  // consumer warp: its 16 rows start at shared row cw·16
  uint8_t* staging = sm.staging + cw * T::kWarpStagingBytes;
  const int row_g = warp_first_row<T>(work, cw);  // and at packed row row_g
  // Q of this warp's 16 rows: quantized into shared memory once; the warpgroup's 64 rows are
  // complete after its named barrier (ids 1.. : one per consumer warpgroup).
  // Without a Q tensor map: each lane copies its rows' chunks itself (16-byte rows) or loads
  // them into registers.
  const auto stage_q_by_lanes = [&] {
    if (T::kStagedIO && p.q_vec) {
      stage_q_rows_staged<DPAD, typename T::QTile, false, QChunks<DPAD>::kWideGroup>(
          p, work.b, work.hkv, work.L, work.kv_head, row_g, cw * 16, sm.q, sm.q_scale, sm.lse_shift,
          lane, staging);
    } else {
      float row_absmax[16];
      stage_q_warp_rows<DPAD, true, false, typename T::QTile, 16>(
          p, work.b, work.hkv, work.L, work.kv_head, row_g, cw * 16, sm.q, sm.q_scale, sm.lse_shift,
          lane, row_absmax);
    }
  };
  if constexpr (T::kQTma) {
    if (P.q_tma)
      stage_q_rows_landed(p, work, sm, cw, row_g, cw * 16, lane);
    else
      stage_q_by_lanes();
  } else {
    stage_q_by_lanes();
  }
  dev::fence_proxy_async_smem();  // Q is read by wgmma (async proxy)
  dev::named_bar_sync(wg, 128);
  if (tid == 128) cta_clocks::stamp<cta_clocks::kQReady>();

  // Consumer warpgroup (rows cwg*64 ..), broadcast from lane 0 so the compiler knows it is
  // warp-uniform: the wgmma descriptors derived from it then live in uniform registers.
  const int cwg = __shfl_sync(0xffffffffu, wg - 1, 0);
  const int row0 = cwg * 64 + (warp & 3) * 16;  // this warp's first shared row
  const int g8 = lane >> 2;
  Sm90Softmax<T, KBLOCK> sfx;
  // A row's constants are read by the quad's first lane and shuffled to the others: a
  // key-split CTA's merge later reuses these slots, written by that lane only.
  const auto quad_read = [&](const float* slot) {
    return __shfl_sync(0xffffffffu, (lane & 3) == 0 ? *slot : 0.f, lane & ~3);
  };
  sfx.q_scale_row[0] = quad_read(sm.q_scale + row0 + g8);
  sfx.q_scale_row[1] = quad_read(sm.q_scale + row0 + g8 + 8);
  sfx.rows[0] = row_info(p, work.hkv, row_g + g8, work.L);
  sfx.rows[1] = row_info(p, work.hkv, row_g + g8 + 8, work.L);
  sfx.min_hi = min_hi;
  sfx.t4 = lane & 3;
  const float lse_shift[2] = {quad_read(sm.lse_shift + row0 + g8),
                              quad_read(sm.lse_shift + row0 + g8 + 8)};

  // O, and with T::kTensorRowSums the row sums in the 8 columns after it (tile kDTiles; FAST's
  // only the current tile's, in column DPAD).
  float o[T::kAccTiles][4];
#pragma unroll
  for (int n = 0; n < T::kAccTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  consume_kv_tiles(sm, cwg, t_begin, t_end - t_begin,
                   key_split<T>(work) ? RingShare{cwg, T::kConsumers} : RingShare{0, 1}, sfx, o);

  if (tid == 128) cta_clocks::stamp<cta_clocks::kLoopDone>();
  // ---- epilogue ------------------------------------------------------------------------------
  sfx.finish_row_sums(o, lane);
  if constexpr (T::kKeySplit)
    if (work.key_split && !merge_key_split(sm, cwg, warp, lane, sfx, o)) return;
  const float(&o_out)[T::kDTiles][4] = reinterpret_cast<const float(&)[T::kDTiles][4]>(o);
  if (T::kStagedIO && p.num_splits == 1 && p.o_vec)
    store_o_rows_staged<DPAD>(p, o_out, sfx.m_run, sfx.l_run, sfx.rows, lse_shift, sfx.kPOffset,
                              work.split, work.b, work.hkv, work.L, work.kv_head, row_g, lane,
                              staging);
  else
    write_output_rows<DPAD, true>(p, o_out, sfx.m_run, sfx.l_run, sfx.rows, lse_shift, sfx.kPOffset,
                                  work.split, work.b, work.kv_head, sfx.t4);
  if (tid == 128) cta_clocks::done(t_end - t_begin);
#else
  __trap();  // compiled for sm_90a only
#endif
}

}  // namespace int8attn
