// Turns of the sm90a kernel's consumer warpgroups at their exponentials (named barriers, round
// robin): warpgroup c starts its exponentials only after warpgroup c−1 has started its own, so
// the warpgroups' softmax phases stay staggered instead of drifting into step. The two warps
// one scheduler holds then less often issue their bursts of special-function instructions at
// the same time. (ptxas moves the arrive ahead of the exponentials it follows in the source:
// nothing it reads depends on them. So a turn orders the starts of the bursts; it does not
// keep them apart. Forcing them apart, the arrive made to wait for every exponential, was
// 9-13% slower at head dim 128: each warp's whole softmax stream is the cost, not the overlap.)
//
// On with K scales per block at two consumers, where it measured faster; with three consumers
// (head dim 64) and with per-key scales it measured slower (docs/design/cuda.md).
#pragma once

#include "cuda/sm90/named_barrier.cuh"
#include "cuda/sm90/primitives.cuh"

namespace int8attn {

template <class T, bool KBLOCK>
struct Sm90ExpTurns {
  static constexpr bool kOn = KBLOCK && T::kConsumers == 2;
  // Warpgroup c waits at barrier kTurnBase + c (ids 1..kConsumers are the warpgroups' Q
  // barriers), where the warpgroup before it arrives: 128 + 128 threads.
  static constexpr int kTurnBase = 1 + T::kConsumers;
  static constexpr int kThreads = 256;
  int self, next;
  bool last_wg;
  bool last_tile = false;  // set by the caller before each tile

  __device__ __forceinline__ explicit Sm90ExpTurns(int cwg)
      : self(kTurnBase + cwg),
        next(kTurnBase + (cwg + 1) % T::kConsumers),
        last_wg(cwg == T::kConsumers - 1) {
    if (kOn && last_wg) dev::named_bar_arrive(kTurnBase, kThreads);  // warpgroup 0 goes first
  }
  __device__ __forceinline__ void wait(float (&s)[T::kCols][4]) {
    if constexpr (kOn) {
      dev::named_bar_sync(self, kThreads);
      dev::wgmma_fence_regs(s);  // the exponentials' inputs are defined after the wait
    }
  }
  __device__ __forceinline__ void pass(float (&s)[T::kCols][4]) {
    if constexpr (kOn) {
      dev::wgmma_fence_regs(s);
      // The last warpgroup's last turn hands on to nobody, so every barrier completes: each
      // tile of a CTA is walked by every consumer.
      if (!(last_wg && last_tile)) dev::named_bar_arrive(next, kThreads);
    }
  }
};

}  // namespace int8attn
