// Which attention kernel runs a call: architecture × mode × padded head dim, in one place.
//
//   device   EXACT          BALANCED                         FAST
//   sm80/86  few | mma<80>  mma<80>                          (runs as BALANCED: no FP8 MMA)
//   sm89     few | mma<89>  mma<89>                          mma<89>
//   sm90     few | mma<90>  small | wgmma | mma<90>          small | wgmma | mma<90>
//
// few: the few-keys kernel for EXACT calls of at most 128 keys on fresh K/V, which every mode's
// such calls are (src/common/modes.h), where plan_short_keys in forward_plan.cu says it fits:
// on sm90 its warpgroup-MMA version (sm90/attention_short_keys_wgmma.h,
// ShortKeysWgmmaHeadDims), else the warp-MMA one (attention_short_keys.h, every architecture);
// it launches from cuda_backend.cu, like small.
// mma<ARCH>: the warp-MMA kernel, head dims MmaHeadDims (cuda/common/head_dims.h), every
// option. On sm90, BALANCED and FAST take, in this order: the small-problem cluster kernel
// (SmallHeadDims; plan_small in forward_plan.cu says when the whole call fits it), else the
// warp-specialised wgmma kernel (WgmmaHeadDims, no block mask, per-token Q scales, more than 16
// query rows per kv-head), else mma<90>. An sm89 device runs mma<80> where only sm80 kernels
// were compiled, and then has no FP8 kernel.
#pragma once

#include <cuda_runtime.h>

#include "common/modes.h"
#include "common/problem.h"
#include "cuda/host/forward_plan.h"

namespace int8attn {

// Whether the device has FP8 tensor cores and this build has kernels using them.
bool device_runs_fp8(const DeviceInfo& dev);

// Whether the wgmma kernel can run this problem (see the table above), before the row count.
bool sm90_wgmma_eligible(Mode mode, int dpad, const AttnProblem& p, const DeviceInfo& dev);

// Launch the attention kernel the plan chose (not the small kernel, not the preparation).
cudaError_t launch_attention(const ForwardPlan& plan, const DeviceInfo& dev, cudaStream_t s);

// Compiled architectures, e.g. "sm80 sm90a" (for messages).
const char* compiled_architectures();
// Whether this build has kernels for the device.
bool device_has_kernels(const DeviceInfo& dev);

}  // namespace int8attn
