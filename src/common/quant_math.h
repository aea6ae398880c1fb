// The quantization maths of int8attn, in ONE place, shared by the CPU backend (src/cpu) and the
// CUDA kernels (cuda/). The CPU backend is the executable specification of what the GPU does:
// any change here changes both, and the GPU tests compare the two.
//
// Conventions (see also include/int8attn.h, int8attn_quantize):
//   K smoothing:   k' = k − μ_K,  μ_K[c] = mean over a sample of the head's valid tokens (exact:
//                  softmax is invariant to adding q·μ_K to every score of a row; stats_stride).
//   channel balance (optional): q'[c] = q[c]/α_c, k'[c] = k[c]·α_c, α_c = sqrt(max|q_c|/max|k_c|)
//                  (maxima over the same samples of Q and K).
//   rotation:      before INT8, Q and K (smoothed, balanced) are rotated by the same orthonormal
//                  8-point Walsh–Hadamard transform of each group of 8 channels (rotate8):
//                  q·k is unchanged, and an outlier channel's range is spread over its group
//                  before the INT8 scales are taken (forward and K/V caches alike).
//   INT8:          s = multiplier·absmax/127 (1 if that is not a normal positive float),
//                  x_q = clamp(rint(x · (1/s)), −127, 127)      (round half to even).
//   scores:        s_ij = sm_scale · s_q[i] · s_k[j] · (q_q[i] · k_q[j])   (exact int32 dot).
//   V (BALANCED):  ṽ = fp16((v − μ_V[c]) / σ_c), σ_c = max_j |v − μ_V[c]| · headroom / 16384.
//   V (FAST):      ṽ = e4m3((v − μ_V[c]) / σ_c), σ_c = max_j |v − μ_V[c]| · headroom / 448.
//   P (FAST):      p̃ = e4m3(448 · exp(s − m)) with m the running row max; the row sum l sums the
//                  same rounded p̃ so numerator and denominator stay consistent. (The sm90a
//                  kernel lets m lag the row max by up to 1 in log2 units and scales by 224.)
//   output:        o[c] = σ_c · (Σ_j p̃_j ṽ_jc) / l + μ_V[c].
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "int8attn.h"

#if defined(__CUDACC__)
#define I8A_HD __host__ __device__ __forceinline__
#else
#define I8A_HD inline
#endif

namespace int8attn {
namespace qm {

constexpr int kQuantBlock = INT8ATTN_QUANT_BLOCK;  // tokens per scale, GRANULARITY_PER_BLOCK
constexpr float kInt8Max = 127.0f;
constexpr float kFp8Max = 448.0f;         // largest finite E4M3 value
constexpr float kFp16VTarget = 16384.0f;  // |ṽ| bound for fp16 V: 4x headroom under 65504
constexpr float kForwardHeadroom = 1.0f;  // V range margin in forward (range is known exactly)
constexpr float kCacheHeadroom = 64.0f;   // V range margin in a cache (later appends may grow it)
constexpr float kMinScale = 1e-30f;       // below this a group is treated as all-zero
constexpr float kLog2e = 1.4426950408889634f;

// Non-finite inputs: a group's absmax is NaN or inf when one of its values is (reductions use
// absmax_nan, or compare float bits, where NaN orders above inf), its scale is then NaN, every
// score that uses the group is NaN and so is the softmax row, as in fp16 attention. The INT8
// values of such a group are 0: defined, and carried by the NaN scale.

// max(acc, |x|) that keeps a NaN: once either is NaN, the result is NaN.
I8A_HD float absmax_nan(float acc, float x) {
  const float a = fabsf(x);
  return (a > acc || a != a) ? a : acc;
}

// INT8 scale for a group whose largest magnitude is `absmax` (NaN for NaN or inf: see above).
I8A_HD float int8_scale(float absmax, float multiplier) {
  const float s = absmax * multiplier / kInt8Max;
  if (!(s <= 3.0e38f)) return s - s;  // NaN stays NaN, inf - inf is NaN
  return s > kMinScale ? s : 1.0f;
}

// Symmetric INT8 quantization of x given 1/scale (computed once per group as 1.0f / scale);
// 0 for a NaN product (a NaN group scale carries it).
I8A_HD int8_t quantize_int8(float x, float inv_scale) {
  float r = rintf(x * inv_scale);
  r = r > kInt8Max ? kInt8Max : r;
  r = r < -kInt8Max ? -kInt8Max : r;
  return r == r ? static_cast<int8_t>(r) : int8_t(0);
}

// Channel-balancing factor α_c from the channel maxima of Q and K (1 when either is 0), clamped
// to [1/64, 64] so a dead channel cannot blow the other operand up.
I8A_HD float balance_factor(float q_absmax, float k_absmax) {
  if (!(q_absmax > kMinScale) || !(k_absmax > kMinScale)) return 1.0f;
  float a = sqrtf(q_absmax / k_absmax);
  a = a < 1.0f / 64.0f ? 1.0f / 64.0f : a;
  return a > 64.0f ? 64.0f : a;
}

// The rotation of INT8 Q and K (see the conventions above). rotate8 is the unnormalised
// transform (entries ±1: three butterfly stages, pairs 1, 2 and 4 apart); its factor 1/√8 is
// folded into the per-channel factors applied before it, so the rotation costs no multiply:
// Q is multiplied by q_channel_factor(α), K by k_channel_factor(α) (α = 1 without balancing).
// Lane-parallel versions on the GPU (one channel a lane) keep the stage order and each pair's
// operand order (lower channel + upper, lower − upper), so that every backend rounds alike.
constexpr int kRotateGroup = 8;
constexpr float kRotateNorm = 0.35355339059327373f;  // 1/√8
I8A_HD void butterfly(float& lo, float& hi) {
  const float sum = lo + hi;
  hi = lo - hi;
  lo = sum;
}
I8A_HD void rotate8(float (&x)[kRotateGroup]) {
  butterfly(x[0], x[1]);
  butterfly(x[2], x[3]);
  butterfly(x[4], x[5]);
  butterfly(x[6], x[7]);
  butterfly(x[0], x[2]);
  butterfly(x[1], x[3]);
  butterfly(x[4], x[6]);
  butterfly(x[5], x[7]);
  butterfly(x[0], x[4]);
  butterfly(x[1], x[5]);
  butterfly(x[2], x[6]);
  butterfly(x[3], x[7]);
}
// Every group of a row of d channels (d % 8 == 0, as every head dim is).
I8A_HD void rotate_groups(float* row, int64_t d) {
  for (int64_t c = 0; c + kRotateGroup <= d; c += kRotateGroup)
    rotate8(*reinterpret_cast<float(*)[kRotateGroup]>(row + c));
}
I8A_HD float q_channel_factor(float alpha) { return kRotateNorm / alpha; }
I8A_HD float k_channel_factor(float alpha) { return alpha * kRotateNorm; }

// Per-channel V scale σ_c from the largest |v − μ| of the channel.
I8A_HD float v_scale(float absmax_centered, bool fp8, float headroom) {
  const float s = absmax_centered * headroom / (fp8 ? kFp8Max : kFp16VTarget);
  return (s > kMinScale && s < 3.0e38f) ? s : 1.0f;
}

// Statistics from a sample of rows. K's mean and the channel maxima of K and Q only place the
// quantization grid: any per-channel shift of K is exact inside the softmax and any balancing
// factor is exact in q·k, so a sample changes the rounding, not the maths. They are taken over
// every stride-th chunk of kStatsChunk rows (chunks 0, stride, 2·stride, ...), at least 8 chunks
// where there are that many. V's range is what its FP8/fp16 encoding saturates on: V's
// statistics, like the per-block and per-token scales, use every row.
constexpr int kStatsChunk = 64;
constexpr int kStatsMaxStride = 8;

// The sampling stride for an operand of `rows` rows (the same for every batch of a call).
I8A_HD int stats_stride(int64_t rows) {
  const int64_t s = (rows + kStatsChunk - 1) / kStatsChunk / 8;
  return s < 1 ? 1 : (s > kStatsMaxStride ? kStatsMaxStride : static_cast<int>(s));
}

// Whether row `row` is in the sample.
I8A_HD bool stats_row_sampled(int64_t row, int stride) { return (row / kStatsChunk) % stride == 0; }

// How many of rows [0, n) are in the sample.
I8A_HD int64_t stats_sampled_rows(int64_t n, int stride) {
  if (n <= 0) return 0;
  const int64_t chunks = (n + kStatsChunk - 1) / kStatsChunk;
  const int64_t last = (chunks - 1) / stride * stride;  // the last sampled chunk
  const int64_t tail = n - last * kStatsChunk;
  return last / stride * kStatsChunk + (tail < kStatsChunk ? tail : kStatsChunk);
}

// One channel of one head's K/V statistics: V's over its `valid` keys, K's over the `k_rows`
// of them in the sample (stats_sampled_rows).
struct ChannelStats {
  float sum_k = 0.0f, max_k = 0.0f, min_k = 0.0f;
  float sum_v = 0.0f, max_v = 0.0f, min_v = 0.0f;
  float q_absmax = 0.0f;  // max |q| of the channel over the queries that use the head (balancing)
  int valid = 0;
  int k_rows = 0;
};

// The per-channel constants of K/V preparation, computed from the statistics by the CPU backend,
// the GPU's preparation kernels and the K/V caches alike: the K and V means (0 unless smoothing),
// the V scale σ (range around the mean), and the balancing factor α (1 unless balancing).
struct ChannelConsts {
  float mu_k = 0.0f, mu_v = 0.0f, v_scale = 1.0f, alpha = 1.0f;
};
I8A_HD ChannelConsts channel_consts(const ChannelStats& s, bool smooth_k, bool smooth_v, bool fp8,
                                    float headroom, bool balance) {
  ChannelConsts c;
  if (s.valid <= 0) {
    c.v_scale = v_scale(0.0f, fp8, headroom);
    return c;
  }
  c.mu_k = smooth_k && s.k_rows > 0 ? s.sum_k / static_cast<float>(s.k_rows) : 0.0f;
  c.mu_v = smooth_v ? s.sum_v / static_cast<float>(s.valid) : 0.0f;
  const float vabs = fmaxf(s.max_v - c.mu_v, c.mu_v - s.min_v);
  c.v_scale = v_scale(vabs, fp8, headroom);
  if (balance) c.alpha = balance_factor(s.q_absmax, fmaxf(s.max_k - c.mu_k, c.mu_k - s.min_k));
  return c;
}

// fp16 output: a finite value past fp16's range (a rounding step above |V|'s bound of 65504)
// becomes ±65504 instead of overflowing to ±inf; NaN and ±inf pass through.
I8A_HD float saturate_f16(float x) {
  const float a = fabsf(x);
  return (a > 65504.0f && a <= 3.4028235e38f) ? copysignf(65504.0f, x) : x;
}

// Host emulation of float -> E4M3 -> float with round-to-nearest-even and saturation to ±448,
// the conversion the GPU does with __NV_SATFINITE (device code uses the hardware conversion).
// Normal range: the float's mantissa rounded to 3 bits in its bit pattern; below the smallest
// normal (2^-6), steps of 2^-9. The CPU backend's FAST path calls it for every P and V value.
inline float fp8_e4m3_round(float x) {
  if (std::isnan(x)) return x;
  const float a = std::fabs(x);
  float r;
  if (a >= kFp8Max) {
    r = kFp8Max;
  } else if (a < 0.015625f) {
    r = std::nearbyint(a * 512.0f) * (1.0f / 512.0f);
  } else {
    uint32_t u;
    std::memcpy(&u, &a, sizeof u);
    u = (u + 0x7ffffu + ((u >> 20) & 1u)) & 0xfff00000u;
    std::memcpy(&r, &u, sizeof r);
    if (r > kFp8Max) r = kFp8Max;
  }
  return std::signbit(x) ? -r : r;
}

}  // namespace qm
}  // namespace int8attn
