// sm80 / sm86 / sm87: the warp-MMA attention kernel in EXACT and BALANCED. These GPUs have no
// FP8 tensor cores, so the core runs FAST as BALANCED on them (common/modes.h).
#include "cuda/common/attention_launchers.h"
#include "cuda/common/attention_mma_kernel.cuh"

namespace int8attn {

cudaError_t launch_attention_mma_sm80(const AttnKernelParams& p, int dpad, Mode mode,
                                      cudaStream_t s) {
  return launch_attention_mma_modes<80, Mode::kExact, Mode::kBalanced>(p, dpad, mode, s);
}

}  // namespace int8attn
