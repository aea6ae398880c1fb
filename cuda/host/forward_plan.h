// How one forward call maps onto kernels: canonical K/V buffers, row packing, split-KV, and
// the workspace they need. One function computes it, both for int8attn_forward_workspace_size
// (no workspace yet: sizes only) and for the launch itself, so the two cannot disagree.
#pragma once

#include <cstdint>

#include "common/modes.h"
#include "common/problem.h"
#include "cuda/common/attention_params.h"
#include "cuda/common/attention_short_keys.h"
#include "cuda/sm90/attention_short_keys_wgmma.h"
#include "cuda/sm90/attention_small.h"
#include "cuda/common/prepare_kv.h"

namespace int8attn {

struct DeviceInfo {
  int id = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 1;
  int smem_per_block = 48 * 1024;  // opt-in maximum of dynamic shared memory per block
  int smem_per_sm = 48 * 1024;
  // Thread-block clusters of n one-CTA-per-SM CTAs that fit on the device at once
  // (small_clusters[n], n <= kSmallMaxCluster; 0 when not measured): clusters live within one
  // GPC, so an H100's 132 SMs hold 15 clusters of 8 (120 CTAs), not 16.
  int small_clusters[kSmallMaxCluster + 1] = {};
};

struct ForwardPlan {
  int dpad = 0;
  Mode mode = Mode::kBalanced;  // the problem's (the core already applied the device's FP8 rule)
  bool sm90_wgmma = false;      // the warp-specialised sm90a kernel runs (else the warp-MMA kernel)
  // Small problems on Hopper: the one-launch cluster kernel (attention_small.h) does it all,
  // from the raw K/V; no preparation launches, no workspace. `attn` and `prep` are then unused.
  bool small = false;
  SmallAttnParams small_params;
  // Few keys (EXACT, at most kExactMaxKeys): the one-launch kernel of attention_short_keys.h,
  // from the raw K/V; no preparation, no workspace.
  bool short_keys = false;
  ShortKeysParams short_params;
  AttnKernelParams attn;
  KvPrepParams prep;  // unused for a cache forward
  bool run_prep = false;
  size_t workspace_bytes = 0;
};

// Fill a plan. `workspace` may be null (sizing only). For a cache forward, `cache_params`
// supplies the canonical buffers (see kv_cache_cuda.h).
ForwardPlan plan_forward(const AttnProblem& p, const DeviceInfo& dev, void* workspace,
                         const AttnKernelParams* cache_params);

// Whether the small-problem cluster kernel takes this call, and its parameters (see
// attention_small.h): Hopper, BALANCED/FAST, fresh K/V (no cache, no broadcast), fp16/bf16 with
// 16-byte aligned rows (Q, K, V and O), per-token Q scales, no block mask, at most 8·64 query
// rows per kv-head and kSmallMaxKeys keys, the whole head's K/V in one CTA's shared memory, and
// a grid of at most two waves.
bool plan_small(ForwardPlan& plan, const AttnProblem& p, const DeviceInfo& dev);

// Whether the few-keys kernel takes this call, and its parameters and grid (see
// attention_short_keys.h): EXACT (which every call with at most kExactMaxKeys keys on fresh K/V
// runs), fp16/bf16 with 16-byte aligned Q rows, K and V with contiguous channels and 16-byte
// aligned rows (broadcast allowed), no block mask, the CTA's shared memory within the device's.
bool plan_short_keys(ForwardPlan& plan, const AttnProblem& p, const DeviceInfo& dev);

}  // namespace int8attn
