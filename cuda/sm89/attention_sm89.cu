// sm89 (Ada): the warp-MMA attention kernel in every mode; FAST's P·V runs on the FP8 mma.sync.
#include "cuda/common/attention_launchers.h"
#include "cuda/common/attention_mma_kernel.cuh"

namespace int8attn {

cudaError_t launch_attention_mma_sm89(const AttnKernelParams& p, int dpad, Mode mode,
                                      cudaStream_t s) {
  return launch_attention_mma_modes<89, Mode::kExact, Mode::kBalanced, Mode::kFast>(p, dpad, mode,
                                                                                    s);
}

}  // namespace int8attn
