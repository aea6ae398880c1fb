// sm90a: the warp-MMA attention kernel in every mode, for what the warp-specialised kernel
// (attention_sm90_wgmma.cu) does not take: EXACT, block masks, per-block Q scales, head dims
// 32, 224 and 256, and decode (cuda/host/kernel_dispatch.cu decides).
#include "cuda/common/attention_launchers.h"
#include "cuda/common/attention_mma_kernel.cuh"

namespace int8attn {

cudaError_t launch_attention_mma_sm90(const AttnKernelParams& p, int dpad, Mode mode,
                                      cudaStream_t s) {
  return launch_attention_mma_modes<90, Mode::kExact, Mode::kBalanced, Mode::kFast>(p, dpad, mode,
                                                                                    s);
}

}  // namespace int8attn
