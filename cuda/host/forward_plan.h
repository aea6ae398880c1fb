// How one forward call maps onto kernels: canonical K/V buffers, row packing, split-KV, and
// the workspace they need. One function computes it, both for int8attn_forward_workspace_size
// (no workspace yet: sizes only) and for the launch itself, so the two cannot disagree.
#pragma once

#include <cstdint>

#include "core/problem.h"
#include "kernels/attention_params.h"
#include "kernels/attention_small.h"
#include "kernels/prepare_kv.h"

namespace int8attn {

struct DeviceInfo {
  int id = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 1;
  // Thread-block clusters of n one-CTA-per-SM CTAs that fit on the device at once
  // (small_clusters[n], n <= kSmallMaxCluster; 0 when not measured): clusters live within one
  // GPC, so an H100's 132 SMs hold 15 clusters of 8 (120 CTAs), not 16.
  int small_clusters[kSmallMaxCluster + 1] = {};
};

struct ForwardPlan {
  int dpad = 0;
  int kernel_mode = 0;  // 1 EXACT, 2 BALANCED, 3 FAST (after the sm80 FAST -> BALANCED rule)
  bool bf16 = false;
  bool sm90_wgmma = false;  // the warp-specialised sm90a kernel runs (else attention_kernel.cuh)
  // Small problems on Hopper: the one-launch cluster kernel (attention_small.h) does it all,
  // from the raw K/V; no preparation launches, no workspace. `attn` and `prep` are then unused.
  bool small = false;
  SmallAttnParams small_params;
  AttnKernelParams attn;
  KvPrepParams prep;     // unused for a cache forward
  bool run_prep = false;
  size_t workspace_bytes = 0;
};

// Fill a plan. `workspace` may be null (sizing only). For a cache forward, `cache_params`
// supplies the canonical buffers (see kv_cache_cuda.h).
ForwardPlan plan_forward(const AttnProblem& p, const DeviceInfo& dev, void* workspace,
                         const AttnKernelParams* cache_params);

// Whether the sm90a wgmma kernel can run this problem on this device (compiled in; Hopper;
// BALANCED/FAST; a padded head dim of sm90_wgmma_head_dim; no block mask; per-token Q scales).
// Decode-sized problems (<= 16 rows per kv-head) still go to the 1-warp kernel.
bool sm90_wgmma_eligible(const ForwardPlan& plan, const AttnProblem& p, const DeviceInfo& dev);

// Whether the small-problem cluster kernel takes this call, and its parameters (see
// attention_small.h): Hopper, BALANCED/FAST, fresh K/V (no cache, no broadcast), fp16/bf16 with
// 16-byte aligned rows (Q, K, V and O), per-token Q scales, no block mask, at most 8·64 query
// rows per kv-head and kSmallMaxKeys keys, the whole head's K/V in one CTA's shared memory, and
// a grid of at most two waves.
bool plan_small(ForwardPlan& plan, const AttnProblem& p, const DeviceInfo& dev);

// Kernel mode the device runs for an API mode (FAST needs FP8 tensor cores: sm89+).
int kernel_mode_for(int api_mode, const DeviceInfo& dev);

}  // namespace int8attn
