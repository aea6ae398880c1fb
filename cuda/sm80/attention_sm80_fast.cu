// sm80/sm86 have no FP8 tensor cores: FAST runs the BALANCED kernel there (documented in
// include/int8attn.h and docs/precision-modes.md).
#include "kernels/attention_launchers.h"

namespace int8attn {
cudaError_t launch_attention_sm80_fast(const AttnKernelParams& p, int dpad, cudaStream_t s) {
  return launch_attention_sm80_balanced(p, dpad, s);
}
}  // namespace int8attn
