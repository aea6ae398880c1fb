// Which of a head's query rows the sm90a kernel gives to key-split CTAs
// (AttnKernelParams::tail_m_tiles, sm90/wgmma_key_split.cuh), as pure arithmetic on counts, so
// that the planner's choice is unit-tested without a GPU (tests/internal).
//
// The kernel runs one CTA per SM, and the hardware hands the grid's CTAs out in order to
// whichever SM frees first. A grid of 3.3 waves runs as 4 (SDXL's 4096-token layers); a head
// whose rows end a few past a multiple of the CTA's rows (SD3's 4250 tokens) spends a whole CTA
// on them. A key-split CTA does 64 rows with every consumer warpgroup walking a share of the
// keys: shorter CTAs, so the last wave's SMs end closer together. They cost more per row (their
// fixed cost and their merge), so they are taken only where the model below predicts a shorter
// grid by a margin.
#pragma once

#include <algorithm>
#include <cstdint>

namespace int8attn {

struct TailPlan {
  int64_t m_tiles = 0;       // CTAs of block_m rows per head, from row 0
  int64_t tail_m_tiles = 0;  // then key-split CTAs of 64 rows per head (0: none)
};

// Costs in key tiles walked (tiles of the kernel's kBN keys): a CTA's fixed cost (its Q rows,
// its pipeline's first tile, its output) measured at 10-16 tiles' time at head dim 128 and ~10
// at 64 (bench/cta_cost.py, docs/design/cuda.md); the merge of a key-split CTA's shares about
// one.
constexpr double kTailFixedTiles = 10.0, kTailMergeTiles = 1.0;
// A tail is taken only where it predicts a grid at least this much shorter.
constexpr double kTailMinGain = 0.97;
// Normal CTAs per head given up to key-split ones, at most.
constexpr int64_t kTailMaxTiles = 8;

// The time to run `normal` CTAs of cost a, then `tail` CTAs of cost b, on `sms` SMs, one CTA
// each, in order, each to the SM that frees first. After the normal CTAs the SMs free in two
// groups (those that ran one CTA more, and the others), so the tail CTAs take the slots
// start + k·b of two arithmetic sequences, smallest first.
inline double grid_makespan(int64_t normal, double a, int64_t tail, double b, int64_t sms) {
  const int64_t q = normal / sms, r = normal % sms;
  const int64_t n_a = sms - r, n_b = r;  // SMs free at q·a, and at (q + 1)·a
  const double t_a = static_cast<double>(q) * a, t_b = t_a + a;
  double end = n_b > 0 ? t_b : t_a;
  double x_a = t_a, x_b = t_b;
  for (int64_t left = tail; left > 0;) {
    if (n_b == 0 || x_a <= x_b) {
      end = std::max(end, x_a + b);
      left -= n_a;
      x_a += b;
    } else {
      end = std::max(end, x_b + b);
      left -= n_b;
      x_b += b;
    }
  }
  return end;
}

// heads: B·Hkv; rows: packed query rows per head; block_m: rows of a normal CTA (64 per
// consumer warpgroup); key_tiles: key tiles its rows see; sms: the device's SMs.
inline TailPlan choose_tail(int64_t heads, int64_t rows, int64_t block_m, int64_t key_tiles,
                            int64_t consumers, int64_t sms) {
  TailPlan plan;
  plan.m_tiles = (rows + block_m - 1) / block_m;
  if (heads < 1 || rows < 1 || key_tiles < 1 || consumers < 2 || sms < 1) return plan;
  const double a = kTailFixedTiles + static_cast<double>(key_tiles);
  const double b = kTailFixedTiles + static_cast<double>((key_tiles + consumers - 1) / consumers) +
                   kTailMergeTiles;
  const double plain = grid_makespan(heads * plan.m_tiles, a, 0, b, sms);
  double best = plain;
  TailPlan best_plan = plan;
  for (int64_t g = plan.m_tiles - 1; g >= std::max<int64_t>(0, plan.m_tiles - kTailMaxTiles); --g) {
    const int64_t tail = (rows - g * block_m + 63) / 64;
    const double t = grid_makespan(heads * g, a, heads * tail, b, sms);
    if (t < best) {
      best = t;
      best_plan = {g, tail};
    }
  }
  return best <= kTailMinGain * plain ? best_plan : plan;
}

}  // namespace int8attn
