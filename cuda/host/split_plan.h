// How the attention grid divides the key range among CTAs (split-KV), as pure arithmetic on
// counts, so that the planner's choice is unit-tested without a GPU (tests/internal).
#pragma once

#include <algorithm>
#include <cstdint>

namespace int8attn {

struct SplitPlan {
  int splits = 1;           // CTAs per (batch, kv-head, m-tile) item (1: no split, no combine)
  int tiles_per_split = 0;  // key tiles per split CTA
};

// When the `items` (b, kv-head, m-tile) CTAs alone cannot fill the GPU (decode, small batches),
// every item's key range is split so the grid stays within `wave` CTAs (what fits beside each
// other on all SMs: one wave), each split at least `min_tiles` key tiles long. Rounding up
// instead would turn a grid of 128 CTAs into two waves of 256 half-length ones plus a combine (a
// 1024-token head-dim-80 layer). Past 32 splits every split keeps at least 4 tiles: below that
// the combine's extra splits and the CTAs' fixed cost outweigh the shorter key ranges (1-warp
// decode CTAs, 8K keys: 64 splits of 2 tiles 5% slower than 32 of 4; 4K keys: 32 of 2 10% faster
// than 16 of 4 and than 64 of 1). Grids of a wave or more are not split (docs/design/cuda.md:
// splitting only a partial last wave lost to its combine).
inline SplitPlan choose_splits(int64_t items, int64_t key_tiles, int64_t wave, int64_t min_tiles) {
  constexpr int64_t kManySplits = 32, kMinTilesPastMany = 4;
  int64_t splits = 1;
  if (items < wave && key_tiles >= 8) {
    splits = std::min<int64_t>(wave / items, key_tiles / min_tiles);
    if (splits > kManySplits)
      splits = std::max(kManySplits, std::min<int64_t>(splits, key_tiles / kMinTilesPastMany));
    splits = std::max<int64_t>(1, std::min<int64_t>(splits, 128));
  }
  const int64_t per = std::max<int64_t>((key_tiles + splits - 1) / splits, 1);
  SplitPlan s;
  s.splits = static_cast<int>(splits > 1 ? (key_tiles + per - 1) / per : 1);
  s.tiles_per_split = static_cast<int>(per);
  return s;
}

}  // namespace int8attn
