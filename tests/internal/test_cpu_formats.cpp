// The CPU backend's fast format conversions equal the reference maths of quant_math.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/quant_math.h"
#include "cpu/fp_convert.h"

using namespace int8attn;

TEST(CpuFormats, E4m3RoundMatchesQuantMath) {
  // Every float with |x| in [2^-12, 2^10] at a stride of 37 ulps, plus both signs.
  const uint32_t lo = cpu::f32_bits(1.0f / 4096.0f), hi = cpu::f32_bits(1024.0f);
  for (uint32_t u = lo; u <= hi; u += 37) {
    const float x = cpu::bits_f32(u);
    ASSERT_EQ(cpu::round_e4m3(x), qm::fp8_e4m3_round(x)) << x;
    ASSERT_EQ(cpu::round_e4m3(-x), qm::fp8_e4m3_round(-x)) << -x;
    const float r = cpu::round_e4m3(x);
    ASSERT_EQ(cpu::e4m3_decode(cpu::e4m3_encode_exact(r)), r) << x;
  }
  EXPECT_EQ(cpu::round_e4m3(0.0f), 0.0f);
  EXPECT_EQ(cpu::round_e4m3(1e9f), 448.0f);
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
