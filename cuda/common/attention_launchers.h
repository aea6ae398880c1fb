// Entry points of the per-architecture attention kernels (cuda/smXX/*.cu, each compiled only for
// its own architecture; the build defines INT8ATTN_HAVE_SM80 / _SM89 / _SM90 for the compiled
// ones). Which one runs a call is decided in one place: cuda/host/kernel_dispatch.cu.
#pragma once

#include <cuda_runtime.h>

#include "common/modes.h"
#include "cuda/common/attention_params.h"

namespace int8attn {

// The warp-MMA kernel (attention_mma_kernel.cuh) at padded head dim `dpad` (MmaHeadDims) in
// `mode`; cudaErrorInvalidValue for a mode the architecture does not run (FAST on sm80).
cudaError_t launch_attention_mma_sm80(const AttnKernelParams& p, int dpad, Mode mode,
                                      cudaStream_t s);
cudaError_t launch_attention_mma_sm89(const AttnKernelParams& p, int dpad, Mode mode,
                                      cudaStream_t s);
cudaError_t launch_attention_mma_sm90(const AttnKernelParams& p, int dpad, Mode mode,
                                      cudaStream_t s);

// The warp-specialised sm90a kernel (sm90/attention_wgmma_kernel.cuh): BALANCED or FAST at the
// head dims of WgmmaHeadDims, no block mask, per-token Q scales.
cudaError_t launch_attention_sm90_wgmma(const AttnKernelParams& p, int dpad, Mode mode,
                                        cudaStream_t s);
// Whether that kernel runs key-split CTAs (AttnKernelParams::tail_m_tiles) at `dpad` in
// `mode` (its shared memory holds their merge; sm90/wgmma_key_split.cuh).
bool sm90_wgmma_key_split(int dpad, Mode mode);

}  // namespace int8attn
