// Host launcher of the split-KV merge kernel (combine.cu).
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

namespace int8attn {

struct CombineParams {
  const float* part_o = nullptr;    // [split][B][Hq][Nq][D]
  const float* part_lse = nullptr;  // [split][B][Hq][Nq], natural log
  int num_splits = 1, B = 0, Hq = 0, Nq = 0, D = 0;
  void* o = nullptr;
  int64_t o_stride[4] = {0, 0, 0, 0};
  int dtype = 1;
  float* lse = nullptr;
  int64_t lse_stride[3] = {0, 0, 0};
  bool launch_early = false;  // sm_90+: launches while the split kernel finishes (host/launch.h)
};

cudaError_t launch_combine(const CombineParams& p, cudaStream_t stream);

}  // namespace int8attn
