// Instantiations and launch of the few-keys wgmma kernel (attention_short_keys_wgmma.cuh), sm90a.
#include "cuda/sm90/attention_short_keys_wgmma.cuh"

#include <type_traits>

#include "cuda/common/head_dims.h"

namespace int8attn {
namespace {

// The compiled counts of 16-key groups of the last chunk (a call's groups round up to the next
// one): with at most 128 keys (the only chunk), and after full chunks (as many as a full one).
using KeyGroupCounts = HeadDims<2, 4, 5, 6, 8>;
using LastChunkGroups = HeadDims<4>;

// f(dpad, groups, multi) as compile-time constants, for the compiled triples.
template <typename F>
cudaError_t dispatch(int dpad, int groups, bool multi, F&& f) {
  return WgmmaHeadDims::dispatch(dpad, [&](auto d) {
    if (multi)
      return LastChunkGroups::dispatch(
          groups, [&](auto g) { return f(d, g, std::integral_constant<bool, true>{}); });
    return KeyGroupCounts::dispatch(
        groups, [&](auto g) { return f(d, g, std::integral_constant<bool, false>{}); });
  });
}

// Head dims up to 32 run in the 64-channel instance: the copies zero the channels past D.
int wgmma_dpad(int dpad) { return dpad < 64 ? 64 : dpad; }

}  // namespace

bool short_keys_wgmma_layout(int dpad, int64_t nk, int smem_per_block, int smem_per_sm,
                             ShortKeysParams& p, int& ctas_per_sm) {
  dpad = wgmma_dpad(dpad);
  if (!WgmmaHeadDims::contains(dpad) || nk < 1) return false;
  const int groups = static_cast<int>((nk + 15) / 16);
  const bool multi = nk > kExactMaxKeys;
  const int chunk_groups = multi ? kShortKeysWgmmaChunkKeys / 16 : kExactMaxKeys / 16;
  p.full_chunks = multi ? (groups - 1) / chunk_groups : 0;
  const int last = groups - p.full_chunks * chunk_groups;
  p.key_groups = 0;
  for (int g = last; g <= chunk_groups && p.key_groups == 0; ++g)
    if (multi ? LastChunkGroups::contains(g) : KeyGroupCounts::contains(g)) p.key_groups = g;
  // Several warpgroups share a multi-chunk CTA's K/V where their Q buffers fit beside it.
  int max_warpgroups = 1;
  dispatch(dpad, p.key_groups, multi, [&](auto d, auto g, auto m) {
    max_warpgroups = ShortKeysWgmmaTraits<d.value, false, g.value, m.value>::kMaxWarpgroups;
    return cudaSuccess;
  });
  for (p.warpgroups = max_warpgroups; p.warpgroups >= 1; --p.warpgroups) {
    int smem = 0, min_blocks = 1;
    dispatch(dpad, p.key_groups, multi, [&](auto d, auto g, auto m) {
      using T = ShortKeysWgmmaTraits<d.value, false, g.value, m.value>;
      smem = T::smem_bytes(p.full_chunks, p.warpgroups);
      min_blocks = T::kMinBlocks;
      return cudaSuccess;
    });
    if (smem > 0 && smem <= smem_per_block) {
      ctas_per_sm = short_keys_resident_ctas(smem, min_blocks, smem_per_sm);
      return true;
    }
  }
  p.warpgroups = 1;
  return false;
}

cudaError_t launch_attention_short_keys_wgmma(const ShortKeysParams& p, int dpad, cudaStream_t s) {
  return dispatch(wgmma_dpad(dpad), p.key_groups, p.full_chunks > 0, [&](auto d, auto g, auto m) {
    if (p.a.dtype == DType::kBF16)
      return launch_short_keys_wgmma_instance<d.value, true, g.value, m.value>(p, s);
    return launch_short_keys_wgmma_instance<d.value, false, g.value, m.value>(p, s);
  });
}

}  // namespace int8attn
