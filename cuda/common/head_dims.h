// The padded head dims (multiples of 32) each attention kernel is compiled for, and the one
// mechanism that turns a runtime padded head dim into a compile-time constant. The planner asks
// `contains` (cuda/host), the launchers `dispatch`, so the two cannot disagree.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

namespace int8attn {

template <int... kDims>
struct HeadDims {
  static constexpr __host__ __device__ bool contains(int dpad) { return ((dpad == kDims) || ...); }
  // f(std::integral_constant<int, dpad>{}) for a listed dpad; cudaErrorInvalidValue otherwise.
  template <typename F>
  static cudaError_t dispatch(int dpad, F&& f) {
    cudaError_t err = cudaErrorInvalidValue;
    (void)((dpad == kDims ? (err = f(std::integral_constant<int, kDims>{}), true) : false) || ...);
    return err;
  }
};

// The warp-MMA kernel (attention_mma_kernel.cuh): every padded head dim up to 256.
using MmaHeadDims = HeadDims<32, 64, 96, 128, 160, 192, 224, 256>;
// The warp-specialised sm90a kernel (64-key tiles above 192, and in FAST above 128:
// sm90_block_n); head dims up to 32 run its 64 instance (forward_plan.cu), but against a
// cache, whose 32-wide layout the warp-MMA kernel reads.
using WgmmaHeadDims = HeadDims<64, 96, 128, 160, 192, 224, 256>;
// The few-keys kernel's warpgroup-MMA version (sm90/attention_short_keys_wgmma.cuh): up to 192;
// head dims 200-256 run its warp-MMA version.
using ShortKeysWgmmaHeadDims = HeadDims<64, 96, 128, 160, 192>;
// The small-problem cluster kernel (sm90/attention_small_kernel.cuh): up to 192, where one
// CTA's shared memory still holds the head's K and V; not below 160, where its calls (at most
// 256 keys) run EXACT on the few-keys kernel instead (exact_for_keys, src/common/modes.h).
using SmallHeadDims = HeadDims<160, 192>;

}  // namespace int8attn
