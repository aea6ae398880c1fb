// The format conversions of the CPU backend and quant_math.h against independent references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/quant_math.h"
#include "cpu/fp_convert.h"

using namespace int8attn;

// The one E4M3 rounder (qm::fp8_e4m3_round) against a brute-force search over all 127
// non-negative finite E4M3 values: the nearest one, ties to the even code, saturating at 448.
namespace {
float nearest_e4m3(float a) {
  float best = 0.0f;
  int best_code = 0;
  for (int code = 0; code < 0x7f; ++code) {  // 0x7f is NaN
    const float v = cpu::e4m3_decode(static_cast<uint8_t>(code));
    const float d = std::fabs(v - a), bd = std::fabs(best - a);
    if (d < bd || (d == bd && (code & 1) == 0 && (best_code & 1) == 1)) {
      best = v;
      best_code = code;
    }
  }
  return best;
}
}  // namespace

TEST(CpuFormats, E4m3RoundIsNearestEven) {
  // Every float with |x| in [2^-12, 2^10] at a stride of 37 ulps, plus both signs.
  const uint32_t lo = cpu::f32_bits(1.0f / 4096.0f), hi = cpu::f32_bits(1024.0f);
  for (uint32_t u = lo; u <= hi; u += 37) {
    const float x = cpu::bits_f32(u);
    const float r = qm::fp8_e4m3_round(x);
    ASSERT_EQ(r, nearest_e4m3(x)) << x;
    ASSERT_EQ(qm::fp8_e4m3_round(-x), -r) << -x;
    ASSERT_EQ(cpu::e4m3_decode(cpu::e4m3_encode_exact(r)), r) << x;
  }
  // Exact midpoints round to the even code: 1.0625 lies between 1.0 (code 0x38) and 1.125.
  EXPECT_EQ(qm::fp8_e4m3_round(1.0625f), 1.0f);
  EXPECT_EQ(qm::fp8_e4m3_round(1.1875f), 1.25f);
  EXPECT_EQ(qm::fp8_e4m3_round(0.0f), 0.0f);
  EXPECT_EQ(qm::fp8_e4m3_round(1e9f), 448.0f);
  EXPECT_TRUE(std::isnan(qm::fp8_e4m3_round(std::nanf(""))));
}

TEST(CpuFormats, HalfRoundTrip) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float f = cpu::f16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(cpu::f32_to_f16(f), h);
  }
  EXPECT_EQ(cpu::f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(cpu::f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(cpu::f32_to_bf16(1.0f), 0x3f80);
}
