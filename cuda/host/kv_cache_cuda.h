// The GPU K/V cache: canonical quantized buffers (the layouts of attention_params.h) sized for
// the capacity, filled by appends, read directly by the attention kernel.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "core/backend.h"
#include "cuda/common/attention_params.h"

namespace int8attn {

std::unique_ptr<KvCacheImpl> make_cuda_kv_cache(const CacheSpec& spec, Backend& backend,
                                                cudaStream_t stream);
// The K/V fields of AttnKernelParams for attention against `cache` (a CUDA cache).
AttnKernelParams cuda_kv_cache_params(const KvCacheImpl& cache);

}  // namespace int8attn
