// INT8 quantization of 8-channel groups held by lanes: a group's absmax across lanes, the
// rotation of channels held one a lane, and eight floats rounded to INT8 and packed. Shared by
// the attention kernels' Q (and the small kernel's K) prologues and the K/V preparation, so
// every path rounds the same way.
#pragma once

#include <cstdint>

#include "common/quant_math.h"
#include "cuda/common/mma.cuh"

namespace int8attn {

// The maximum of a non-negative float over each group of kLanes consecutive lanes (a power of
// two). A whole warp is one REDUX on the bits (non-negative floats order as their bit patterns)
// instead of five dependent shuffle + max steps.
// The array form reduces kN independent values at once, each step's shuffles of all of them
// issued together, so their latencies overlap.
template <int kLanes, int kN>
__device__ __forceinline__ void lane_group_max_nonneg(float (&x)[kN]) {
  if constexpr (kLanes == 32) {
#pragma unroll
    for (int j = 0; j < kN; ++j)
      x[j] = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(x[j])));
  } else {
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1)
#pragma unroll
      for (int j = 0; j < kN; ++j)
        x[j] = dev::fmax_nan(x[j], __shfl_xor_sync(0xffffffffu, x[j], o));
  }
}
template <int kLanes>
__device__ __forceinline__ float lane_group_max_nonneg(float x) {
  float a[1] = {x};
  lane_group_max_nonneg<kLanes, 1>(a);
  return a[0];
}

// The largest |x_i| of eight floats, as a tree (three dependent steps, not seven); NaN if any
// is NaN.
__device__ __forceinline__ float absmax8(const float (&x)[8]) {
  using dev::fmax_nan;
  const float a = fmax_nan(fmax_nan(fabsf(x[0]), fabsf(x[1])), fmax_nan(fabsf(x[2]), fabsf(x[3])));
  const float b = fmax_nan(fmax_nan(fabsf(x[4]), fabsf(x[5])), fmax_nan(fabsf(x[6]), fabsf(x[7])));
  return fmax_nan(a, b);
}

// qm::rotate8 (INT8 Q and K's rotation) with one channel a lane, the 8 channels of a group
// in lanes that differ in their low three bits (channel = lane mod 8): the same stages and
// operand order, so it rounds as qm::rotate8 does. Every lane of the warp calls it.
__device__ __forceinline__ float rotate8_lanes(float x, int lane) {
#pragma unroll
  for (int h = 1; h < qm::kRotateGroup; h *= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, x, h);
    x = (lane & h) ? other - x : x + other;
  }
  return x;
}

// Eight floats times 1/scale as INT8 (round-to-nearest-even and the ±127 clamp, as
// qm::quantize_int8, but with the product and the rounding fused into one FMA), packed in two
// words. x·inv + 1.5·2^23 (one FMA) puts the rounded integer in the low
// mantissa bits, the clamp works on that form and PRMTs gather the low bytes: three FP
// instructions and under one PRMT an element, none on the conversion pipe.
// kClamp false: for a group scaled by qm::int8_scale(absmax, m) with 1 <= m <= 64 and every
// |x| <= absmax, |x·inv| <= (127 / m)·(1 + 2^-22), which rounds to at most 127: the clamp is a
// no-op there and two of the three FP instructions an element go (int8_clamp_needed).
template <bool kClamp = true>
__device__ __forceinline__ uint2 quantize8_int8(const float (&x)[8], float inv) {
  constexpr float kMagic = 12582912.0f;  // 1.5·2^23
  uint32_t b[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float t = fmaf(x[i], inv, kMagic);
    b[i] =
        __float_as_uint(kClamp ? fminf(fmaxf(t, kMagic - qm::kInt8Max), kMagic + qm::kInt8Max) : t);
  }
  const uint32_t lo =
      __byte_perm(__byte_perm(b[0], b[1], 0x0040), __byte_perm(b[2], b[3], 0x0040), 0x5410);
  const uint32_t hi =
      __byte_perm(__byte_perm(b[4], b[5], 0x0040), __byte_perm(b[6], b[7], 0x0040), 0x5410);
  return make_uint2(lo, hi);
}

// Whether quantize8_int8 must clamp for groups scaled by qm::int8_scale(absmax, m): a
// multiplier below 1 (a timestep policy that clips) scales values past ±127, and above 64 the
// scale's overflow guard (scale 1) can be taken for a finite absmax. NaN clamps.
__device__ __forceinline__ bool int8_clamp_needed(float m) { return !(m >= 1.f && m <= 64.f); }

}  // namespace int8attn
