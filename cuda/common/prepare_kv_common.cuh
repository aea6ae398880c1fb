// Device pieces shared by the K/V preparation kernels (prepare_kv.cu, prepare_kv_kernels.cu and
// the bodies in prepare_kv_bodies.cuh): the statistics' layout, a thread's running statistics,
// the valid keys of a batch, and the finalize of a channel.
#pragma once

#include <cstdint>

#include "common/quant_math.h"
#include "cuda/common/prepare_kv.h"

namespace int8attn {
namespace prep {

// Statistics per canonical head and channel, in this order (rows of a CTA's shared-memory
// statistics, [kStats + 1][dpad]; the extra row is max |q| for channel balancing).
enum Stat { kSumK = 0, kMaxK, kMinK, kSumV, kMaxV, kMinV, kStats };

__device__ __forceinline__ bool stat_is_max(int s) { return s == kMaxK || s == kMaxV; }
__device__ __forceinline__ bool stat_is_min(int s) { return s == kMinK || s == kMinV; }
// The identity a statistic starts from: sums and max |q| (row kStats) 0.
__device__ __forceinline__ float stat_identity(int s) {
  return stat_is_max(s) ? -INFINITY : (stat_is_min(s) ? INFINITY : 0.f);
}

// The rows of a head's accumulators in the scratch: the statistics that atomics combine
// exactly in any order (the sums go through range_sums, added in a fixed order). The head's
// counter of finished statistics CTAs follows them.
enum AccRow { kAccMaxK = 0, kAccMinK, kAccMaxV, kAccMinV, kAccQAbsmax, kAccRows };
static_assert(kAccRows == kv_stats_acc_rows, "kv_stats_head_floats counts the rows");
// The statistic (Stat, or kStats for max |q|) that accumulator row r holds.
__device__ __forceinline__ int acc_stat(int r) {
  return r == kAccMaxK
             ? kMaxK
             : (r == kAccMinK ? kMinK : (r == kAccMaxV ? kMaxV : (r == kAccMinV ? kMinV : kStats)));
}
// The identity of accumulator row r (from row kAccRows on: the counter, 0).
__device__ __forceinline__ float acc_identity(int r) {
  return r < kAccQAbsmax ? stat_identity(acc_stat(r)) : 0.f;
}

// The scratch of canonical head `head` (kv_stats_head_floats): kAccRows rows of stats_stride
// accumulators, then the counter of the head's statistics CTAs that have finished.
__device__ __forceinline__ float* stats_acc(const KvPrepParams& p, int head) {
  return p.partials + static_cast<int64_t>(head) * kv_stats_head_floats(p.stats_stride);
}
__device__ __forceinline__ unsigned* stats_counter(const KvPrepParams& p, int head) {
  return reinterpret_cast<unsigned*>(stats_acc(p, head) + kAccRows * p.stats_stride);
}
// Token range `range`'s sums of canonical head `head`: K's [dpad], then V's [dpad].
__device__ __forceinline__ float* range_sums(const KvPrepParams& p, int head, int range) {
  return p.range_sums + (static_cast<int64_t>(head) * p.stats_ranges + range) * 2 * p.dpad;
}

// One thread's running sum, maximum and minimum of 8 channels of one operand.
struct Stats8 {
  float sum[8], mx[8], mn[8];
  __device__ __forceinline__ Stats8() {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      sum[i] = 0.f;
      mx[i] = -INFINITY;
      mn[i] = INFINITY;
    }
  }
  // Channel i takes value x; `count` false: a repeated row (its maximum and minimum change
  // nothing) that must not enter the sum.
  __device__ __forceinline__ void add(int i, float x, bool count) {
    sum[i] += count ? x : 0.f;
    mx[i] = fmaxf(mx[i], x);
    mn[i] = fminf(mn[i], x);
  }
};

// Keys of canonical batch b that take part (per-batch valid lengths, clamped to [0, n]).
__device__ __forceinline__ int valid_tokens(const KvPrepParams& p, int b) {
  if (p.k_lengths == nullptr) return p.n;
  const int v = p.k_lengths[b * p.k_lengths_stride];
  return v < 0 ? 0 : (v > p.n ? p.n : v);
}

// Channel d's constants from its statistics over `valid` keys (`stat(s)` reads statistic s,
// `q_absmax` the channel's max |q|), by qm::channel_consts (the maths the CPU backend uses too),
// written to p's outputs.
template <typename StatFn>
__device__ __forceinline__ void finalize_channel(const KvPrepParams& p, int head, int d, int valid,
                                                 StatFn stat, float q_absmax) {
  qm::ChannelStats st;
  st.valid = d < p.D ? valid : 0;  // padding channels: no keys, identity constants
  if (st.valid > 0) {
    st.k_rows = static_cast<int>(qm::stats_sampled_rows(valid, qm::stats_stride(p.n)));
    st.sum_k = stat(kSumK);
    st.max_k = stat(kMaxK);
    st.min_k = stat(kMinK);
    st.sum_v = stat(kSumV);
    st.max_v = stat(kMaxV);
    st.min_v = stat(kMinV);
    st.q_absmax = q_absmax;
  }
  const qm::ChannelConsts c = qm::channel_consts(st, p.smooth_k, p.smooth_v, fp8_pv(p.mode),
                                                 p.v_headroom, p.alpha != nullptr);
  const int64_t o = static_cast<int64_t>(head) * p.dpad + d;
  if (p.k_mean != nullptr) p.k_mean[o] = c.mu_k;
  if (int8_qk(p.mode)) {
    p.v_mean[o] = p.v_raw ? 0.f : c.mu_v;
    p.v_scale[o] = p.v_raw ? 1.f : c.v_scale;
  }
  if (p.alpha != nullptr) {
    p.alpha[o] = c.alpha;
    p.q_factor[o] = qm::q_channel_factor(c.alpha);
  }
}

}  // namespace prep
}  // namespace int8attn
