// The quantization maths of int8attn, in ONE place, shared by the CPU backend (src/cpu) and the
// CUDA kernels (cuda/). The CPU backend is the executable specification of what the GPU does:
// any change here changes both, and the GPU tests compare the two.
//
// Conventions (see also include/int8attn.h, int8attn_quantize):
//   K smoothing:   k' = k − μ_K,  μ_K[c] = mean over the valid tokens of the head (exact: softmax
//                  is invariant to adding q·μ_K to every score of a row).
//   channel balance (optional): q'[c] = q[c]/α_c, k'[c] = k[c]·α_c, α_c = sqrt(max|q_c|/max|k_c|).
//   INT8:          s = multiplier·absmax/127 (1 if that is not a normal positive float),
//                  x_q = clamp(rint(x · (1/s)), −127, 127)      (round half to even).
//   scores:        s_ij = sm_scale · s_q[i] · s_k[j] · (q_q[i] · k_q[j])   (exact int32 dot).
//   V (BALANCED):  ṽ = fp16((v − μ_V[c]) / σ_c), σ_c = max_j |v − μ_V[c]| · headroom / 16384.
//   V (FAST):      ṽ = e4m3((v − μ_V[c]) / σ_c), σ_c = max_j |v − μ_V[c]| · headroom / 448.
//   P (FAST):      p̃ = e4m3(448 · exp(s − m)) with m the running row max; the row sum l sums the
//                  same rounded p̃ so numerator and denominator stay consistent.
//   output:        o[c] = σ_c · (Σ_j p̃_j ṽ_jc) / l + μ_V[c].
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define I8A_HD __host__ __device__ __forceinline__
#else
#define I8A_HD inline
#endif

namespace int8attn {
namespace qm {

constexpr int kQuantBlock = 64;          // tokens per scale in INT8ATTN_GRANULARITY_PER_BLOCK
constexpr float kInt8Max = 127.0f;
constexpr float kFp8Max = 448.0f;        // largest finite E4M3 value
constexpr float kFp16VTarget = 16384.0f; // |ṽ| bound for fp16 V: 4x headroom under 65504
constexpr float kForwardHeadroom = 1.0f; // V range margin in forward (range is known exactly)
constexpr float kCacheHeadroom = 64.0f;  // V range margin in a cache (later appends may grow it)
constexpr float kMinScale = 1e-30f;      // below this a group is treated as all-zero
constexpr float kLog2e = 1.4426950408889634f;

// INT8 scale for a group whose largest magnitude is `absmax`.
I8A_HD float int8_scale(float absmax, float multiplier) {
  const float s = absmax * multiplier / kInt8Max;
  return (s > kMinScale && s < 3.0e38f) ? s : 1.0f;
}

// Symmetric INT8 quantization of x given 1/scale (computed once per group as 1.0f / scale).
I8A_HD int8_t quantize_int8(float x, float inv_scale) {
  float r = rintf(x * inv_scale);
  r = r > kInt8Max ? kInt8Max : r;
  r = r < -kInt8Max ? -kInt8Max : r;
  return static_cast<int8_t>(r);
}

// Channel-balancing factor α_c from the channel maxima of Q and K (1 when either is 0), clamped
// to [1/64, 64] so a dead channel cannot blow the other operand up.
I8A_HD float balance_factor(float q_absmax, float k_absmax) {
  if (!(q_absmax > kMinScale) || !(k_absmax > kMinScale)) return 1.0f;
  float a = sqrtf(q_absmax / k_absmax);
  a = a < 1.0f / 64.0f ? 1.0f / 64.0f : a;
  return a > 64.0f ? 64.0f : a;
}

// Per-channel V scale σ_c from the largest |v − μ| of the channel.
I8A_HD float v_scale(float absmax_centered, bool fp8, float headroom) {
  const float s = absmax_centered * headroom / (fp8 ? kFp8Max : kFp16VTarget);
  return (s > kMinScale && s < 3.0e38f) ? s : 1.0f;
}

// Host emulation of float -> E4M3 -> float with round-to-nearest-even and saturation to ±448,
// the conversion the GPU does with __NV_SATFINITE. (Device code uses the hardware conversion.)
inline float fp8_e4m3_round(float x) {
  if (std::isnan(x)) return x;
  const float a = std::fabs(x);
  float r;
  if (a >= kFp8Max) {
    r = kFp8Max;
  } else if (a < 0.015625f) {  // below the smallest normal 2^-6: subnormal step 2^-9
    r = std::rint(a * 512.0f) / 512.0f;
  } else {
    int e;
    std::frexp(a, &e);                        // a = f·2^e, f in [0.5, 1)
    const float step = std::ldexp(1.0f, e - 4);  // 3 mantissa bits: step 2^(e-1-3)
    r = std::rint(a / step) * step;
    if (r > kFp8Max) r = kFp8Max;
  }
  return std::signbit(x) ? -r : r;
}

}  // namespace qm
}  // namespace int8attn
