// Instantiations and launch of the few-keys wgmma kernel (attention_short_keys_wgmma.cuh), sm90a.
#include "cuda/sm90/attention_short_keys_wgmma.cuh"

#include "cuda/common/head_dims.h"

namespace int8attn {
namespace {

// The compiled counts of 16-key groups (a call's groups round up to the next one).
using KeyGroupCounts = HeadDims<2, 4, 5, 6, 8>;

// f(dpad, groups) as compile-time constants, for the compiled pairs.
template <typename F>
cudaError_t dispatch(int dpad, int groups, F&& f) {
  return WgmmaHeadDims::dispatch(dpad, [&](auto d) {
    return KeyGroupCounts::dispatch(groups, [&](auto g) { return f(d, g); });
  });
}

}  // namespace

bool short_keys_wgmma_head_dim(int dpad) { return WgmmaHeadDims::contains(dpad); }

int short_keys_wgmma_groups(int key_groups) {
  for (int g = key_groups < 1 ? 1 : key_groups; g <= kExactMaxKeys / 16; ++g)
    if (KeyGroupCounts::contains(g)) return g;
  return 0;
}

int short_keys_wgmma_smem_bytes(int dpad, int groups) {
  int bytes = 0;
  dispatch(dpad, groups, [&](auto d, auto g) {
    bytes = ShortKeysWgmmaTraits<d.value, false, g.value>::kSmemBytes;
    return cudaSuccess;
  });
  return bytes;
}

int short_keys_wgmma_ctas_per_sm(int dpad, int groups, int smem_per_sm) {
  int ctas = 1;
  dispatch(dpad, groups, [&](auto d, auto g) {
    using T = ShortKeysWgmmaTraits<d.value, false, g.value>;
    ctas = short_keys_resident_ctas(T::kSmemBytes, T::kMinBlocks, smem_per_sm);
    return cudaSuccess;
  });
  return ctas;
}

cudaError_t launch_attention_short_keys_wgmma(const ShortKeysParams& p, int dpad, cudaStream_t s) {
  return dispatch(dpad, p.key_groups, [&](auto d, auto g) {
    if (p.a.dtype == DType::kBF16)
      return launch_short_keys_wgmma_instance<d.value, true, g.value>(p, s);
    return launch_short_keys_wgmma_instance<d.value, false, g.value>(p, s);
  });
}

}  // namespace int8attn
