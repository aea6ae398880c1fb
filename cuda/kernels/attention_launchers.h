// Entry points of the per-architecture attention instantiations (cuda/smXX/*.cu, each compiled
// only for its own architecture). Which exist depends on INT8ATTN_CUDA_ARCHS: the build defines
// INT8ATTN_HAVE_SM80 / _SM89 / _SM90 for the compiled ones. `dpad` is the head dim rounded up
// to a multiple of 32; `bf16` selects the EXACT kernel's input type.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention_params.h"

namespace int8attn {

#define INT8ATTN_DECLARE_ARCH_LAUNCHERS(SM)                                                   \
  cudaError_t launch_attention_##SM##_exact(const AttnKernelParams& p, int dpad, bool bf16,   \
                                            cudaStream_t s);                                  \
  cudaError_t launch_attention_##SM##_balanced(const AttnKernelParams& p, int dpad,           \
                                               cudaStream_t s);                               \
  cudaError_t launch_attention_##SM##_fast(const AttnKernelParams& p, int dpad, cudaStream_t s);

INT8ATTN_DECLARE_ARCH_LAUNCHERS(sm80)
INT8ATTN_DECLARE_ARCH_LAUNCHERS(sm89)
INT8ATTN_DECLARE_ARCH_LAUNCHERS(sm90)
#undef INT8ATTN_DECLARE_ARCH_LAUNCHERS

// The warp-specialised sm90a kernel (BALANCED/FAST at the head dims of sm90_wgmma_head_dim, no
// block mask, per-token Q scales; see sm90_wgmma_eligible in host/forward_plan.h). `mode` is 2
// BALANCED or 3 FAST.
cudaError_t launch_attention_sm90_wgmma(const AttnKernelParams& p, int dpad, int mode,
                                        cudaStream_t s);

}  // namespace int8attn
