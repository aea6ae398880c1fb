// EXACT (fp16/bf16 Q·Kᵀ and P·V) attention instantiations for sm_90a.
#include "kernels/attention_kernel.cuh"
#include "kernels/attention_launchers.h"

namespace int8attn {
cudaError_t launch_attention_sm90_exact(const AttnKernelParams& p, int dpad, bool bf16,
                                        cudaStream_t s) {
  return bf16 ? launch_attention_dpad<90, kModeExact, true>(p, dpad, s)
              : launch_attention_dpad<90, kModeExact, false>(p, dpad, s);
}
}  // namespace int8attn
