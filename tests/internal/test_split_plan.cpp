// How the CUDA planner divides key ranges among CTAs (cuda/host/split_plan.h): grids under one
// wave split every item's key range, within one wave and without empty splits; grids of a wave
// or more are not split.
#include "cuda/host/split_plan.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace int8attn {
namespace {

constexpr int64_t kWave = 132;  // one CTA per SM on an H100

// Every key tile in exactly one split, no split empty, the grid within one wave.
void expect_consistent(const SplitPlan& s, int64_t items, int64_t key_tiles, int64_t min_tiles) {
  if (s.splits == 1) return;
  EXPECT_GE(static_cast<int64_t>(s.splits) * s.tiles_per_split, key_tiles);
  EXPECT_LT(static_cast<int64_t>(s.splits - 1) * s.tiles_per_split, key_tiles);
  EXPECT_LE(items * s.splits, kWave);
  EXPECT_GE(s.tiles_per_split, min_tiles);
  EXPECT_LE(s.splits, 128);
}

TEST(SplitPlan, SmallGridsSplitEveryItemWithinOneWave) {
  // 8 prefill items of 64 tiles: 16 splits of 4 tiles fill 128 of the 132 SMs.
  SplitPlan s = choose_splits(8, 64, kWave, 4);
  EXPECT_EQ(s.splits, 16);
  EXPECT_EQ(s.tiles_per_split, 4);
  // One decode item (1-warp CTAs, four per SM) of 512 tiles: past 32 splits each keeps 4 tiles.
  s = choose_splits(1, 512, 4 * kWave, 1);
  EXPECT_EQ(s.splits, 128);
  EXPECT_EQ(s.tiles_per_split, 4);
  // A ragged tile count: 100 tiles over at most 16 splits of 7, never an empty one.
  s = choose_splits(8, 100, kWave, 4);
  EXPECT_EQ(s.tiles_per_split, 7);
  EXPECT_EQ(s.splits, 15);
  for (int64_t items : {1, 3, 8, 40, 66})  // at least two splits fit the wave
    for (int64_t tiles : {8, 9, 33, 64, 257, 1024}) {
      const SplitPlan p = choose_splits(items, tiles, kWave, 4);
      EXPECT_GT(p.splits, 1) << items << " " << tiles;
      expect_consistent(p, items, tiles, 4);
    }
}

TEST(SplitPlan, FullGridsAndShortKeysAreNotSplit) {
  for (int64_t items : {kWave, kWave + 1, 3 * kWave + 44, 24 * kWave})
    EXPECT_EQ(choose_splits(items, 36, kWave, 4).splits, 1) << items;
  EXPECT_EQ(choose_splits(8, 7, kWave, 4).splits, 1);     // fewer than 8 key tiles
  EXPECT_EQ(choose_splits(100, 64, kWave, 4).splits, 1);  // 2 splits would exceed the wave
}

}  // namespace
}  // namespace int8attn
