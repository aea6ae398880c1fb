// Device pieces shared by the K/V preparation kernels (prepare_kv.cu: any strides;
// prepare_kv_vec.cu(h): the 16-byte path).
#pragma once

#include <cstdint>

#include "common/quant_math.h"
#include "kernels/prepare_kv.h"

namespace int8attn {
namespace prep {

// Statistics per canonical head and channel, in this order ([head][kStats + 1][dpad] in the
// scratch accumulators; the extra row is max |q| for channel balancing).
enum Stat { kSumK = 0, kMaxK, kMinK, kSumV, kMaxV, kMinV, kStats };

__device__ __forceinline__ bool stat_is_max(int s) { return s == kMaxK || s == kMaxV; }
__device__ __forceinline__ bool stat_is_min(int s) { return s == kMinK || s == kMinV; }
// The identity each accumulator starts from.
__device__ __forceinline__ float stat_identity(int s) {
  return stat_is_max(s) ? -INFINITY : (stat_is_min(s) ? INFINITY : 0.f);
}

// Keys of canonical batch b that take part (per-batch valid lengths, clamped to [0, n]).
__device__ __forceinline__ int valid_tokens(const KvPrepParams& p, int b) {
  if (p.k_lengths == nullptr) return p.n;
  const int v = p.k_lengths[b * p.k_lengths_stride];
  return v < 0 ? 0 : (v > p.n ? p.n : v);
}

// Channel d's constants from its statistics (`stat(s)` reads statistic s, `q_absmax` the
// channel's max |q|): the means, V scale and balancing factor, written to p's outputs when
// `write_out` and returned for a caller that quantizes right away. Same maths as the CPU backend.
struct ChannelConsts {
  float mu_k = 0.f, alpha = 1.f, mu_v = 0.f, v_scale = 1.f;
};
template <typename StatFn>
__device__ __forceinline__ ChannelConsts finalize_channel(const KvPrepParams& p, int head, int d,
                                                          int valid, StatFn stat,
                                                          float q_absmax, bool write_out) {
  ChannelConsts c;
  const bool any = valid > 0 && d < p.D;
  c.mu_k = (any && p.smooth_k) ? stat(kSumK) / static_cast<float>(valid) : 0.f;
  c.mu_v = (any && p.smooth_v) ? stat(kSumV) / static_cast<float>(valid) : 0.f;
  const int64_t o = static_cast<int64_t>(head) * p.dpad + d;
  if (write_out && p.k_mean != nullptr) p.k_mean[o] = c.mu_k;
  if (p.mode != 1) {
    if (write_out) p.v_mean[o] = c.mu_v;
    const float vabs = any ? fmaxf(stat(kMaxV) - c.mu_v, c.mu_v - stat(kMinV)) : 0.f;
    c.v_scale = qm::v_scale(vabs, p.mode == 3, p.v_headroom);
    if (write_out) p.v_scale[o] = c.v_scale;
  }
  if (p.alpha != nullptr) {
    const float kabs = any ? fmaxf(stat(kMaxK) - c.mu_k, c.mu_k - stat(kMinK)) : 0.f;
    c.alpha = qm::balance_factor(d < p.D ? q_absmax : 0.f, kabs);
    if (write_out) p.alpha[o] = c.alpha;
  }
  return c;
}

}  // namespace prep
}  // namespace int8attn
