// The sm90a kernel's Q prologue with TMA (Sm90Traits::kQTma, Sm90AttnParams::q_tma): the
// producer thread copies each consumer warp's 16 raw Q rows into that warp's staging area with
// one tensor copy, the first thing the CTA does, and the consumers quantize them from there.
// Without it each consumer lane issues its rows' cp.async copies itself (stage_q_rows_staged),
// on the consumers' critical path before the first MMA: ~1% of the kernel at Flux's shape
// (docs/design/cuda.md, "Outside the loop").
//
// The box is a warp's 16 rows of the staging area's width (kLanes chunks of 8 channels);
// channels past D and rows past Nq are zero-filled by TMA, as the copies zero-fill them. The
// host makes the map only where a warp's 16 packed rows lie in one q-head (no GQA, or Nq a
// multiple of 16), so one box is the warp's rows; a warp whose first row is outside Q holds no
// valid row and gets no copy (producer and consumer decide it by the same row_info).
#pragma once

#include <cstdint>

#include "cuda/common/attention_common.cuh"
#include "cuda/sm90/cta_clocks.cuh"
#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/wgmma_key_split.cuh"
#include "cuda/sm90/wgmma_traits.cuh"

namespace int8attn {

// The producer thread: every consumer warp's raw Q rows, each on that warp's barrier.
template <class T>
__device__ __forceinline__ void produce_q_rows(const Sm90AttnParams& P, const CtaWork& w,
                                               const Sm90Smem<T>& sm) {
  constexpr uint32_t kBytes = staged_q_bytes<T::kDpad>();
#pragma unroll 1
  for (int cw = 0; cw < T::kStagingWarps; ++cw) {
    const RowInfo r = row_info(P.a, w.hkv, warp_first_row<T>(w, cw), w.L);
    if (!r.valid) continue;
    dev::mbar_arrive_expect_tx(&sm.q_full[cw], kBytes);
    dev::tma_load_4d(sm.staging + cw * T::kWarpStagingBytes, &P.q_map, &sm.q_full[cw], 0, r.i, r.h,
                     w.b);
  }
}

// A consumer warp (cw): its 16 query rows (packed rows packed_row0.., shared rows r_local0..)
// into sQ as INT8 with per-row scales, from the rows produce_q_rows copied; the same maths and
// the same bytes as stage_q_rows_staged.
template <class T>
__device__ __forceinline__ void stage_q_rows_landed(const AttnKernelParams& p, const CtaWork& w,
                                                    const Sm90Smem<T>& sm, int cw, int packed_row0,
                                                    int r_local0, int lane) {
  constexpr int DPAD = T::kDpad;
  const int c0 = (lane % QChunks<DPAD>::kLanes) * 8;
  float kmu[8], q_factor[8];
  load_q_chunk_constants<DPAD>(p, w.kv_head, c0, kmu, q_factor);
  const uint32_t live_passes =
      staged_q_passes<DPAD, false>(p, w.b, w.hkv, w.L, packed_row0, lane, nullptr);
  finish_q_chunk_constants(p, c0, kmu, q_factor);
  if (row_info(p, w.hkv, packed_row0, w.L).valid) dev::mbar_wait(&sm.q_full[cw], 0);
  if (threadIdx.x == 128) cta_clocks::stamp<cta_clocks::kQLanded>();
  quantize_staged_q_rows<DPAD, typename T::QTile, QChunks<DPAD>::kWideGroup>(
      p, live_passes, kmu, q_factor, r_local0, sm.q, sm.q_scale, sm.lse_shift, lane,
      sm.staging + cw * T::kWarpStagingBytes);
}

}  // namespace int8attn
