// Key-split CTAs of the sm90a attention kernel (AttnKernelParams::tail_m_tiles, planned by
// cuda/host/tail_plan.h): a grid's last, partial wave of CTAs leaves SMs idle, so the host may
// give a head's last rows to CTAs of 64 rows instead of 64·kConsumers, in which every consumer
// warpgroup holds the same rows and walks every kConsumers-th key tile of the ring (warpgroup c:
// ring positions c, c + kConsumers, ...). Each ends with its own O, maximum m and sum l of the
// rows; the first merges them in shared memory (no second kernel, no fp32 partials in global
// memory) and writes the output as a normal CTA does. Per stage one warpgroup reads it, so
// the stages' empty barriers count 128 arrivals there. Only the three-warpgroup instances (head
// dim 64) have them (Sm90Traits::kKeySplit), which take no turns at their exponentials: turns
// assume every warpgroup walks every tile (wgmma_exp_turns.cuh).
#pragma once

#include <cmath>

#include "cuda/common/attention_common.cuh"
#include "cuda/sm90/named_barrier.cuh"
#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/wgmma_exp_turns.cuh"
#include "cuda/sm90/wgmma_softmax.cuh"
#include "cuda/sm90/wgmma_traits.cuh"

namespace int8attn {

// The first packed row of consumer warp cw's 16 rows (cw = 0 .. 4·kConsumers − 1): the CTA's
// rows in order, or in a key-split CTA the same 64 rows for every consumer warpgroup.
// (Instances without key-split CTAs know it at compile time: key_split<T>.)
template <class T>
__device__ __forceinline__ bool key_split(const CtaWork& w) {
  return T::kKeySplit && w.key_split;
}
template <class T>
__device__ __forceinline__ int warp_first_row(const CtaWork& w, int cw) {
  return w.row0 + (key_split<T>(w) ? (cw & 3) : cw) * 16;
}
template <class T>
__device__ __forceinline__ int cta_rows(const CtaWork& w) {
  return key_split<T>(w) ? 64 : T::kBM;
}

// The ring positions a consumer warpgroup walks: first, first + stride, ... (warpgroup c of a
// key-split CTA: c, c + kConsumers, ...).
struct RingShare {
  int first, stride;
};

// After the main loop and finish_row_sums, in a key-split CTA: warpgroups c >= 1 leave O (in
// their merge slice, one float4 per thread and 8-column tile: conflict-free), m (in their rows'
// q_scale slots) and l (lse_shift slots; both read only before the main loop), and are done;
// warpgroup 0 waits for them and merges into its own O, m_run and l_run:
//   M = max_c m_c,  w_c = 2^(m_c − M),  O = Σ w_c·O_c,  l = Σ w_c·l_c
// (each O_c and l_c are relative to 2^(−m_c); an empty share has m_c = −inf, so w_c = 0; with
// every share empty M is taken as 0 for the weights, and the row stays empty).
// Returns whether this warpgroup writes the output.
template <class T, bool KBLOCK>
__device__ __forceinline__ bool merge_key_split(const Sm90Smem<T>& sm, int cwg, int warp, int lane,
                                                Sm90Softmax<T, KBLOCK>& sfx,
                                                float (&o)[T::kAccTiles][4]) {
  static_assert(!Sm90ExpTurns<T, KBLOCK>::kOn, "key-split warpgroups take no turns");
  constexpr int kBarrier = 2 * T::kConsumers + 1;  // after the Q barriers (1..) and the turns
  constexpr int kThreads = 128 * T::kConsumers;
  const int tid = threadIdx.x & 127;
  const int r = (warp & 3) * 16 + (lane >> 2);  // the thread's first row of the 64 (and r + 8)
  if (cwg > 0) {
    float4* slice = sm.merge_slice(cwg);
#pragma unroll
    for (int dn = 0; dn < T::kDTiles; ++dn)
      slice[dn * 128 + tid] = make_float4(o[dn][0], o[dn][1], o[dn][2], o[dn][3]);
    if ((lane & 3) == 0)
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        sm.q_scale[cwg * 64 + r + 8 * rh] = sfx.m_run[rh];
        sm.lse_shift[cwg * 64 + r + 8 * rh] = sfx.l_run[rh];
      }
    dev::named_bar_arrive(kBarrier, kThreads);
    return false;
  }
  dev::named_bar_sync(kBarrier, kThreads);
  float m_c[T::kConsumers][2], ref[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    float mx = sfx.m_run[rh];
    m_c[0][rh] = mx;
#pragma unroll
    for (int c = 1; c < T::kConsumers; ++c) {
      m_c[c][rh] = sm.q_scale[c * 64 + r + 8 * rh];
      mx = fmaxf(mx, m_c[c][rh]);
    }
    sfx.m_run[rh] = mx;
    ref[rh] = mx == -INFINITY ? 0.f : mx;
    const float w0 = dev::fast_exp2(m_c[0][rh] - ref[rh]);
    sfx.l_run[rh] *= w0;
#pragma unroll
    for (int dn = 0; dn < T::kDTiles; ++dn) {
      o[dn][2 * rh] *= w0;
      o[dn][2 * rh + 1] *= w0;
    }
  }
#pragma unroll
  for (int c = 1; c < T::kConsumers; ++c) {
    const float4* slice = sm.merge_slice(c);
    float w[2];
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      w[rh] = dev::fast_exp2(m_c[c][rh] - ref[rh]);
      sfx.l_run[rh] += w[rh] * sm.lse_shift[c * 64 + r + 8 * rh];
    }
#pragma unroll
    for (int dn = 0; dn < T::kDTiles; ++dn) {
      const float4 v = slice[dn * 128 + tid];
      o[dn][0] = fmaf(w[0], v.x, o[dn][0]);
      o[dn][1] = fmaf(w[0], v.y, o[dn][1]);
      o[dn][2] = fmaf(w[1], v.z, o[dn][2]);
      o[dn][3] = fmaf(w[1], v.w, o[dn][3]);
    }
  }
  return true;
}

}  // namespace int8attn
