// BALANCED (INT8 Q·Kᵀ, fp16 P·V) attention instantiations for sm_80.
#include "kernels/attention_kernel.cuh"
#include "kernels/attention_launchers.h"

namespace int8attn {
cudaError_t launch_attention_sm80_balanced(const AttnKernelParams& p, int dpad, cudaStream_t s) {
  return launch_attention_dpad<80, kModeBalanced, false>(p, dpad, s);
}
}  // namespace int8attn
