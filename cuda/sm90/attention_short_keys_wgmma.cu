// Instantiations and launch of the few-keys wgmma kernel (attention_short_keys_wgmma.cuh), sm90a.
#include "cuda/sm90/attention_short_keys_wgmma.cuh"

#include <type_traits>

#include "cuda/common/head_dims.h"

namespace int8attn {
namespace {

// The compiled counts of 16-key groups of a one-chunk call (at most 128 keys; a call's groups
// round up to the next one). Longer calls run in chunks of 64 keys.
using KeyGroupCounts = HeadDims<2, 4, 5, 6, 8>;
constexpr int kMultiGroups = kShortKeysWgmmaChunkKeys / 16;

// f(dpad, groups, multi) as compile-time constants, for the compiled triples.
template <typename F>
cudaError_t dispatch(int dpad, int groups, bool multi, F&& f) {
  return ShortKeysWgmmaHeadDims::dispatch(dpad, [&](auto d) {
    if (multi)
      return f(d, std::integral_constant<int, kMultiGroups>{},
               std::integral_constant<bool, true>{});
    return KeyGroupCounts::dispatch(
        groups, [&](auto g) { return f(d, g, std::integral_constant<bool, false>{}); });
  });
}

// Head dims up to 32 run in the 64-channel instance: the copies zero the channels past D.
int wgmma_dpad(int dpad) { return dpad < 64 ? 64 : dpad; }

}  // namespace

bool short_keys_wgmma_layout(int dpad, int64_t nk, int smem_per_block, int smem_per_sm,
                             ShortKeysParams& p,
                             int (&ctas_per_sm)[kShortKeysWgmmaMaxWarpgroups + 1]) {
  dpad = wgmma_dpad(dpad);
  if (!ShortKeysWgmmaHeadDims::contains(dpad) || nk < 1) return false;
  const int groups = static_cast<int>((nk + 15) / 16);
  const bool multi = nk > kExactMaxKeys;
  p.full_chunks = multi ? (groups - 1) / kMultiGroups : 0;
  p.key_groups = multi ? kMultiGroups : 0;
  for (int g = groups; !multi && g <= kExactMaxKeys / 16 && p.key_groups == 0; ++g)
    if (KeyGroupCounts::contains(g)) p.key_groups = g;
  // Several warpgroups share a multi-chunk CTA's K/V where their Q buffers fit beside it.
  int max_warpgroups = 1, min_blocks = 1, smem[kShortKeysWgmmaMaxWarpgroups + 1] = {};
  dispatch(dpad, p.key_groups, multi, [&](auto d, auto g, auto m) {
    using T = ShortKeysWgmmaTraits<d.value, false, g.value, m.value>;
    static_assert(T::kMaxWarpgroups <= kShortKeysWgmmaMaxWarpgroups, "");
    max_warpgroups = T::kMaxWarpgroups;
    min_blocks = T::kMinBlocks;
    for (int w = 1; w <= T::kMaxWarpgroups; ++w) smem[w] = T::smem_bytes(p.full_chunks, w);
    return cudaSuccess;
  });
  for (p.warpgroups = max_warpgroups; p.warpgroups >= 1; --p.warpgroups)
    if (smem[p.warpgroups] > 0 && smem[p.warpgroups] <= smem_per_block) break;
  if (p.warpgroups < 1) {
    p.warpgroups = 1;
    return false;
  }
  // A multi-chunk instance's registers are sized for its most warpgroups in one CTA.
  for (int w = 1; w <= kShortKeysWgmmaMaxWarpgroups; ++w)
    ctas_per_sm[w] = w > p.warpgroups
                         ? 0
                         : short_keys_resident_ctas(
                               smem[w], multi ? max_warpgroups / w : min_blocks, smem_per_sm);
  return true;
}

cudaError_t launch_attention_short_keys_wgmma(const ShortKeysParams& p, int dpad, cudaStream_t s) {
  return dispatch(wgmma_dpad(dpad), p.key_groups, p.full_chunks > 0, [&](auto d, auto g, auto m) {
    if (p.a.dtype == DType::kBF16)
      return launch_short_keys_wgmma_instance<d.value, true, g.value, m.value>(p, s);
    return launch_short_keys_wgmma_instance<d.value, false, g.value, m.value>(p, s);
  });
}

}  // namespace int8attn
