// Which rows the CUDA planner gives to the sm90a kernel's key-split CTAs (cuda/host/tail_plan.h):
// the grid model's makespans, tails taken where a partial last wave or a nearly empty last
// CTA per head wastes SMs, none for full grids, and every plan covering each head's rows.
#include "cuda/host/tail_plan.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace int8attn {
namespace {

constexpr int64_t kSms = 132;  // an H100 SXM or H200

TEST(TailPlan, GridMakespanOfWavesAndTails) {
  EXPECT_DOUBLE_EQ(grid_makespan(264, 10, 0, 5, kSms), 20);  // two full waves
  EXPECT_DOUBLE_EQ(grid_makespan(265, 10, 0, 5, kSms), 30);  // one CTA more: a third wave
  EXPECT_DOUBLE_EQ(grid_makespan(132, 10, 132, 5, kSms), 15);
  EXPECT_DOUBLE_EQ(grid_makespan(132, 10, 133, 5, kSms), 20);
  // 131 normal CTAs leave one SM free at 0: the two tail CTAs run there, one after the other.
  EXPECT_DOUBLE_EQ(grid_makespan(131, 10, 2, 5, kSms), 10);
  EXPECT_DOUBLE_EQ(grid_makespan(131, 10, 3, 5, kSms), 15);
  // Tails on the SMs that free first, then on the rest: 4 free at 0, 128 at 10.
  EXPECT_DOUBLE_EQ(grid_makespan(128, 10, 4 * 3 + 128, 4, kSms), 14);
  EXPECT_DOUBLE_EQ(grid_makespan(0, 10, 140, 4, kSms), 8);
}

// Each head's rows covered once: normal CTAs from row 0, then key-split ones of 64 rows, the
// last of them holding at least one row.
void expect_covers(const TailPlan& t, int64_t rows, int64_t block_m) {
  if (t.tail_m_tiles == 0) {
    EXPECT_EQ(t.m_tiles, (rows + block_m - 1) / block_m);
    return;
  }
  EXPECT_LT(t.m_tiles * block_m, rows);
  EXPECT_GE(t.m_tiles * block_m + t.tail_m_tiles * 64, rows);
  EXPECT_LT(t.m_tiles * block_m + (t.tail_m_tiles - 1) * 64, rows);
}

TEST(TailPlan, PartialLastWavesTakeKeySplitTails) {
  // SDXL's 4096-token layer with CFG: 20 heads x 22 CTAs of 192 rows (3.3 waves, the last CTA
  // of each head 64 rows): 19 CTAs a head and 7 key-split ones of 64 rows.
  TailPlan t = choose_tail(20, 4096, 192, 32, 3, kSms);
  EXPECT_EQ(t.m_tiles, 19);
  EXPECT_EQ(t.tail_m_tiles, 7);
  expect_covers(t, 4096, 192);
  // SD3 with CFG (4250 tokens, 48 heads): each head's last 26 rows in one key-split CTA, so
  // its 22 CTAs of 192 rows fill 8 waves exactly.
  t = choose_tail(48, 4250, 192, 34, 3, kSms);
  EXPECT_EQ(t.m_tiles, 22);
  EXPECT_EQ(t.tail_m_tiles, 1);
}

// The shapes of tests/gpu/test_gpu_attention.cpp's KeySplitCtasMergeTheirShares take
// key-split CTAs at 132 SMs (kv-heads, packed rows per kv-head, key tiles; head dims 40 and 64:
// three consumer warpgroups of 64 rows).
TEST(TailPlan, TheGpuTestsShapesTakeTails) {
  struct Shape {
    int64_t heads, rows, key_tiles;
    TailPlan want;
  };
  const Shape shapes[] = {
      {4, 1000, 5, {0, 16}}, {4, 1000, 5, {0, 16}},  {2, 1000, 5, {0, 16}},
      {4, 1000, 4, {0, 16}}, {12, 2500, 5, {11, 7}},
  };
  for (const Shape& s : shapes) {
    const TailPlan t = choose_tail(s.heads, s.rows, 192, s.key_tiles, 3, kSms);
    EXPECT_EQ(t.m_tiles, s.want.m_tiles) << s.heads << " " << s.rows;
    EXPECT_EQ(t.tail_m_tiles, s.want.tail_m_tiles) << s.heads << " " << s.rows;
  }
}

TEST(TailPlan, FullGridsKeepTheirCtas) {
  // Grids that end in (nearly) full waves, or whose tails would not end sooner.
  const TailPlan square = choose_tail(128, 8192, 128, 64, 2, kSms);  // 4 x 32 heads, 8K tokens
  EXPECT_EQ(square.tail_m_tiles, 0);
  EXPECT_EQ(square.m_tiles, 64);
  EXPECT_EQ(choose_tail(24, 4608, 128, 36, 2, kSms).tail_m_tiles, 0);    // Flux at 1024 px
  EXPECT_EQ(choose_tail(40, 32760, 128, 256, 2, kSms).tail_m_tiles, 0);  // Wan 480p
  // One consumer warpgroup has nobody to share keys with; empty problems plan no CTAs' tails.
  EXPECT_EQ(choose_tail(20, 4096, 64, 32, 1, kSms).tail_m_tiles, 0);
  EXPECT_EQ(choose_tail(0, 4096, 192, 32, 3, kSms).tail_m_tiles, 0);
}

TEST(TailPlan, EveryPlanCoversItsRowsAndPredictsNoLonger) {
  for (int64_t heads : {1, 2, 10, 20, 24, 48, 96})
    for (int64_t rows : {77, 256, 1024, 2048, 4096, 4250, 4608, 9000})
      for (int64_t consumers : {2, 3}) {
        const int64_t block_m = 64 * consumers, tiles = (rows + 127) / 128;
        const TailPlan t = choose_tail(heads, rows, block_m, tiles, consumers, kSms);
        expect_covers(t, rows, block_m);
        if (t.tail_m_tiles == 0) continue;
        const double a = kTailFixedTiles + tiles;
        const double b = kTailFixedTiles + (tiles + consumers - 1) / consumers + kTailMergeTiles;
        const double plain = grid_makespan(heads * ((rows + block_m - 1) / block_m), a, 0, b, kSms);
        EXPECT_LE(grid_makespan(heads * t.m_tiles, a, heads * t.tail_m_tiles, b, kSms),
                  kTailMinGain * plain)
            << heads << " " << rows << " " << consumers;
      }
}

}  // namespace
}  // namespace int8attn
