// FAST (INT8 Q·Kᵀ, FP8 E4M3 P·V) attention instantiations for sm_89.
#include "kernels/attention_kernel.cuh"
#include "kernels/attention_launchers.h"

namespace int8attn {
cudaError_t launch_attention_sm89_fast(const AttnKernelParams& p, int dpad, cudaStream_t s) {
  return launch_attention_dpad<89, kModeFast, false>(p, dpad, s);
}
}  // namespace int8attn
