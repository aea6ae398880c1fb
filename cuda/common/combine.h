// Host launcher of the split-KV merge kernel (combine.cu).
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "cuda/common/attention_params.h"

namespace int8attn {

// Merges the num_splits partial outputs and LSEs of `p` (part_o, part_lse: the split-KV
// attention kernel's) into p.o and p.lse. `early`: sm_90+, launch while the split kernel
// finishes (launch.cuh).
cudaError_t launch_combine(const AttnKernelParams& p, bool early, cudaStream_t stream);

}  // namespace int8attn
