// Kernel launches of one forward. The first kernel of a forward launches the ordinary way (it
// follows the caller's work); on sm_90 and later every later one launches early (programmatic
// dependent launch): its CTAs are scheduled while the previous kernel finishes, hiding the launch
// latency between our own kernels, and wait in the kernel (pdl.cuh) before touching
// memory. Below sm_90 the attribute is not set.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/common/dynamic_smem.h"  // with_dynamic_smem, for the launchers

namespace int8attn {

template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, bool early, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (early) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace int8attn
