// Instantiations and launch of the few-keys kernel (attention_short_keys.cuh), compiled for every
// architecture of the build (fp16/bf16 mma.sync, cp.async and ldmatrix are sm80 and later).
#include "cuda/common/attention_short_keys.cuh"

#include "cuda/common/head_dims.h"

namespace int8attn {

bool short_keys_head_dim(int dpad) { return MmaHeadDims::contains(dpad); }

int short_keys_smem_bytes(int dpad, int key_groups) {
  int bytes = 0;
  MmaHeadDims::dispatch(dpad, [&](auto d) {
    bytes = ShortKeysTraits<d.value, false>::smem_bytes(key_groups);
    return cudaSuccess;
  });
  return bytes;
}

int short_keys_ctas_per_sm(int dpad, int key_groups, int smem_per_sm) {
  int ctas = 1;
  MmaHeadDims::dispatch(dpad, [&](auto d) {
    using T = ShortKeysTraits<d.value, false>;
    ctas = short_keys_resident_ctas(T::smem_bytes(key_groups), T::kMinBlocks, smem_per_sm);
    return cudaSuccess;
  });
  return ctas;
}

cudaError_t launch_attention_short_keys(const ShortKeysParams& p, int dpad, cudaStream_t s) {
  return MmaHeadDims::dispatch(dpad, [&](auto d) {
    if (p.a.dtype == DType::kBF16) return launch_short_keys_instance<d.value, true>(p, s);
    return launch_short_keys_instance<d.value, false>(p, s);
  });
}

}  // namespace int8attn
