// FastDiv (cuda/common/fast_div.h) against integer division: every divisor up to 4096 with the
// numerators around each multiple, then large divisors and numerators near 2^31.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "cuda/common/fast_div.h"

namespace {

using int8attn::FastDiv;

void expect_exact(uint32_t n, uint32_t d, const FastDiv& f) {
  ASSERT_EQ(f.div(n), n / d) << "n=" << n << " d=" << d;
}

TEST(FastDiv, SmallDivisorsAroundEveryMultiple) {
  for (uint32_t d = 1; d <= 4096; ++d) {
    const FastDiv f = FastDiv::of(d);
    for (uint32_t k = 0; k <= 70; ++k)
      for (uint32_t n : {k * d, k * d + d - 1, k * d + d / 2}) expect_exact(n, d, f);
    for (uint32_t n : {0x7fffffffu, 0x7fffffffu - d, 0x7fffffffu / d * d, 0x7fffffffu / d * d - 1})
      expect_exact(n, d, f);
  }
}

TEST(FastDiv, LargeDivisorsAndNumerators) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(1, 0x7fffffffu);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t d = i < 31 ? (1u << i) + (i % 2) : any(rng);
    const FastDiv f = FastDiv::of(d);
    for (int j = 0; j < 16; ++j) expect_exact(any(rng) - 1, d, f);
    const uint32_t top = 0x7fffffffu / d * d;
    expect_exact(top, d, f);
    expect_exact(top - 1, d, f);
    expect_exact(d - 1, d, f);
    expect_exact(d, d, f);
  }
}

}  // namespace
